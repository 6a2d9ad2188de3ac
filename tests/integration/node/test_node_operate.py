"""Operating the real node: restart the kubelet and containerd under running pods, stop/start, down.

Runs on a cluster of its own (``node-ops``) because it restarts and finally removes the node.
The last test takes the cluster down and checks the host is as before: no process of the node's
mount namespace, no mount, cgroup or interface left, the kernel settings the kubelet writes unchanged.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from dralab.kube import Kube
from dralab.util import wait_for
from dralab_kit.cluster import api
from dralab_kit.cluster.api import ClusterHandle
from dralab_kit.cluster.node import lifecycle
from dralab_kit.cluster.node.holder import SYSCTLS
from dralab_kit.cluster.node.integration import node_paths
from dralab_kit.faults.target import claim_traces

from .conftest import ensure_node_binaries
from .node_helpers import kubectl, pod, wait_running

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("node-ops")]  # one cluster, one worker

NAME = "node-ops"


HOST_PATHS = ("/run/containerd", "/var/lib/cni", "/run/runc", "/var/run/cdi", "/run/mount")


def _host_sysctls() -> dict[str, str]:
    return {k: (Path("/proc/sys") / k).read_text() for k in SYSCTLS if (Path("/proc/sys") / k).exists()}


def _host_paths() -> dict[str, bool]:
    return {p: Path(p).exists() for p in HOST_PATHS}


@pytest.fixture(scope="module")
def before() -> dict[str, str]:
    """The host's kernel settings (and whether runtime folders exist) before the node exists."""
    return {**_host_sysctls(), **{p: str(v) for p, v in _host_paths().items()}}


@pytest.fixture(scope="module")
def ops(before: dict[str, str]) -> Iterator[ClusterHandle]:
    ensure_node_binaries()
    try:
        yield api.ensure_cluster(NAME, real_node=True)
    finally:
        api.down(NAME)  # idempotent: the last test already took it down


def _dralab(*args: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "dralab.cli", "cluster", *args, "--name", NAME],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, f"dralab cluster {' '.join(args)}: {proc.stdout}\n{proc.stderr}"
    return proc.stdout


def _pod_state(kube: Kube, namespace: str, name: str) -> tuple[str, str, int]:
    obj = kube.get(f"/api/v1/namespaces/{namespace}/pods/{name}", missing_ok=True) or {}
    status = (obj.get("status") or {}).get("containerStatuses") or [{}]
    return obj["metadata"]["uid"], status[0].get("containerID", ""), int(status[0].get("restartCount", -1))


@pytest.fixture(scope="module")
def running_pod(ops: ClusterHandle) -> Iterator[tuple[str, str]]:
    kube = ops.kube()
    ns = "ops"
    kube.create(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}, exist_ok=True
    )
    kube.create(f"/api/v1/namespaces/{ns}/pods", pod("keeper", "sleep 3600"))
    wait_running(kube, ns, "keeper")
    yield ns, "keeper"
    kube.close()


def _pid(component: str) -> int:
    handle = api.get_cluster(NAME)
    assert handle is not None
    return int(handle.state["components"][component]["pid"])


def _node_ready(kube: Kube, node: str) -> bool:
    obj = kube.get(f"/api/v1/nodes/{node}", missing_ok=True) or {}
    return any(c["type"] == "Ready" and c["status"] == "True" for c in obj.get("status", {}).get("conditions", []))


def test_status_lists_the_real_node_components(ops: ClusterHandle) -> None:
    node = ops.state["realNode"]
    rows = {r.name: r for r in api.status(NAME)}
    for comp in (f"node-ns/{node}", f"containerd/{node}", f"kubelet/{node}", f"dra-tap/{node}", f"driver/{node}"):
        assert rows[comp].state == "running", (comp, rows[comp])
    assert rows[f"kubelet/{node}"].healthy is True and rows[f"containerd/{node}"].healthy is True


@pytest.mark.parametrize("component", ["kubelet", "containerd"])
def test_restart_keeps_running_containers(ops: ClusterHandle, running_pod: tuple[str, str], component: str) -> None:
    kube = ops.kube()
    ns, name = running_pod
    uid, container, restarts = _pod_state(kube, ns, name)
    full = f"{component}/{ops.state['realNode']}"
    pid = _pid(full)
    assert "restarted" in _dralab("restart", component)
    assert _pid(full) != pid  # a new process
    wait_for(lambda: _node_ready(kube, ops.state["realNode"]), 90, "node Ready after the restart", interval=0.2)
    # the same container (a restart of the node's daemons is not a restart of its workloads)
    assert _pod_state(kube, ns, name) == (uid, container, restarts)
    # exec works again once the restarted daemon has synced the pod (polled, not slept)
    alive = wait_for(
        lambda: kubectl(ops, "exec", "-n", ns, name, "--", "echo", "alive", check=False).stdout.strip() == "alive",
        60,
        f"exec in {name} after the {component} restart",
        interval=0.5,
    )
    assert alive
    kube.close()


def test_kubelet_restart_keeps_the_hostname_label(ops: ClusterHandle, running_pod: tuple[str, str]) -> None:
    """After a restart the kubelet re-registers an existing Node: its own labels must still be there."""
    kube = ops.kube()
    ns, _ = running_pod
    node = ops.state["realNode"]
    _dralab("restart", "kubelet")
    wait_for(lambda: _node_ready(kube, node), 90, "node Ready after the restart", interval=0.2)
    assert kube.get(f"/api/v1/nodes/{node}")["metadata"]["labels"]["kubernetes.io/hostname"] == node
    selected = pod("by-hostname", "sleep 3600", nodeSelector={"kubernetes.io/hostname": node})
    kube.create(f"/api/v1/namespaces/{ns}/pods", selected)
    assert wait_running(kube, ns, "by-hostname")["spec"]["nodeName"] == node
    kube.delete(f"/api/v1/namespaces/{ns}/pods/by-hostname", missing_ok=True)
    kube.close()


def test_stop_and_start_kubelet(ops: ClusterHandle) -> None:
    node = ops.state["realNode"]
    _dralab("stop", "kubelet")
    assert {r.name: r.state for r in api.status(NAME)}[f"kubelet/{node}"] == "stopped"
    _dralab("start", "kubelet")
    rows = {r.name: r for r in api.status(NAME)}
    assert rows[f"kubelet/{node}"].state == "running" and rows[f"kubelet/{node}"].healthy is True


def _hami_pod(name: str) -> dict:
    """A pod in HAMi's Ascend syntax: the webhook gives it a claim of 2048 MiB and 20 cores."""
    obj = pod(name, "sleep 3600", runtimeClassName="ascend")
    obj["spec"]["containers"][0]["resources"] = {"limits": {
        "huawei.com/Ascend310P": 1, "huawei.com/Ascend310P-memory": "2048", "huawei.com/Ascend310P-core": "20"}}
    return obj


def _claim_of(kube: Kube, ns: str, name: str) -> dict:
    claim = kube.get(f"/api/v1/namespaces/{ns}/pods/{name}")["spec"]["resourceClaims"][0]["resourceClaimName"]
    return kube.get(f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{claim}")


def test_reboot_brings_pods_back_with_their_quota_and_leaks_no_deleted_claim(ops: ClusterHandle) -> None:
    """Everything on the node stops at once and /run is emptied; a pod deleted while the node was
    down leaves nothing behind, the other one runs again with the same claim, env and quota."""
    kube = ops.kube()
    ns, node = "reboot", ops.state["realNode"]
    kube.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
                exist_ok=True)
    for name in ("keep", "gone"):
        kube.create(f"/api/v1/namespaces/{ns}/pods", _hami_pod(name))
    for name in ("keep", "gone"):
        wait_running(kube, ns, name)
    keep_claim, gone_claim = _claim_of(kube, ns, "keep"), _claim_of(kube, ns, "gone")
    env_before = kubectl(ops, "exec", "-n", ns, "keep", "--", "sh", "-c", "env | grep ^NPU_MEM_QUOTA").stdout
    assert env_before.strip() == "NPU_MEM_QUOTA=2048"
    assert claim_traces(ops.layout, node, gone_claim["metadata"]["uid"])  # prepared: it has traces to lose

    boot_before = ops.layout.boot_id_path(node).read_text() if ops.layout.boot_id_path(node).exists() else ""
    api.reboot(NAME, node, start=False)
    assert ops.layout.boot_id_path(node).read_text() != boot_before
    assert not list(ops.layout.cdi_dir(node).iterdir())  # /var/run/cdi is gone with the boot
    # deleted while the node is down: no kubelet confirms it, so it is removed by force
    kube.delete(f"/api/v1/namespaces/{ns}/pods/gone", grace_period_seconds=0)
    path = f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{gone_claim['metadata']['name']}"
    wait_for(lambda: kube.get(path, missing_ok=True) is None, 60, "the deleted pod's claim to go", interval=0.2)

    api.ensure_cluster(NAME, real_node=True)
    back = wait_for(lambda: (p := kube.get(f"/api/v1/namespaces/{ns}/pods/keep")) and
                    p["status"].get("phase") == "Running" and
                    all(c.get("ready") for c in p["status"].get("containerStatuses") or [{}]) and p,
                    120, "pod keep Running again", interval=0.5)
    assert back["metadata"]["uid"] and _claim_of(kube, ns, "keep")["metadata"]["uid"] == keep_claim["metadata"]["uid"]
    env_after = wait_for(
        lambda: kubectl(ops, "exec", "-n", ns, "keep", "--", "sh", "-c", "env | grep ^NPU_MEM_QUOTA; "
                        "cat /etc/ld.so.preload", check=False).stdout or None,
        60, "exec in pod keep after the reboot", interval=0.5,
    )
    assert env_after.splitlines() == ["NPU_MEM_QUOTA=2048", "/usr/local/dralab/lib/libvcore.so"]
    # the kubelet's reconcile unprepares the claim of the pod that vanished while it was down
    uid = gone_claim["metadata"]["uid"]
    try:
        wait_for(lambda: not claim_traces(ops.layout, node, uid), 180, "no trace of the deleted pod's claim",
                 interval=1.0)
    except Exception:
        pytest.fail(f"left for the deleted pod's claim: {claim_traces(ops.layout, node, uid)}")
    kube.delete(f"/api/v1/namespaces/{ns}/pods/keep", missing_ok=True)
    kube.close()


def test_down_leaves_nothing_on_the_host(
    ops: ClusterHandle, running_pod: tuple[str, str], before: dict[str, str]
) -> None:
    node = ops.state["realNode"]
    paths = node_paths(ops, node)
    # the kubelet did write its kernel settings, into the node's private files only
    sysctls = {k: v for k, v in before.items() if k in SYSCTLS}
    private = {k: (paths.sysctl_dir / k.replace("/", ".")).read_text() for k in sysctls}
    assert private["vm/overcommit_memory"].strip() == "1"
    assert _host_sysctls() == sysctls

    # held open across `down`: once the namespace is gone, its number may be another node's
    # (a parallel test's), and its processes would be counted here
    with lifecycle.pinned_namespace(paths) as mntns:
        assert mntns == json.loads(paths.ns_ready.read_text())["mntns"]
        assert lifecycle.namespace_pids(mntns), "no process in the node's namespace while it runs?"
        assert api.down(NAME) > 0
        assert lifecycle.leftovers(paths, mntns) == []
        assert not lifecycle.namespace_pids(mntns)
    assert _host_sysctls() == sysctls
    assert {p: str(v) for p, v in _host_paths().items()} == {p: before[p] for p in HOST_PATHS}
    assert not paths.kubelet_root.exists() and not paths.root.exists()
    mounts = Path("/proc/self/mounts").read_text()
    assert str(paths.root) not in mounts and str(paths.kubelet_root) not in mounts
