"""Chart: HAMi's device config handed to the webhook, the migration config, Volcano entry, monitor objects."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from dralab.config import parse_config
from dralab.model.hami_config import parse_document, translate
from dralab.model.vendors import builtin_table_data
from dralab.webhook.registration import webhook_configurations
from dralab_kit.provision.chart import config_from_values, merged_values

from .conftest import Render

HAMI = (Path(__file__).parents[1] / "model" / "fixtures" / "hami" / "hami-dra-renamed.yaml").read_text()


def _kind(objs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objs if o.get("kind") == kind]


def _named(objs: list[dict[str, Any]], kind: str, suffix: str) -> dict[str, Any]:
    (obj,) = [o for o in _kind(objs, kind) if o["metadata"]["name"].endswith(suffix)]
    return obj


def test_hami_config_reaches_the_webhook_and_turns_migration_on(render: Render) -> None:
    values = {"migration": {"hamiConfig": HAMI, "claimLabels": {"team": "ml"}}}
    objs = render(values)
    cm = _named(objs, "ConfigMap", "-hami-config")
    # the text the webhook reads is the HAMi file, and it translates
    translated = translate(parse_document(cm["data"]["device-config.yaml"], "cm"), builtin_table_data())
    assert translated.vendors["nvidia"]["resources"]["count"] == "corp.example/vgpu"
    deployment = _named(objs, "Deployment", "-webhook")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    args = container["args"]
    assert args[args.index("--hami-config") + 1] == "/etc/dralab-hami/device-config.yaml"
    assert {"name": "hami-config", "mountPath": "/etc/dralab-hami", "readOnly": True} in container["volumeMounts"]
    volume = next(v for v in deployment["spec"]["template"]["spec"]["volumes"] if v["name"] == "hami-config")
    assert volume["configMap"]["name"] == cm["metadata"]["name"]
    rendered = yaml.safe_load(_named(objs, "ConfigMap", "dralab-config")["data"]["config.yaml"])
    assert rendered == config_from_values(merged_values(values))
    cfg = parse_config(rendered, "chart")
    assert cfg.migration.enabled and cfg.migration.adopts and cfg.migration.claim_labels == {"team": "ml"}


def test_a_hami_config_lifts_the_claim_delete_policy(render: Render) -> None:
    def policies(values: dict[str, Any]) -> list[str]:
        return [o["metadata"]["name"] for o in _kind(render(values), "ValidatingAdmissionPolicy")
                if o["metadata"]["name"].endswith("-managed-claims")]

    assert policies({}) and not policies({"migration": {"hamiConfig": HAMI}})


def test_existing_configmap_is_mounted_instead(render: Render) -> None:
    objs = render({"migration": {"hamiConfigMap": {"name": "hami-scheduler-device"}}})
    assert not [o for o in _kind(objs, "ConfigMap") if o["metadata"]["name"].endswith("-hami-config")]
    deployment = _named(objs, "Deployment", "-webhook")
    volume = next(v for v in deployment["spec"]["template"]["spec"]["volumes"] if v["name"] == "hami-config")
    assert volume["configMap"] == {"name": "hami-scheduler-device",
                                   "items": [{"key": "device-config.yaml", "path": "device-config.yaml"}]}


def test_no_migration_by_default(render: Render) -> None:
    objs = render({})
    args = _named(objs, "Deployment", "-webhook")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--hami-config" not in args
    assert not [o for o in objs if "-monitor" in o["metadata"]["name"]]
    rendered = yaml.safe_load(_named(objs, "ConfigMap", "dralab-config")["data"]["config.yaml"])
    assert parse_config(rendered, "chart").migration.adopts is False


def test_volcano_entry_matches_dralabs_registration(render: Render) -> None:
    objs = render({"migration": {"volcanoJobs": True}})
    (mutating,) = _kind(objs, "MutatingWebhookConfiguration")
    chart_hook = mutating["webhooks"][1]
    cfg = parse_config({"migration": {"volcanoJobs": True}})
    ours = webhook_configurations(cfg, url=None, service={"namespace": "x", "name": "y"}, ca_bundle=b"c",
                                  own_namespace="dralab-system")[0]["webhooks"][1]
    for key in ("name", "rules", "matchConditions", "sideEffects", "matchPolicy", "reinvocationPolicy"):
        assert chart_hook[key] == ours[key], key


def test_monitor_objects(render: Render) -> None:
    objs = render({"monitor": {"enabled": True, "serviceMonitor": {"enabled": True},
                               "grafanaDashboard": {"enabled": True}}})
    role = _named(objs, "ClusterRole", "-monitor")
    assert role["rules"] == [{"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices", "resourceclaims"],
                              "verbs": ["list", "watch"]}]
    container = _named(objs, "Deployment", "-monitor")["spec"]["template"]["spec"]["containers"][0]
    assert container["args"] == ["monitor", "--host", "0.0.0.0", "--port", "9464"]
    sm = _named(objs, "ServiceMonitor", "-monitor")
    assert sm["spec"]["endpoints"][0]["port"] == "metrics"
    dashboard = _named(objs, "ConfigMap", "-monitor-dashboard")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    panels = json.loads(dashboard["data"]["dralab-allocation.json"])["panels"]
    exprs = " ".join(t["expr"] for p in panels for t in p["targets"])
    for metric in ("dralab_device_memory_allocated_bytes", "dralab_device_shares", "dralab_namespace_cores_allocated",
                   "dralab_pod_memory_allocated_bytes"):
        assert metric in exprs


def test_a_fleet_turns_hamis_metric_names_off(render: Render) -> None:
    objs = render({"monitor": {"enabled": True, "hamiMetrics": False}})
    container = _named(objs, "Deployment", "-monitor")["spec"]["template"]["spec"]["containers"][0]
    assert container["args"] == ["monitor", "--host", "0.0.0.0", "--port", "9464", "--no-hami-metrics"]


def test_a_hami_config_sends_every_domain_qualified_resource(render: Render) -> None:
    def condition(values: dict[str, Any]) -> str:
        (mutating,) = _kind(render(values), "MutatingWebhookConfiguration")
        return mutating["webhooks"][0]["matchConditions"][0]["expression"]

    assert 'k.startsWith("nvidia.com/")' in condition({})
    renamed = condition({"migration": {"hamiConfig": HAMI}})
    assert 'k.contains("/")' in renamed and "startsWith" not in renamed
