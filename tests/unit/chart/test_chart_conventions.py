"""The chart follows Helm's conventions: standard labels, name overrides, service account switches,
an optional ServiceMonitor, NOTES.txt with next steps, and validation in its own template."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from dralab_kit.provision.chart import chart_dir

from .conftest import Render, run_helm

pytestmark = pytest.mark.slow

STANDARD = ("app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/version",
            "app.kubernetes.io/managed-by", "app.kubernetes.io/part-of", "helm.sh/chart")  # fmt: skip
EVERYTHING = {
    "nameOverride": "accel",
    "serviceAccount": {"create": False, "name": "shared", "annotations": {"example.com/role": "r"}},
    "metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "prom"}}},
}


def of_kind(objs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == kind]


def named(objs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [o for o in of_kind(objs, kind) if o["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name} among {[o['metadata']['name'] for o in of_kind(objs, kind)]}"
    return found[0]


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


@pytest.mark.parametrize("values", [{}, EVERYTHING, {"fullnameOverride": "edge", "webhook": {"replicas": 1}}])
def test_lint_strict_passes_with_the_conventions_switched_on(helm: Path, values: dict) -> None:
    out = run_helm(helm, "lint", "--strict", str(chart_dir()), values=values, check=False)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("values", [{}, EVERYTHING])
def test_every_object_carries_the_standard_labels(render: Render, values: dict) -> None:
    for obj in render(values, release="prod"):
        labels = obj["metadata"].get("labels", {})
        where = f"{obj['kind']}/{obj['metadata']['name']}"
        assert [k for k in STANDARD if k not in labels] == [], where
        assert labels["app.kubernetes.io/managed-by"] == "Helm", where
        assert labels["app.kubernetes.io/instance"] == "prod", where
        assert labels["app.kubernetes.io/name"] == values.get("nameOverride", "dralab"), where


def test_name_overrides_rename_every_object_and_keep_selectors_matching(render: Render) -> None:
    objs = render({"nameOverride": "accel"}, release="prod")
    deployment = named(objs, "Deployment", "prod-accel-webhook")
    named(objs, "DaemonSet", "prod-accel-driver")
    named(objs, "ConfigMap", "prod-accel-config")
    template_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert selects(deployment["spec"]["selector"]["matchLabels"], template_labels)
    assert selects(named(objs, "Service", "prod-accel-webhook")["spec"]["selector"], template_labels)

    objs = render({"fullnameOverride": "edge"}, release="prod")
    names = {o["metadata"]["name"] for o in objs if o["metadata"].get("namespace")}
    assert {"edge-webhook", "edge-driver", "edge-config", "edge-webhook-tls"} <= names
    assert not [n for n in names if n.startswith("prod")]


def test_service_accounts_are_created_by_default_one_per_component(render: Render) -> None:
    objs = render()
    assert {o["metadata"]["name"] for o in of_kind(objs, "ServiceAccount")} == {"dralab-webhook", "dralab-driver"}
    pod = named(objs, "Deployment", "dralab-webhook")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "dralab-webhook"


def test_existing_service_accounts_are_used_and_bound_when_create_is_false(render: Render) -> None:
    objs = render({"serviceAccount": {"create": False, "name": "shared"}}, namespace="ops")
    assert of_kind(objs, "ServiceAccount") == []
    assert of_kind(objs, "Deployment")[0]["spec"]["template"]["spec"]["serviceAccountName"] == "shared-webhook"
    assert of_kind(objs, "DaemonSet")[0]["spec"]["template"]["spec"]["serviceAccountName"] == "shared-driver"
    subjects = {b["metadata"]["name"]: b["subjects"] for b in of_kind(objs, "ClusterRoleBinding")}
    assert subjects["dralab-webhook"] == [{"kind": "ServiceAccount", "name": "shared-webhook", "namespace": "ops"}]
    assert subjects["dralab-driver"] == [{"kind": "ServiceAccount", "name": "shared-driver", "namespace": "ops"}]
    policy = of_kind(objs, "ValidatingAdmissionPolicy")[0]
    assert "system:serviceaccount:ops:shared-driver" in policy["spec"]["matchConditions"][0]["expression"]


def test_service_account_annotations_go_on_both_accounts(render: Render) -> None:
    objs = render({"serviceAccount": {"annotations": {"example.com/role": "r"}}})
    assert [o["metadata"]["annotations"] for o in of_kind(objs, "ServiceAccount")] == [{"example.com/role": "r"}] * 2


def test_service_monitor_is_off_by_default(render: Render) -> None:
    assert of_kind(render(), "ServiceMonitor") == []


def test_service_monitors_select_the_webhook_and_the_driver(render: Render) -> None:
    objs = render({"metrics": {"serviceMonitor": {"enabled": True, "interval": "15s", "labels": {"release": "p"}}}})
    monitors = {o["metadata"]["name"]: o for o in of_kind(objs, "ServiceMonitor")}
    assert set(monitors) == {"dralab-webhook", "dralab-driver"}
    services = {o["metadata"]["name"]: o for o in of_kind(objs, "Service")}
    pods = {
        "dralab-webhook": named(objs, "Deployment", "dralab-webhook")["spec"]["template"]["metadata"]["labels"],
        "dralab-driver": named(objs, "DaemonSet", "dralab-driver")["spec"]["template"]["metadata"]["labels"],
    }
    for name, monitor in monitors.items():
        assert monitor["metadata"]["labels"]["release"] == "p"
        (endpoint,) = monitor["spec"]["endpoints"]
        assert endpoint["interval"] == "15s" and endpoint["path"] == "/metrics"
        # the monitor selects exactly one Service, which has the named port and selects the component's pods
        wanted = monitor["spec"]["selector"]["matchLabels"]
        chosen = [s for s in services.values() if selects(wanted, s["metadata"]["labels"])]
        assert len(chosen) == 1, name
        assert endpoint["port"] in {p["name"] for p in chosen[0]["spec"]["ports"]}
        assert selects(chosen[0]["spec"]["selector"], pods[name])
    webhook = monitors["dralab-webhook"]["spec"]["endpoints"][0]
    assert webhook["scheme"] == "https"
    assert webhook["tlsConfig"]["ca"]["secret"] == {"name": "dralab-webhook-tls", "key": "ca.crt"}
    assert webhook["tlsConfig"]["serverName"] == "dralab-webhook.dralab-system.svc"
    assert monitors["dralab-driver"]["spec"]["endpoints"][0]["scheme"] == "http"


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"webhook": {"certManager": {"enabled": False}}}, "set webhook.tls.secretName"),
        ({"vendors": {"enabled": ["metax"]}}, "neither a shipped vendor"),
        ({"metrics": {"serviceMonitor": {"enabled": True}}, "webhook": {"enabled": False},
          "driver": {"enabled": False}}, "nothing to scrape"),
    ],
)  # fmt: skip
def test_validation_fails_from_its_own_template(helm: Path, values: dict, message: str) -> None:
    out = run_helm(helm, "template", "x", str(chart_dir()), values=values, check=False)
    assert out.returncode != 0
    assert message in out.stderr
    assert "templates/validate.yaml" in out.stderr, out.stderr


@pytest.mark.parametrize(
    ("values", "field"),
    [({"serviceAccount": {"create": "yes"}}, "serviceAccount.create"),
     ({"metrics": {"serviceMonitor": {"interval": "often"}}}, "metrics.serviceMonitor.interval"),
     ({"nameOverride": "x" * 64}, "nameOverride")],
)  # fmt: skip
def test_schema_rejects_bad_convention_values_naming_the_field(helm: Path, values: dict, field: str) -> None:
    out = run_helm(helm, "template", "x", str(chart_dir()), values=values, check=False)
    assert out.returncode != 0
    assert field.split(".")[-1] in out.stderr, out.stderr


def render_notes(helm: Path, tmp_path: Path, *args: str) -> str:
    """NOTES.txt as `helm install` prints it, without a cluster: a copy of the chart gets one more
    template that includes the notes (every file of templates/ is in one template set)."""
    chart = tmp_path / "dralab"
    shutil.copytree(chart_dir(), chart)
    (chart / "templates" / "zz-notes.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes\n"
        'data:\n  notes: {{ include "dralab/templates/NOTES.txt" . | quote }}\n'
    )
    out = run_helm(helm, "template", *args, str(chart), "--show-only", "templates/zz-notes.yaml")
    return yaml.safe_load(out.stdout)["data"]["notes"]


def test_notes_give_the_next_steps(helm: Path, tmp_path: Path) -> None:
    switches = ["--set", "metrics.serviceMonitor.enabled=true", "--set", "vendors.enabled={ascend}"]
    notes = render_notes(helm, tmp_path, "prod", "--namespace", "ops", *switches)
    assert "release prod in namespace ops" in notes
    assert "kubectl -n ops rollout status deployment/prod-dralab-webhook" in notes
    assert "kubectl -n ops rollout status daemonset/prod-dralab-driver" in notes
    assert "kubectl get deviceclasses hami-vnpu-core.project-hami.io\n" in notes
    assert "dralab convert -f pod.yaml" in notes
    assert "describe certificate prod-dralab-webhook-tls" in notes
    assert "ServiceMonitors" in notes


def test_notes_follow_the_values(helm: Path, tmp_path: Path) -> None:
    notes = render_notes(helm, tmp_path, "x", "--set", "webhook.enabled=false")
    assert "deployment/" not in notes and "certificate" not in notes
    assert "daemonset/x-dralab-driver" in notes
    assert "The fake backend" in notes and "ServiceMonitors" not in notes
