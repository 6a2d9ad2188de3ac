"""The real node: pods run in containerd through a real kubelet, claims are prepared by it.

Every test here runs on the shared ``dralab-node`` cluster and changes nothing but its own
namespace; restarts and teardown are in ``test_node_operate.py`` (clusters of their own).
"""

from __future__ import annotations

import json
import ssl
from pathlib import Path

import httpx
import pytest

from dralab.kube import Kube
from dralab.util import wait_for
from dralab_kit.cluster.api import ClusterHandle
from dralab_kit.cluster.node import lifecycle
from dralab_kit.cluster.node.integration import node_paths
from dralab_kit.cluster.pki import Pki
from dralab_kit.faults.target import claim_obj

from .node_helpers import kubectl, pod, wait_gone, wait_running

pytestmark = pytest.mark.integration



def _real(handle: ClusterHandle) -> str:
    return str(handle.state["realNode"])


def test_node_is_a_real_kubelet_on_loopback(node_cluster: ClusterHandle, kube: Kube) -> None:
    node = kube.get(f"/api/v1/nodes/{_real(node_cluster)}", missing_ok=True)
    assert node is not None
    info = node["status"]["nodeInfo"]
    assert info["kubeletVersion"] == "v1.35.4"
    assert info["containerRuntimeVersion"] == "containerd://2.2.9"
    assert node["status"]["addresses"] == [{"type": "InternalIP", "address": "127.0.0.1"}]
    assert "kwok.x-k8s.io/node" not in (node["metadata"].get("annotations") or {})
    ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
    assert ready and ready[0]["status"] == "True"


def test_plain_pod_runs_with_exec_and_logs(node_cluster: ClusterHandle, kube: Kube, ns: str) -> None:
    kube.create(f"/api/v1/namespaces/{ns}/pods", pod("plain", "echo started-$HOSTNAME; sleep 3600"))
    wait_running(kube, ns, "plain")
    logs = wait_for(
        lambda: (out := kubectl(node_cluster, "logs", "-n", ns, "plain", check=False).stdout) and out,
        30,
        "the container's log line",
        interval=0.2,
    )
    assert logs.strip() == "started-plain"
    out = kubectl(node_cluster, "exec", "-n", ns, "plain", "--", "sh", "-c", "cat /proc/1/cmdline | tr '\\0' ' '")
    assert out.stdout.strip() == "sleep 3600"  # PID 1 of a real container, not a process on the host


def test_runtime_class_ascend_runs_through_the_ascend_handler(node_cluster: ClusterHandle, kube: Kube, ns: str) -> None:
    kube.create(f"/api/v1/namespaces/{ns}/pods", pod("rc", "sleep 3600", runtimeClassName="ascend"))
    obj = wait_running(kube, ns, "rc")
    paths = node_paths(node_cluster, _real(node_cluster))
    sandboxes = lifecycle.ctr(
        paths, "containers", "ls", "-q", f"labels.io.kubernetes.pod.uid=={obj['metadata']['uid']}"
    ).stdout.split()
    assert sandboxes, "containerd has no container of the pod"
    infos = [json.loads(lifecycle.ctr(paths, "containers", "info", cid).stdout) for cid in sandboxes]
    sandbox = [i for i in infos if (i.get("Labels") or {}).get("io.cri-containerd.kind") == "sandbox"]
    assert len(sandbox) == 1
    assert _runtime_handler(sandbox[0]) == "ascend"  # the RuntimeClass's handler, as the kubelet asked containerd


def _runtime_handler(info: dict) -> str | None:
    """The CRI runtime handler containerd recorded for a sandbox or container."""
    for ext in (info.get("Extensions") or {}).values():
        value = ext.get("value") if isinstance(ext, dict) else None
        if isinstance(value, str):
            import base64

            try:
                decoded = json.loads(base64.b64decode(value))
            except ValueError:
                continue
            meta = decoded.get("Metadata") or decoded
            if isinstance(meta, dict) and meta.get("RuntimeHandler"):
                return str(meta["RuntimeHandler"])
    return (info.get("Labels") or {}).get("io.cri-containerd.runtime-handler")


def ssl_context(pki: Pki, client_cert: bool = True) -> ssl.SSLContext:
    """Trust the cluster CA (it signed the kubelet's serving cert); present the admin cert unless told not to."""
    ctx = ssl.create_default_context(cafile=str(pki.ca_cert))
    if client_cert:
        ctx.load_cert_chain(str(pki.cert("admin")), str(pki.key("admin")))
    return ctx


def _records(handle: ClusterHandle) -> list[dict]:
    path = Path(handle.records_path(_real(handle)))
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


def _calls_for(handle: ClusterHandle, uid: str, call: str) -> list[dict]:
    return [r for r in _records(handle) if r["call"] == call and any(c["uid"] == uid for c in r["claims"])]


def test_claim_prepared_by_the_real_kubelet_and_unprepared_on_delete(
    node_cluster: ClusterHandle, kube: Kube, ns: str
) -> None:
    claims = f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims"
    claim = kube.create(claims, claim_obj("npu", memory="4Gi", cores="30"))
    uid = claim["metadata"]["uid"]
    spec = pod("app", "sleep 3600", resourceClaims=[{"name": "npu", "resourceClaimName": "npu"}])
    spec["spec"]["containers"][0]["resources"] = {"claims": [{"name": "npu"}]}
    kube.create(f"/api/v1/namespaces/{ns}/pods", spec)
    wait_running(kube, ns, "app")

    prepares = _calls_for(node_cluster, uid, "NodePrepareResources")
    assert prepares and prepares[-1]["source"] == "kubelet" and not prepares[-1].get("error")
    assert prepares[-1]["method"] == "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources"
    ids = prepares[-1]["cdiDeviceIDs"]
    assert ids == [f"k8s.ascend.project-hami.io/npu={uid}"]

    env = kubectl(node_cluster, "exec", "-n", ns, "app", "--", "env").stdout
    values = dict(line.split("=", 1) for line in env.splitlines() if "=" in line)
    assert values["NPU_MEM_QUOTA"] == "4096"  # from the claim's CDI spec, applied by containerd
    assert values["ASCEND_VISIBLE_DEVICES"] in ("0", "1")
    dev = kubectl(
        node_cluster, "exec", "-n", ns, "app", "--", "ls", "-l", f"/dev/davinci{values['ASCEND_VISIBLE_DEVICES']}"
    )
    assert dev.stdout.startswith("c")  # a character device node from CDI deviceNodes
    preload = kubectl(node_cluster, "exec", "-n", ns, "app", "--", "cat", "/etc/ld.so.preload").stdout
    assert preload.strip().endswith("libvcore.so")

    kube.delete(f"/api/v1/namespaces/{ns}/pods/app", missing_ok=True)
    wait_gone(kube, f"/api/v1/namespaces/{ns}/pods/app")
    kube.delete(f"{claims}/npu", missing_ok=True)
    wait_for(
        lambda: _calls_for(node_cluster, uid, "NodeUnprepareResources"), 60, "NodeUnprepareResources", interval=0.2
    )
    cdi = node_cluster.cdi_dir(_real(node_cluster))
    assert not [p for p in cdi.iterdir() if uid in p.name]


def test_role_generated_configs_are_what_runs(node_cluster: ClusterHandle, kube: Kube) -> None:
    paths = node_paths(node_cluster, _real(node_cluster))
    stamp = json.loads(paths.roles_stamp.read_text())
    assert stamp["stats"]["failures"] == 0 and stamp["stats"]["changed"] >= 3
    # containerd: the CRI config it loaded has the roles' CDI settings and the ascend handler
    log = node_cluster.log_path(f"containerd/{_real(node_cluster)}").read_text()
    line = [ln for ln in log.splitlines() if "starting cri plugin" in ln][-1]
    assert '\\"enableCDI\\":true' in line
    assert f'\\"cdiSpecDirs\\":[\\"{node_cluster.cdi_dir(_real(node_cluster))}\\"]' in line
    assert '\\"ascend\\":{\\"runtimeType\\":\\"io.containerd.runc.v2\\"' in line
    # kubelet: its running configuration (/configz on 127.0.0.1, x509 client auth) has the role's gate;
    # the apiserver's node proxy refuses loopback node addresses, exec and logs do not use it
    pki = Pki(node_cluster.layout.pki_dir)
    port = node_cluster.state["nodePorts"][_real(node_cluster)]["port"]
    resp = httpx.get(
        f"https://127.0.0.1:{port}/configz",
        verify=ssl_context(pki),
        timeout=10,
    )
    assert resp.status_code == 200, resp.text
    configz = resp.json()
    anonymous = httpx.get(f"https://127.0.0.1:{port}/configz", verify=ssl_context(pki, client_cert=False), timeout=10)
    assert anonymous.status_code == 401  # only clients with a cluster-CA certificate get in
    assert configz["kubeletconfig"]["featureGates"] == {"DRAConsumableCapacity": True}
    assert configz["kubeletconfig"]["cgroupDriver"] == "cgroupfs"


def test_node_keeps_the_kubelets_labels_and_a_hostname_selector_schedules(
    node_cluster: ClusterHandle, kube: Kube, ns: str
) -> None:
    name = _real(node_cluster)
    labels = kube.get(f"/api/v1/nodes/{name}")["metadata"]["labels"]
    assert labels["kubernetes.io/hostname"] == name
    assert labels["kubernetes.io/os"] == "linux"
    assert labels["kubernetes.io/arch"]
    kube.create(
        f"/api/v1/namespaces/{ns}/pods",
        pod("by-hostname", "sleep 3600", nodeSelector={"kubernetes.io/hostname": name}),
    )
    assert wait_running(kube, ns, "by-hostname")["spec"]["nodeName"] == name
