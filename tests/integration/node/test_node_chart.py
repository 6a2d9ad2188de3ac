"""dralab installed the way users install it, on the real node: its image, cert-manager and its chart.

One cluster of its own (``dralab-node-chart``, the ``node-chart`` profile's): a real kubelet with a pod
network (kube-proxy, the ``kubernetes`` Service), cert-manager from its chart as pods, dralab's image
built here from the Dockerfile and installed from ``charts/dralab``: the webhook a 2-replica
Deployment, the driver a DaemonSet pod registered with the real kubelet, the monitor on.

The tests run in file order on one worker; the last takes the cluster down and checks the host.
"""

from __future__ import annotations

import base64
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from dralab.kube import Kube
from dralab.util import wait_for
from dralab_kit.cluster import api, install
from dralab_kit.cluster.api import ClusterHandle
from dralab_kit.cluster.node import integration, lifecycle, podnet
from dralab_kit.cluster.node.integration import node_paths
from dralab_kit.provision.chart import chart_dir
from harness.profile import load_profile

from .conftest import ensure_node_binaries
from .node_helpers import kubectl, pod

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.xdist_group("node-chart")]

NAME = "dralab-node-chart"
NS = "chart-it"
SELECT = "app.kubernetes.io/instance=dralab"


@pytest.fixture(scope="module")
def chart_cluster() -> Iterator[ClusterHandle]:
    ensure_node_binaries()
    values = load_profile("node-chart").deploy["values"]
    handle = install.stand_up(NAME, profile_values=values)
    kube = handle.kube()
    kube.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
                exist_ok=True)
    kube.close()
    yield handle
    api.down(NAME)


@pytest.fixture
def kube(chart_cluster: ClusterHandle) -> Iterator[Kube]:
    client = chart_cluster.kube()
    yield client
    client.close()


def hami_pod(name: str, memory: str = "2048", cores: str = "20") -> dict[str, Any]:
    obj = pod(name, "sleep 3600", runtimeClassName="ascend")
    obj["spec"]["containers"][0]["resources"] = {"limits": {
        "huawei.com/Ascend310P": 1, "huawei.com/Ascend310P-memory": memory, "huawei.com/Ascend310P-core": cores}}
    return obj


def running(kube: Kube, name: str, timeout: float = 120) -> dict[str, Any]:
    def phase() -> dict[str, Any] | None:
        live = kube.get(f"/api/v1/namespaces/{NS}/pods/{name}")
        return live if live["status"].get("phase") == "Running" else None

    return wait_for(phase, timeout, f"pod {name} Running", interval=0.5)


def component_pods(kube: Kube, component: str) -> list[dict[str, Any]]:
    sel = f"{SELECT},app.kubernetes.io/component={component}"
    return kube.list(f"/api/v1/namespaces/{install.DRALAB_NAMESPACE}/pods?labelSelector={sel}")["items"]


def ready_pods(kube: Kube, component: str) -> list[dict[str, Any]]:
    out = []
    for item in component_pods(kube, component):
        if item["metadata"].get("deletionTimestamp"):
            continue
        conditions = item["status"].get("conditions") or []
        if any(c["type"] == "Ready" and c["status"] == "True" for c in conditions):
            out.append(item)
    return out


def container_env(handle: ClusterHandle, name: str) -> dict[str, str]:
    out = kubectl(handle, "exec", "-n", NS, name, "--", "env").stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def claim_spec_count(handle: ClusterHandle) -> int:
    return len(list(handle.cdi_dir(handle.state["realNode"]).glob("*_[0-9a-f]*-*.yaml")))


def test_components_run_as_pods_from_the_local_image(chart_cluster: ClusterHandle, kube: Kube) -> None:
    webhook, driver = ready_pods(kube, "webhook"), ready_pods(kube, "driver")
    assert len(webhook) == 2 and len(driver) == 1
    monitor = ready_pods(kube, "monitor")
    assert len(monitor) == 1
    for item in [*webhook, *driver, *monitor]:
        assert item["spec"]["containers"][0]["image"].startswith("dralab.local/dralab:")
    managers = kube.list(f"/api/v1/namespaces/{install.CERT_MANAGER_NAMESPACE}/pods")["items"]
    assert {p["metadata"]["labels"].get("app.kubernetes.io/component") for p in managers} >= {
        "controller", "webhook", "cainjector"}
    # pods reach the apiserver through the kubernetes Service, whose endpoint is the pod network's address
    endpoints = kube.get("/api/v1/namespaces/default/endpoints/kubernetes")
    assert endpoints["subsets"][0]["addresses"][0]["ip"] == podnet.API_ADDRESS


def test_cert_manager_issued_the_certificate_and_injected_its_ca(kube: Kube) -> None:
    certs = kube.list(f"/apis/cert-manager.io/v1/namespaces/{install.DRALAB_NAMESPACE}/certificates")["items"]
    serving = [c for c in certs if "webhook" in c["metadata"]["name"]]
    assert serving, [c["metadata"]["name"] for c in certs]
    cert = serving[0]
    assert any(c["type"] == "Ready" and c["status"] == "True" for c in cert["status"]["conditions"])
    secret = kube.get(f"/api/v1/namespaces/{install.DRALAB_NAMESPACE}/secrets/{cert['spec']['secretName']}")
    issued_ca = base64.b64decode(secret["data"]["ca.crt"])
    for kind in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
        for config in kube.list(f"/apis/admissionregistration.k8s.io/v1/{kind}?labelSelector={SELECT}")["items"]:
            for hook in config["webhooks"]:
                assert base64.b64decode(hook["clientConfig"]["caBundle"]) == issued_ca, hook["name"]


def test_a_pod_in_hami_syntax_runs_with_its_quota_in_the_container(chart_cluster: ClusterHandle, kube: Kube) -> None:
    kube.create(f"/api/v1/namespaces/{NS}/pods", hami_pod("share-a"))
    live = running(kube, "share-a")
    assert live["spec"]["resourceClaims"]  # converted by the chart's webhook
    env = container_env(chart_cluster, "share-a")
    assert env["NPU_MEM_QUOTA"] == "2048"
    # vcore, installed on the node by the driver's init container, reaches the container by CDI
    assert "libvcore.so" in kubectl(chart_cluster, "exec", "-n", NS, "share-a", "--", "cat",
                                    "/etc/ld.so.preload").stdout


def test_the_webhooks_own_requests_run_in_its_flow_schema(kube: Kube) -> None:
    """After an admission (the test above: the webhook created share-a's claim), the apiserver's API
    Priority and Fairness dispatched the webhook's requests under the chart's FlowSchema."""
    from prometheus_client.parser import text_string_to_metric_families

    [schema] = kube.list(f"/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas?labelSelector={SELECT}")["items"]
    name, level = schema["metadata"]["name"], schema["spec"]["priorityLevelConfiguration"]["name"]
    dispatched = {
        (s.labels["flow_schema"], s.labels["priority_level"]): s.value
        for family in text_string_to_metric_families(kube.text("/metrics"))
        if family.name == "apiserver_flowcontrol_dispatched_requests"
        for s in family.samples
        if s.name.endswith("_total")
    }
    assert dispatched.get((name, level), 0) > 0, {k: v for k, v in dispatched.items() if "dralab" in k[0]}


def test_admission_survives_the_loss_of_one_webhook_pod(kube: Kube) -> None:
    victim = ready_pods(kube, "webhook")[0]["metadata"]["name"]
    kube.delete(f"/api/v1/namespaces/{install.DRALAB_NAMESPACE}/pods/{victim}")
    for i in range(10):  # failurePolicy Fail: an admission no replica answers is an error here
        out = kube.create(f"/api/v1/namespaces/{NS}/pods", hami_pod(f"dry-{i}"), dry_run=True) or {}
        assert out["spec"].get("resourceClaims"), f"admission {i} came back unconverted"
    wait_for(lambda: len(ready_pods(kube, "webhook")) == 2, 120, "the replacement webhook pod", interval=0.5)


def test_a_driver_restart_loses_no_prepared_claim(chart_cluster: ClusterHandle, kube: Kube) -> None:
    before = claim_spec_count(chart_cluster)
    assert before >= 1
    old = ready_pods(kube, "driver")[0]["metadata"]["name"]
    kube.delete(f"/api/v1/namespaces/{install.DRALAB_NAMESPACE}/pods/{old}")
    wait_for(lambda: [p for p in ready_pods(kube, "driver") if p["metadata"]["name"] != old], 120,
             "a new driver pod Ready", interval=0.5)
    assert claim_spec_count(chart_cluster) == before
    assert container_env(chart_cluster, "share-a")["NPU_MEM_QUOTA"] == "2048"
    kube.create(f"/api/v1/namespaces/{NS}/pods", hami_pod("share-b", memory="1024"))
    running(kube, "share-b")
    assert claim_spec_count(chart_cluster) == before + 1


def _tag(handle: ClusterHandle, image: str, tag: str) -> str:
    """The same image under another tag in the node's containerd: what a release publishes next."""
    repo = image.rsplit(":", 1)[0]
    target = f"{repo}:{tag}"
    lifecycle.ctr(node_paths(handle, handle.state["realNode"]), "images", "tag", "--force", image, target)
    return target


def _rolled_out(kube: Kube, image: str) -> bool:
    pods = [*component_pods(kube, "webhook"), *component_pods(kube, "driver")]
    return bool(pods) and all(
        p["spec"]["containers"][0]["image"] == image and not p["metadata"].get("deletionTimestamp") for p in pods
    ) and len(ready_pods(kube, "webhook")) == 2 and len(ready_pods(kube, "driver")) == 1


def _release_image(handle: ClusterHandle) -> str:
    out = install.helm(handle, ["get", "values", install.DRALAB_RELEASE, "-n", install.DRALAB_NAMESPACE,
                                "-o", "json"]).stdout
    import json

    image = json.loads(out)["image"]
    return f"{image['repository']}:{image['tag']}"


@pytest.mark.parametrize("direction", ["upgrade", "downgrade"])
def test_upgrade_and_downgrade_under_load(chart_cluster: ClusterHandle, kube: Kube, direction: str) -> None:
    current = _release_image(chart_cluster)
    specs = claim_spec_count(chart_cluster)
    if direction == "upgrade":
        target = _tag(chart_cluster, current, "next")
        install.helm(chart_cluster, ["upgrade", install.DRALAB_RELEASE, str(chart_dir()), "-n",
                                     install.DRALAB_NAMESPACE, "--reuse-values", "--set",
                                     f"image.tag={target.rsplit(':', 1)[1]}", "--wait", "--timeout", "6m"])
    else:
        install.helm(chart_cluster, ["rollback", install.DRALAB_RELEASE, "-n", install.DRALAB_NAMESPACE,
                                     "--wait", "--timeout", "6m"])
        target = _release_image(chart_cluster)
        assert target != current
    wait_for(lambda: _rolled_out(kube, target), 180, f"webhook and driver on {target}", interval=1.0)
    # running containers keep their claims and CDI env; nothing was re-prepared wrongly
    assert claim_spec_count(chart_cluster) == specs
    for name in ("share-a", "share-b"):
        assert kube.get(f"/api/v1/namespaces/{NS}/pods/{name}")["status"]["phase"] == "Running"
    assert container_env(chart_cluster, "share-a")["NPU_MEM_QUOTA"] == "2048"
    # new pods are admitted and prepared by the new pods
    name = f"after-{direction}"
    kube.create(f"/api/v1/namespaces/{NS}/pods", hami_pod(name, memory="512"))
    running(kube, name)
    assert container_env(chart_cluster, name)["NPU_MEM_QUOTA"] == "512"
    kube.delete(f"/api/v1/namespaces/{NS}/pods/{name}")
    # gone and unprepared before the next test counts the node's claims
    wait_for(lambda: kube.get(f"/api/v1/namespaces/{NS}/pods/{name}", missing_ok=True) is None
             and claim_spec_count(chart_cluster) == specs, 120, f"{name} gone and unprepared", interval=0.5)


def test_down_leaves_nothing_on_the_host(chart_cluster: ClusterHandle) -> None:
    paths = node_paths(chart_cluster, chart_cluster.state["realNode"])
    with lifecycle.pinned_namespace(paths) as mntns:  # the node's namespace was there to pin
        assert mntns
    # what infra destroy checks: processes under a pin of the namespace, cgroups, mounts, the pod network
    assert integration.down_and_leftovers(NAME) == []
    rules = subprocess.run(["iptables-save"], capture_output=True, text=True, check=True).stdout
    assert "KUBE-" not in rules
    assert not (chart_cluster.layout.root / "state.json").exists()
