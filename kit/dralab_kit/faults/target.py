"""The node a fault scenario strikes, on either profile: its components, CDI folder and call records.

The same scenario runs on the ``local`` profile (a KWOK node, the kubelet stand-in prepares claims)
and on the ``node`` profile (a real kubelet and containerd). What differs is only where things
are, which this class answers:

- the node: the cluster's real node when it has one, else its first node;
- a component by role (``driver``, ``kubelet``, ``containerd``, ``webhook``, ``apiserver``): the
  node's own components carry the node's name (``driver/<node>``), the cluster's do not;
- the workload: on ``local`` a pod in HAMi syntax that the webhook converts; on ``node`` a claim and
  a pod of the lab image that the real containerd can start (the bench names each claim after its pod).

The kills, starts and restarts go through the cluster's own fault hooks (``dralab_kit.cluster.api``),
which only ever touch the processes and folders of that cluster.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dralab_kit.cluster import api
from dralab_kit.cluster.supervisor import ProcRecord, signal_process
from harness.cdi import read_records

NODE_ROLES = ("driver", "kubelet", "containerd")
LAB_IMAGE = "dralab.local/lab:1.0"
DEVICE_CLASS = "hami-vnpu-core.project-hami.io"


@dataclass(frozen=True)
class Target:
    handle: Any  # dralab_kit.cluster.api.ClusterHandle
    node: str
    real: bool

    @classmethod
    def of(cls, handle: Any) -> Target:
        real = handle.state.get("realNode")
        return cls(handle=handle, node=str(real or handle.nodes[0]), real=bool(real))

    @property
    def profile(self) -> str:
        return "node" if self.real else "local"

    def component(self, role: str) -> str:
        return f"{role}/{self.node}" if role in NODE_ROLES else role

    # -- fault hooks

    def kill(self, role: str) -> None:
        """SIGKILL a component (no graceful shutdown), then mark it stopped in the cluster's state."""
        component = self.component(role)
        handle = api.get_cluster(self.handle.name)
        raw = (handle.state.get("components") or {}).get(component) if handle else None
        if raw:
            signal_process(ProcRecord.from_json(raw), signal.SIGKILL)
        api.stop(self.handle.name, component)

    def start(self, role: str) -> None:
        api.start(self.handle.name, self.component(role))

    def restart(self, role: str) -> None:
        api.restart(self.handle.name, self.component(role))

    def wipe_cdi(self) -> int:
        return api.wipe_cdi(self.handle.name, self.node)

    # -- what the node shows

    def spec_files(self) -> list[str]:
        folder = Path(self.handle.cdi_dir(self.node))
        return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []

    def records(self) -> list[dict[str, Any]]:
        """The kubelet's (or the stand-in's) DRA calls on this node, oldest first."""
        return read_records(Path(self.handle.records_path(self.node)))

    def claim_traces(self, uid: str) -> list[str]:
        return claim_traces(self.handle.layout, self.node, uid)

    def enforcement_view(self, ns: str, name: str, timeout: float = 60) -> str:
        """What the enforcement sees inside a pod on the real node: its NPU_*/ASCEND_* env and
        /etc/ld.so.preload (through the kubelet, once exec answers)."""
        import subprocess

        from dralab.util import wait_for
        from dralab_kit.cluster import build

        script = "env | grep -E '^(NPU_|ASCEND_)' | sort; cat /etc/ld.so.preload"
        cmd = [str(build.binary_path("kubectl")), "--kubeconfig", str(self.handle.kubeconfig),
               "exec", "-n", ns, name, "--", "sh", "-c", script]  # fmt: skip

        def view() -> str | None:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
            return proc.stdout if proc.returncode == 0 and proc.stdout else None

        return str(wait_for(view, timeout, f"exec in {ns}/{name}", interval=0.05))

    # -- the workload

    def sharing_objects(self, name: str, labels: dict[str, str] | None = None) -> list[tuple[str, dict[str, Any]]]:
        """What to create (collection suffix, object) for one pod holding a share of one device."""
        if not self.real:
            from dralab_kit.fixtures.pods import sharing_pod

            return [("pods", sharing_pod(name, labels=labels))]
        return [("resourceclaims", claim_obj(name)), ("pods", pod_obj(name, name, labels))]


def claim_obj(name: str, memory: str = "1Gi", cores: str = "5") -> dict[str, Any]:
    """A ResourceClaim for a share of one 310P3 (what the webhook writes for a HAMi pod)."""
    request = {
        "name": "npu",
        "exactly": {
            "deviceClassName": DEVICE_CLASS,
            "allocationMode": "ExactCount",
            "count": 1,
            "capacity": {"requests": {"memory": memory, "cores": cores}},
        },
    }
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"devices": {"requests": [request]}},
    }


def pod_obj(name: str, claim: str | None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A pod of the lab image the real containerd starts; with ``claim``, it uses that claim."""
    spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "c", "image": LAB_IMAGE, "command": ["sleep", "3600"]}],
    }
    if claim:
        spec["resourceClaims"] = [{"name": "npu", "resourceClaimName": claim}]
        spec["containers"][0]["resources"] = {"claims": [{"name": "npu"}]}
    meta: dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = dict(labels)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def claim_traces(layout: Any, node: str, uid: str) -> list[str]:
    """Where the node keeps a prepared claim: its CDI spec, its claim folder, its checkpoint entry."""
    from dralab.driver.checkpoint import newest_document

    found = [str(f) for f in layout.cdi_dir(node).glob(f"*{uid}*")]
    state = layout.driver_state_dir(node)
    for driver_dir in sorted(state.iterdir()) if state.is_dir() else []:
        found += [str(f) for f in (driver_dir / "claims").glob(f"{uid}*")]
        newest = newest_document(driver_dir / "checkpoint.json")  # the other slot may be older
        if newest is not None and uid in (newest.get("claims") or {}):
            found.append(f"{driver_dir}/checkpoint.json: claims[{uid}]")
    return found
