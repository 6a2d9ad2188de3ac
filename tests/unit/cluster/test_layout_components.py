"""Paths, component command lines, KWOK stages and node objects of the local cluster (pure)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from dralab.errors import UserError
from dralab.model.inventory import load_inventory
from dralab_kit.cluster import components, kwok
from dralab_kit.cluster.build import BINARIES, K8S_VERSION, binary_path
from dralab_kit.cluster.layout import SOCKET_PATH_MAX, Layout, check_name, check_socket_paths, component_log_name
from dralab_kit.cluster.objects import collection_path, object_path

PORTS = {
    "etcd": 2379,
    "etcd-peer": 2380,
    "apiserver": 6443,
    "controller-manager": 10257,
    "scheduler": 10259,
    "kwok": 10247,
    "webhook": 9443,
    "driver": {"n1": 9100},
    "kubelet": {"n1": 9200},
}
BINS = {name: f"/bin/{name}" for name in BINARIES}


@pytest.fixture
def layout(tmp_path: Path) -> Layout:
    return Layout.of("dralab", home=tmp_path)


def test_layout_paths_follow_the_contract(tmp_path):
    layout = Layout.of("c1", home=Path("/h"))
    assert layout.root == Path("/h/clusters/c1")
    assert layout.node_dir("n1") == Path("/h/clusters/c1/nodes/n1")
    assert layout.cdi_dir("n1") == layout.node_dir("n1") / "cdi"
    assert layout.plugins_dir("n1") == layout.node_dir("n1") / "plugins"
    assert layout.registry_dir("n1") == layout.node_dir("n1") / "registry"
    assert layout.driver_state_dir("n1") == layout.node_dir("n1") / "driver-state"
    assert layout.records_path("n1") == layout.node_dir("n1") / "kubelet-records.jsonl"
    assert layout.log_path("driver/n1") == layout.logs_dir / "driver-n1.log"
    assert component_log_name("kubelet/n1") == "kubelet-n1.log"


def test_deep_home_moves_node_dirs_to_a_short_stable_path():
    deep = Path("/home/runner/work/some-long-project-name/some-long-project-name/.dralab")
    layout = Layout.of("dralab", home=deep)
    assert not layout.node_dir("n").is_relative_to(layout.root)
    assert layout.node_dir("n") == Layout.of("dralab", home=deep).node_dir("n")
    assert layout.node_dir("n") != Layout.of("other", home=deep).node_dir("n")
    check_socket_paths(layout, ["aio-node74-arm"], ["hami-core-gpu.project-hami.io"])


def test_socket_path_limit_is_checked():
    layout = Layout.of("dralab", home=Path("/h"))
    check_socket_paths(layout, ["aio-node74-arm"], ["ascend.project-hami.io"])
    with pytest.raises(UserError, match=f"over the unix limit of {SOCKET_PATH_MAX}"):
        check_socket_paths(layout, ["n" * 60], ["d" * 40])


@pytest.mark.parametrize("name", ["", "UPPER", "a_b", "-a", "x" * 40])
def test_bad_cluster_names(name):
    with pytest.raises(UserError):
        check_name(name)


def test_binaries_live_in_the_versioned_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("DRALAB_CACHE", str(tmp_path))
    assert binary_path("kube-apiserver") == tmp_path / "bin" / K8S_VERSION / "kube-apiserver"
    assert set(BINARIES) == {"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "etcd", "kwok"}
    with pytest.raises(UserError):
        binary_path("helm")


def test_feature_gate_on_apiserver_controller_manager_scheduler(layout):
    for spec in (
        components.apiserver_spec(layout, PORTS, BINS),
        components.controller_manager_spec(layout, PORTS, BINS),
        components.scheduler_spec(layout, PORTS, BINS),
    ):
        assert "--feature-gates=DRAConsumableCapacity=true" in spec.argv, spec.name


def test_apiserver_command_line(layout):
    spec = components.apiserver_spec(layout, PORTS, BINS)
    assert spec.argv[0] == "/bin/kube-apiserver"
    assert "--etcd-servers=http://127.0.0.1:2379" in spec.argv
    assert "--secure-port=6443" in spec.argv
    assert "--disable-admission-plugins=ServiceAccount" in spec.argv
    assert spec.health.url == "https://127.0.0.1:6443/readyz" and spec.health.client_cert


def test_scheduler_client_qps_is_raised_and_leader_election_off(layout):
    doc = yaml.safe_load(components.scheduler_config(layout))
    assert doc["kind"] == "KubeSchedulerConfiguration"
    assert doc["clientConnection"]["qps"] >= 200 and doc["clientConnection"]["burst"] >= 400
    assert doc["clientConnection"]["kubeconfig"] == str(layout.kubeconfig)
    assert doc["leaderElection"] == {"leaderElect": False}
    spec = components.scheduler_spec(layout, PORTS, BINS)
    assert f"--config={components.scheduler_config_path(layout)}" in spec.argv


def test_controller_manager_can_sign_tokens_and_skips_leader_election(layout):
    argv = components.controller_manager_spec(layout, PORTS, BINS).argv
    assert "--leader-elect=false" in argv
    assert any(a.startswith("--service-account-private-key-file=") for a in argv)
    assert not any(a.startswith("--controllers=") for a in argv), "all default controllers (resourceclaim, gc) run"
    assert not any(a.startswith("--node-monitor-grace-period") for a in argv), "the default grace off fleets"


def test_a_fleets_controller_manager_gives_the_simulated_nodes_leases_a_grace_longer_than_a_phase(layout):
    from dralab_kit.cluster.fleet import NODE_GRACE_SECONDS

    argv = components.controller_manager_spec(layout, PORTS, BINS, node_grace_seconds=NODE_GRACE_SECONDS).argv
    assert f"--node-monitor-grace-period={NODE_GRACE_SECONDS}s" in argv
    assert NODE_GRACE_SECONDS >= 600, "a 500-node fill lasts minutes; the default 50 s marked nodes NotReady in it"


def test_etcd_and_kwok_command_lines(layout):
    etcd = components.etcd_spec(layout, PORTS, BINS).argv
    assert "--listen-client-urls=http://127.0.0.1:2379" in etcd
    assert f"--data-dir={layout.etcd_dir}" in etcd
    kw = components.kwok_spec(layout, PORTS, BINS)
    assert "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake" in kw.argv
    assert "--server-address=127.0.0.1:10247" in kw.argv
    assert kw.health.url == "http://127.0.0.1:10247/healthz"


def test_dralab_components_follow_the_cli_contract(layout):
    webhook = components.webhook_spec(layout, PORTS, None).argv
    assert webhook[1:5] == ["-m", "dralab.cli", "webhook", "serve"]
    for flag in ("--cert", "--key", "--port", "--host", "--kubeconfig", "--namespace"):
        assert flag in webhook
    driver = components.driver_spec(layout, PORTS, "n1", "/inv.yaml", "/cfg.yaml").argv
    joined = " ".join(driver)
    assert "driver run --backend fake --node n1 --devices /inv.yaml" in joined
    assert f"--plugin-dir {layout.plugins_dir('n1')}" in joined
    assert f"--registry-dir {layout.registry_dir('n1')}" in joined
    assert f"--cdi-dir {layout.cdi_dir('n1')}" in joined
    assert f"--state-dir {layout.driver_state_dir('n1')}" in joined
    assert "--metrics-port 9100" in joined and driver[-2:] == ["--config", "/cfg.yaml"]
    standin = components.standin_spec(layout, PORTS, "n1")
    assert standin.name == "kubelet/n1" and "--node-dir" in standin.argv


def test_kwok_starts_only_pods_without_claims():
    """Pods with claims are started by the stand-in once prepared (its one status write), never by KWOK."""
    stages = {s["metadata"]["name"]: s for s in yaml.safe_load_all(kwok.kwok_config())}
    pods = {name for name, s in stages.items() if s["spec"]["resourceRef"]["kind"] == "Pod"}
    assert pods == {"dralab-pod-ready", "dralab-pod-complete", "dralab-pod-delete"}
    plain = stages["dralab-pod-ready"]["spec"]["selector"]["matchExpressions"]
    assert {"key": ".spec.resourceClaims", "operator": "DoesNotExist"} in plain
    template = stages["dralab-pod-ready"]["spec"]["next"]["statusTemplate"]
    assert "phase: Running" in template and "PodIPWith .spec.nodeName" in template
    complete = stages["dralab-pod-complete"]["spec"]["selector"]["matchExpressions"]
    assert not any(".spec.resourceClaims" in e["key"] for e in complete)  # a Job pod with claims completes too
    assert stages["dralab-pod-delete"]["spec"]["next"] == {"finalizers": {"empty": True}, "delete": True}


def test_kwok_reports_node_status_as_a_kubelet_with_a_lease():
    """Ready at once and again after the node controller marks a node otherwise; then a status report
    every 5 minutes, not KWOK's default 20 s (25 node writes a second at 500 nodes)."""
    stages = {s["metadata"]["name"]: s["spec"] for s in yaml.safe_load_all(kwok.kwok_config())}
    init, report = stages["dralab-node-initialize"], stages["dralab-node-report"]
    assert init["resourceRef"] == report["resourceRef"] == {"apiGroup": "v1", "kind": "Node"}
    (not_ready,) = init["selector"]["matchExpressions"]
    assert not_ready["operator"] == "NotIn" and not_ready["values"] == ["True"] and '"Ready"' in not_ready["key"]
    assert "delay" not in init
    (ready,) = report["selector"]["matchExpressions"]
    assert ready["operator"] == "In" and ready["key"] == not_ready["key"]
    assert report["delay"]["durationMilliseconds"] == kwok.NODE_STATUS_REPORT_MS == 300_000
    template = init["next"]["statusTemplate"]
    assert template == report["next"]["statusTemplate"]
    # allocatable, capacity and nodeInfo come from the Node object and are written back, never dropped
    for field in ("allocatable", "capacity", "nodeInfo"):
        assert f"{{{{ with .status.{field} }}}}\n{field}:" in template
    assert "phase: Running" in template and "lastHeartbeatTime: {{ $now | Quote }}" in template


def test_nodes_ready_timeout_grows_with_the_fleet():
    from dralab_kit.cluster.api import COMPONENT_TIMEOUT, nodes_ready_timeout

    assert nodes_ready_timeout(1) == COMPONENT_TIMEOUT
    assert nodes_ready_timeout(500) > nodes_ready_timeout(50) > COMPONENT_TIMEOUT
    assert nodes_ready_timeout(500) >= 180


def test_node_manifests_from_the_inventory():
    inventory = load_inventory("lab20")
    (node,) = kwok.node_manifests(inventory, K8S_VERSION)
    assert node["metadata"]["name"] == "aio-node74-arm"
    assert node["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
    assert node["metadata"]["labels"]["kubernetes.io/arch"] == "arm64"
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == "aio-node74-arm"
    assert "taints" not in node["spec"]
    assert node["status"]["nodeInfo"]["kubeletVersion"] == K8S_VERSION
    assert int(node["status"]["allocatable"]["pods"]) >= 110


def test_object_paths():
    assert object_path({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}) == "/api/v1/nodes/n"
    dc = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "x"}}
    assert object_path(dc) == "/apis/resource.k8s.io/v1/deviceclasses/x"
    assert collection_path("resource.k8s.io/v1", "ResourceClaim", "ns") == (
        "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims"
    )
    with pytest.raises(ValueError, match="namespaced"):
        collection_path("v1", "Pod")
    with pytest.raises(ValueError, match="no REST path"):
        collection_path("v9", "Nope")


def test_code_fingerprint_follows_the_source(tmp_path, monkeypatch):
    import os

    import dralab

    pkg = tmp_path / "dralab"
    (pkg / "webhook").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    mod = pkg / "webhook" / "server.py"
    mod.write_text("x = 1\n")
    (pkg / "webhook" / "notes.txt").write_text("ignored")
    monkeypatch.setattr(dralab, "__file__", str(pkg / "__init__.py"))
    first = components.code_fingerprint(("dralab/webhook", "dralab/missing.py"))
    assert components.code_fingerprint(("dralab/webhook", "dralab/missing.py")) == first
    (pkg / "webhook" / "notes.txt").write_text("still ignored")
    assert components.code_fingerprint(("dralab/webhook", "dralab/missing.py")) == first
    os.utime(mod, ns=(1, 1))
    assert components.code_fingerprint(("dralab/webhook", "dralab/missing.py")) != first


def test_every_declared_code_path_exists():
    # a path that is gone (moved to the kit, say) would silently stop restarting a stale component
    import importlib
    from pathlib import Path

    from dralab_kit.cluster.node import components as node_components

    for paths in (components.WEBHOOK_CODE, components.DRIVER_CODE, components.STANDIN_CODE, components.FLEET_CODE,
                  node_components.TAP_CODE):
        for rel in paths:
            package, _, inside = rel.partition("/")
            assert (Path(importlib.import_module(package).__file__).parent / inside).exists(), rel


def test_python_components_declare_their_code(layout):
    assert "dralab/webhook" in components.webhook_spec(layout, PORTS, None).code
    assert "dralab/driver" in components.driver_spec(layout, PORTS, "n1", "/inv.yaml", None).code
    assert "dralab_kit/cluster/standin" in components.standin_spec(layout, PORTS, "n1").code
    assert components.apiserver_spec(layout, PORTS, BINS).code == ()
