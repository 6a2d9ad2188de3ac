"""The chart rendered and linted by a helm built from its Go module: objects, config, scoping, RBAC."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest
import yaml

from dralab.config import parse_config
from dralab.model.objects import device_classes
from dralab_kit.provision.chart import chart_dir, chart_values, config_from_values, merged_values

from .conftest import Render, run_helm

pytestmark = pytest.mark.slow


def by_kind(objs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == kind]


def one(objs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = by_kind(objs, kind)
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]


def test_lint_strict_passes_for_every_backend(helm) -> None:
    for backend in ("fake", "ascend", "nvidia"):
        out = run_helm(helm, "lint", "--strict", str(chart_dir()), values=chart_values(backend=backend), check=False)
        assert out.returncode == 0, out.stdout + out.stderr


def test_default_render_has_every_component(render: Render) -> None:
    kinds = sorted({o["kind"] for o in render()})
    assert kinds == sorted(
        [
            "Certificate", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "DaemonSet", "Deployment",
            "DeviceClass", "FlowSchema", "Issuer", "MutatingWebhookConfiguration", "PodDisruptionBudget", "Role",
            "RoleBinding", "RuntimeClass", "Service",
            "ServiceAccount", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
            "ValidatingWebhookConfiguration",
        ]
    )  # fmt: skip


def test_runtime_class_ascend_is_rendered_for_lab20(render: Render) -> None:
    assert one(render(), "RuntimeClass")["handler"] == "ascend"


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        chart_values(backend="ascend", lifecycle="template"),
        chart_values(backend="nvidia", vendors=["nvidia", "hygon"]),
        {"webhook": {"excludeNamespaces": ["kube-system", "monitoring"], "failurePolicy": "Ignore"}},
        {
            "webhook": {
                "namespaceSelector": {"matchLabels": {"team": "ml"}},
                "objectSelector": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gpu"]}]},
            }
        },
        {"driver": {"enforcementLibrary": "/opt/hami/libvgpu.so", "cdiDir": "/etc/cdi"}},
    ],
)
def test_rendered_config_is_the_python_mapping_and_valid(render: Render, overrides: dict) -> None:
    objs = render(overrides)
    cm = one(objs, "ConfigMap")
    rendered = yaml.safe_load(cm["data"]["config.yaml"])
    assert rendered == config_from_values(merged_values(overrides))
    cfg = parse_config(rendered, "rendered chart")
    # the DeviceClasses are exactly what dralab creates elsewhere for the enabled vendors
    classes = {o["metadata"]["name"]: o["spec"] for o in by_kind(objs, "DeviceClass")}
    expected = {o["metadata"]["name"]: o["spec"] for o in device_classes(cfg.vendors)}
    assert classes == expected


@pytest.mark.parametrize(
    "webhook",
    [{}, {"namespaceSelector": {"matchLabels": {"team": "ml"}}, "failurePolicy": "Ignore",
          "objectSelector": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gpu"]}]}}],
)  # fmt: skip
def test_webhook_configurations_match_dralabs_registration(render: Render, webhook: dict) -> None:
    registration = pytest.importorskip("dralab.webhook.registration")

    values = {"webhook": webhook}
    objs = render(values, namespace="dralab-system", release="dralab")
    chart = {o["kind"]: o for o in objs if o["kind"].endswith("WebhookConfiguration")}
    ref = registration.webhook_configurations(
        parse_config(config_from_values(merged_values(values))),
        url=None,
        service={"namespace": "dralab-system", "name": "dralab-webhook", "port": 443},
        ca_bundle=b"ca",
        own_namespace="dralab-system",
    )
    for want in ref:
        got = chart[want["kind"]]
        assert got["metadata"]["name"] == want["metadata"]["name"]
        assert got["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == "dralab-system/dralab-webhook-tls"
        assert len(got["webhooks"]) == len(want["webhooks"])
        for g, w in zip(got["webhooks"], want["webhooks"], strict=True):
            w = {k: v for k, v in w.items() if k != "clientConfig"}
            assert {k: g[k] for k in w} == w
            assert g["clientConfig"]["service"] == {
                "name": "dralab-webhook",
                "namespace": "dralab-system",
                "path": want["webhooks"][0]["clientConfig"]["service"]["path"]
                if g["name"] == "mutate.dralab.io"
                else "/validate",
                "port": 443,
            }


def test_webhook_scoping_excludes_own_namespace_and_opt_out(render: Render) -> None:
    objs = render(
        {"webhook": {"excludeNamespaces": ["monitoring"], "optOutLabel": "example.com/skip"}}, namespace="ops"
    )
    mutating = one(objs, "MutatingWebhookConfiguration")["webhooks"][0]
    exprs = mutating["namespaceSelector"]["matchExpressions"]
    assert exprs[0]["values"] == ["cert-manager", "kube-system", "monitoring", "ops"]
    assert exprs[1] == {"key": "example.com/skip", "operator": "NotIn", "values": ["false"]}
    assert mutating["failurePolicy"] == "Fail"
    assert mutating["sideEffects"] == "NoneOnDryRun"
    (validating,) = one(objs, "ValidatingWebhookConfiguration")["webhooks"]  # no DELETE webhook
    assert validating["rules"][0]["operations"] == ["CREATE"]


def test_webhook_deployment_probes_tls_and_pdb(render: Render) -> None:
    objs = render()
    dep = one(objs, "Deployment")
    pod = dep["spec"]["template"]["spec"]
    c = pod["containers"][0]
    assert c["command"] == ["dralab"]
    args = c["args"]
    assert args[:2] == ["webhook", "serve"]
    for flag, value in (("--cert", "/certs/tls.crt"), ("--key", "/certs/tls.key"), ("--port", "8443"),
                        ("--config", "/etc/dralab/config.yaml"), ("--host", "0.0.0.0")):  # fmt: skip
        assert args[args.index(flag) + 1] == value
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["readinessProbe"]["httpGet"]["scheme"] == "HTTPS"
    assert c["resources"]["requests"] and c["resources"]["limits"]
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    cert = next(o for o in by_kind(objs, "Certificate") if not o["spec"].get("isCA"))
    secret = next(v for v in pod["volumes"] if v["name"] == "certs")["secret"]["secretName"]
    assert secret == cert["spec"]["secretName"]
    assert "dralab-webhook.dralab-system.svc" in cert["spec"]["dnsNames"]
    svc = one(objs, "Service")
    assert {p["name"] for p in svc["spec"]["ports"]} == {"https", "metrics"}
    pdb = one(objs, "PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"] == dep["spec"]["selector"]["matchLabels"]
    assert "PodDisruptionBudget" not in {o["kind"] for o in render({"webhook": {"replicas": 1}})}


def test_webhook_pods_drain_before_they_stop_within_their_grace_period(render: Render) -> None:
    for delay in (5, 0, 40):
        pod = one(render({"webhook": {"shutdownDelaySeconds": delay}}), "Deployment")["spec"]["template"]["spec"]
        args = pod["containers"][0]["args"]
        assert args[args.index("--shutdown-delay") + 1] == str(delay)
        assert pod["terminationGracePeriodSeconds"] == delay + 20  # the drain, then in-flight answers end


def test_the_webhooks_own_requests_get_their_own_flow_schema(render: Render) -> None:
    fs = one(render(), "FlowSchema")
    assert fs["apiVersion"] == "flowcontrol.apiserver.k8s.io/v1"
    spec = fs["spec"]
    assert spec["priorityLevelConfiguration"] == {"name": "workload-high"}
    assert spec["matchingPrecedence"] < 9000  # matched before the service-accounts schema (workload-low)
    [rule] = spec["rules"]
    assert rule["subjects"] == [{"kind": "ServiceAccount",
                                 "serviceAccount": {"name": "dralab-webhook", "namespace": "dralab-system"}}]
    assert rule["resourceRules"][0]["resources"] == ["*"] and rule["resourceRules"][0]["clusterScope"] is True
    assert not by_kind(render({"webhook": {"flowSchema": {"enabled": False}}}), "FlowSchema")
    assert not by_kind(render({"webhook": {"enabled": False}}), "FlowSchema")


def test_without_cert_manager_a_given_secret_and_ca_are_used(render: Render) -> None:
    objs = render({"webhook": {"certManager": {"enabled": False}, "tls": {"secretName": "tls", "caBundle": "Q0E="}}})
    assert not by_kind(objs, "Certificate") and not by_kind(objs, "Issuer")
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        cfg = one(objs, kind)
        assert "annotations" not in cfg["metadata"]
        assert all(w["clientConfig"]["caBundle"] == "Q0E=" for w in cfg["webhooks"])


def test_driver_daemonset_mounts_host_paths_at_the_same_paths(render: Render) -> None:
    ds = one(render(chart_values(backend="ascend")), "DaemonSet")
    spec = ds["spec"]
    assert spec["updateStrategy"]["rollingUpdate"] == {"maxUnavailable": 1, "maxSurge": 0}
    pod = spec["template"]["spec"]
    c = pod["containers"][0]
    args = c["args"]
    assert args[:2] == ["driver", "run"]
    expected = {
        "--backend": "ascend", "--node": "$(NODE_NAME)", "--config": "/etc/dralab/config.yaml",
        "--plugin-dir": "/var/lib/kubelet/plugins", "--registry-dir": "/var/lib/kubelet/plugins_registry",
        "--cdi-dir": "/var/run/cdi", "--state-dir": "/var/lib/dralab",
    }  # fmt: skip
    assert {k: args[args.index(k) + 1] for k in expected} == expected
    host = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    for name in ("plugins", "registry", "cdi", "state", "enforcement", "ascend-driver", "npu-smi"):
        assert mounts[name] == host[name], name
    assert host["enforcement"] == "/usr/local/dralab/lib"
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert args[args.index("--metrics-host") + 1] == "0.0.0.0"
    assert args[args.index("--npu-smi") + 1] == mounts["npu-smi"]  # probes come from the kubelet, not localhost
    assert c["securityContext"]["privileged"] is True
    init = pod["initContainers"][0]
    assert init["volumeMounts"][0]["mountPath"] == "/usr/local/dralab/lib"
    env = {e["name"]: e for e in c["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"


def test_driver_claim_cache_and_periods_are_values(render: Render) -> None:
    def args(values: dict[str, Any] | None = None) -> list[str]:
        return one(render(values), "DaemonSet")["spec"]["template"]["spec"]["containers"][0]["args"]

    default = args()
    assert "--no-claim-cache" not in default  # small clusters keep the cache
    assert default[default.index("--reconcile-seconds") + 1] == "60"
    assert default[default.index("--resync-seconds") + 1] == "300"
    fleet = args({"driver": {"claimCache": False, "reconcileSeconds": 600, "resyncSeconds": 900}})
    assert "--no-claim-cache" in fleet and fleet[fleet.index("--reconcile-seconds") + 1] == "600"
    assert fleet[fleet.index("--resync-seconds") + 1] == "900"


def test_fake_backend_driver_is_unprivileged_and_gets_its_inventory(render: Render) -> None:
    devices = {"nodes": [{"name": "dralab-worker", "devices": []}]}
    objs = render(chart_values(backend="fake", devices=devices))
    ds = one(objs, "DaemonSet")
    c = ds["spec"]["template"]["spec"]["containers"][0]
    assert c["securityContext"]["privileged"] is False
    assert c["args"][c["args"].index("--devices") + 1] == "/etc/dralab/devices.yaml"
    assert yaml.safe_load(one(objs, "ConfigMap")["data"]["devices.yaml"]) == devices
    assert "ascend-driver" not in {v["name"] for v in ds["spec"]["template"]["spec"]["volumes"]}


def test_rbac_is_least_privilege_and_slices_are_node_scoped(render: Render) -> None:
    objs = render()
    roles = {o["metadata"]["name"]: o["rules"] for o in by_kind(objs, "ClusterRole")}
    for rules in roles.values():
        for rule in rules:
            assert "*" not in rule["verbs"] and "*" not in rule["resources"] and "*" not in rule["apiGroups"]
    driver = roles["dralab-driver"]
    writable = {r for rule in driver for r in rule["resources"] if {"create", "update", "delete"} & set(rule["verbs"])}
    assert writable == {"resourceslices", "events"}
    webhook = roles["dralab-webhook"]
    assert not any("pods" in r["resources"] and "delete" in r["verbs"] for r in webhook)
    (vap,) = [p for p in by_kind(objs, "ValidatingAdmissionPolicy") if p["metadata"]["name"].endswith("-slices")]
    assert "system:serviceaccount:dralab-system:dralab-driver" in vap["spec"]["matchConditions"][0]["expression"]
    assert "authentication.kubernetes.io/node-name" in vap["spec"]["variables"][0]["expression"]
    (binding,) = [b for b in by_kind(objs, "ValidatingAdmissionPolicyBinding")
                  if b["spec"]["policyName"] == vap["metadata"]["name"]]
    assert binding["spec"]["validationActions"] == ["Deny"]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"driver": {"backend": "rocm"}}, "value must be one of 'fake', 'ascend', 'nvidia'"),
        ({"webhook": {"lifecycle": "pod"}}, "lifecycle"),
        ({"vendors": {"enabled": ["metax"]}}, "neither a shipped vendor"),
        ({"webhook": {"certManager": {"enabled": False}}}, "set webhook.tls.secretName"),
        ({"driver": {"cdiDirectory": "/x"}}, "cdiDirectory"),
    ],
)
def test_bad_values_fail_with_a_clear_message(helm, values: dict, message: str) -> None:
    out = run_helm(helm, "template", "x", str(chart_dir()), values=values, check=False)
    assert out.returncode != 0
    assert message in out.stderr


def test_helm_package_builds_an_archive(helm, tmp_path) -> None:
    out = subprocess.run(
        [str(helm), "package", str(chart_dir()), "-d", str(tmp_path)], capture_output=True, text=True, check=True
    )
    assert (tmp_path / "dralab-0.1.0.tgz").is_file(), out.stdout
