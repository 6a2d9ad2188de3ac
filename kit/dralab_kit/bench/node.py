"""``dralab bench node``: the real node (profile ``node``): pod latency, daemon memory, faults, Lab 20.

All on a cluster of its own (``nbench<pid>``, Lab 20's inventory, the first node real), taken
down afterwards. Nothing here does the kubelet's work: no pod is patched Ready and no
NodePrepareResources is sent by the benchmark; only the real kubelet prepares claims.

- ``pods``: 20 pods, each with its own claim (1 GiB, 5 cores of a 310P3), applied one after the
  other; apply -> Running per pod (p50/p99). Baseline in the same run: 20 pods without a claim.
- ``memory``: RSS of the kubelet and containerd at idle and with the 20 claim pods, and of the
  containerd shims (one per pod).
- ``faults`` (each ends with every live claim holding its CDI spec and, after cleanup, none left):
  driver SIGKILLed while the kubelet's NodePrepareResources calls are in flight; kubelet restarted
  and containerd restarted under running claim pods (the same containers must keep running, a new
  claim pod must start); the CDI folder wiped then the kubelet restarted (what a reboot leaves),
  recording whether the specs come back and whether a new claim pod still starts; a whole reboot
  (``dralab cluster reboot``: everything on the node killed at once, /run and the CDI folder emptied)
  with a pod and its claim deleted while the node is off: the other pods run again with the same
  claims and quota, the deleted claim leaves no folder, CDI spec or checkpoint entry, and the time
  from the power-off to all pods Running is recorded.
- ``lab``: wall time of ``dralab lab run lab20-ascend-hami-dra`` on that cluster (target <= 60 s).
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from functools import partial
from importlib import resources
from pathlib import Path
from typing import Any

import click
import yaml
from rich.console import Console

from dralab import yamlio
from dralab_kit.bench.common import percentile, write_result
from dralab_kit.cluster.build import K8S_VERSION

console = Console(stderr=True)
DEVICE_CLASS = "hami-vnpu-core.project-hami.io"
IMAGE = "dralab.local/lab:1.0"
LAB = "lab20-ascend-hami-dra"
PODS = 20
REPLAY_TARGET_S = 60.0


def claim_obj(name: str, memory: str = "1Gi", cores: str = "5") -> dict[str, Any]:
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


def pod_obj(name: str, claim: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "c", "image": IMAGE, "command": ["sleep", "3600"]}],
    }
    if claim:
        spec["resourceClaims"] = [{"name": "npu", "resourceClaimName": claim}]
        spec["containers"][0]["resources"] = {"claims": [{"name": "npu"}]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def summary(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50": round(percentile(values, 50), 3),
        "p99": round(percentile(values, 99), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
    }


class Bench:
    """One benchmark cluster with a real node, and the observations the scenarios need."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.kube = handle.kube()
        self.node = str(handle.state["realNode"])

    # -- objects --------------------------------------------------------------------------------

    def namespace(self, prefix: str) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:5]}"
        self.kube.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        return name

    def phase(self, ns: str, name: str) -> str | None:
        obj = self.kube.get(f"/api/v1/namespaces/{ns}/pods/{name}", missing_ok=True)
        return (obj or {}).get("status", {}).get("phase")

    def running(self, ns: str, name: str) -> bool:
        """A :meth:`wait` check (bound with functools.partial): pod ``name`` is Running."""
        return self.phase(ns, name) == "Running"

    def wait(self, check: Callable[[], Any], timeout: float, what: str) -> Any:
        from dralab.util import wait_for

        return wait_for(check, timeout, what, interval=0.05)

    def apply_pod(self, ns: str, name: str, with_claim: bool) -> None:
        if with_claim:
            self.kube.create(f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims", claim_obj(name))
        self.kube.create(f"/api/v1/namespaces/{ns}/pods", pod_obj(name, name if with_claim else None))

    def all_running(self, ns: str, names: list[str], timeout: float = 180) -> None:
        self.wait(lambda: all(self.phase(ns, n) == "Running" for n in names), timeout, f"{len(names)} pods Running")

    def delete_namespace(self, ns: str) -> None:
        self.kube.delete(f"/api/v1/namespaces/{ns}", missing_ok=True)
        self.wait(
            lambda: self.kube.get(f"/api/v1/namespaces/{ns}", missing_ok=True) is None, 180, f"namespace {ns} gone"
        )

    def container_ids(self, ns: str) -> dict[str, str]:
        pods = (self.kube.get(f"/api/v1/namespaces/{ns}/pods", missing_ok=True) or {}).get("items") or []
        return {
            p["metadata"]["name"]: ((p["status"].get("containerStatuses") or [{}])[0].get("containerID", ""))
            for p in pods
        }

    # -- node observations ----------------------------------------------------------------------

    def records(self) -> list[dict[str, Any]]:
        path = Path(self.handle.records_path(self.node))
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []

    def spec_files(self) -> list[str]:
        return sorted(p.name for p in self.handle.cdi_dir(self.node).iterdir() if p.name.endswith(".yaml"))

    def live_claim_uids(self, ns: str) -> set[str]:
        path = f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims"
        items = (self.kube.get(path, missing_ok=True) or {}).get("items") or []
        return {c["metadata"]["uid"] for c in items}

    def claims_by_pod(self, ns: str) -> dict[str, str]:
        """Pod name -> the uid of its claim (the bench names each claim after its pod)."""
        path = f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims"
        items = (self.kube.get(path, missing_ok=True) or {}).get("items") or []
        return {c["metadata"]["name"]: c["metadata"]["uid"] for c in items}

    def claim_traces(self, uid: str) -> list[str]:
        return claim_traces(self.handle.layout, self.node, uid)

    def enforcement_view(self, ns: str, name: str) -> str:
        """What the enforcement sees inside the pod: its NPU_*/ASCEND_* env and /etc/ld.so.preload
        (through the kubelet, once exec answers)."""
        from dralab_kit.cluster import build

        script = "env | grep -E '^(NPU_|ASCEND_)' | sort; cat /etc/ld.so.preload"
        cmd = [str(build.binary_path("kubectl")), "--kubeconfig", str(self.handle.kubeconfig),
               "exec", "-n", ns, name, "--", "sh", "-c", script]  # fmt: skip

        def view() -> str | None:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
            return proc.stdout if proc.returncode == 0 and proc.stdout else None

        return str(self.wait(view, 60, f"exec in {ns}/{name}"))

    def settles(self, check: Callable[[], Any], timeout: float, what: str) -> bool:
        """Whether ``check`` holds within ``timeout`` (a wait whose timeout is a finding, not an error)."""
        from dralab.util import WaitTimeout

        try:
            self.wait(check, timeout, what)
        except WaitTimeout:
            return False
        return True

    def restarted(self, ns: str, name: str, old_container: str) -> bool:
        """Running and ready in a container other than ``old_container`` (the one before the reboot)."""
        obj = self.kube.get(f"/api/v1/namespaces/{ns}/pods/{name}", missing_ok=True) or {}
        status = obj.get("status") or {}
        ctr = (status.get("containerStatuses") or [{}])[0]
        return (status.get("phase") == "Running" and bool(ctr.get("ready"))
                and ctr.get("containerID", old_container) != old_container)

    def missing_specs(self, uids: set[str]) -> list[str]:
        files = " ".join(self.spec_files())
        return sorted(u for u in uids if u not in files)

    def rss(self) -> dict[str, float]:
        from dralab_kit.cluster.api import get_cluster
        from dralab_kit.cluster.node import lifecycle
        from dralab_kit.cluster.node.integration import node_paths
        from dralab_kit.cluster.supervisor import ProcRecord, rss_bytes

        state = get_cluster(self.handle.name).state  # type: ignore[union-attr]
        out = {}
        for comp in ("kubelet", "containerd"):
            raw = state["components"][f"{comp}/{self.node}"]
            out[f"{comp}_mib"] = round(rss_bytes(ProcRecord.from_json(raw)) / 2**20, 1)
        mntns = lifecycle.read_ns(node_paths(self.handle, self.node))
        shims = [p for p in lifecycle.namespace_pids(mntns or "") if _comm(p) == "containerd-shim"]
        out["shims"] = len(shims)
        out["shims_mib"] = round(sum(_rss_pid(p) for p in shims) / 2**20, 1)
        return out

    def kill_driver(self) -> None:
        from dralab_kit.cluster import api
        from dralab_kit.cluster.supervisor import ProcRecord, signal_process

        state = api.get_cluster(self.handle.name).state  # type: ignore[union-attr]
        signal_process(ProcRecord.from_json(state["components"][f"driver/{self.node}"]), signal.SIGKILL)
        api.stop(self.handle.name, f"driver/{self.node}")

    def node_ready(self) -> bool:
        obj = self.kube.get(f"/api/v1/nodes/{self.node}", missing_ok=True) or {}
        return any(c["type"] == "Ready" and c["status"] == "True" for c in obj.get("status", {}).get("conditions", []))


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


def _comm(pid: int) -> str:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/comm").read_text().strip()
    return ""


def _rss_pid(pid: int) -> int:
    with contextlib.suppress(OSError, ValueError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


# ---------------------------------------------------------------- measurements


def measure_pods(b: Bench, count: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    idle = b.rss()
    for label, with_claim in (("plain", False), ("claim", True)):
        ns = b.namespace(f"lat-{label}")
        times = []
        for i in range(count):
            name = f"p{i}"
            started = time.monotonic()
            b.apply_pod(ns, name, with_claim)
            b.wait(partial(b.running, ns, name), 120, f"{name} Running")
            times.append(time.monotonic() - started)
        out[f"{label}_apply_to_running_seconds"] = summary(times)
        if with_claim:
            out["memory_with_pods"] = b.rss()
        b.delete_namespace(ns)
    out["memory_idle"] = idle
    return out


def fault_driver_killed_mid_prepare(b: Bench) -> dict[str, Any]:
    ns = b.namespace("f-drv")
    names = [f"p{i}" for i in range(5)]
    before = len(b.records())
    for n in names:
        b.apply_pod(ns, n, True)
    b.wait(lambda: any(r["call"] == "NodePrepareResources" for r in b.records()[before:]), 60, "a Prepare call")
    b.kill_driver()
    killed_at = time.monotonic()
    from dralab_kit.cluster import api

    api.start(b.handle.name, f"driver/{b.node}")
    b.all_running(ns, names)
    recovered = time.monotonic() - killed_at
    uids = b.live_claim_uids(ns)
    missing = b.missing_specs(uids)
    failed_calls = [r for r in b.records()[before:] if r["call"] == "NodePrepareResources" and r.get("error")]
    b.delete_namespace(ns)
    leaked = [f for f in b.spec_files() if any(u in f for u in uids)]
    ok = not missing and not leaked
    return {"ok": ok, "pods": len(names), "recovered_seconds": round(recovered, 2),
            "failed_prepare_calls": len(failed_calls), "missing_specs": missing, "leaked_specs": leaked}  # fmt: skip


def fault_restart(b: Bench, component: str) -> dict[str, Any]:
    from dralab_kit.cluster import api

    ns = b.namespace(f"f-{component}")
    names = [f"p{i}" for i in range(3)]
    for n in names:
        b.apply_pod(ns, n, True)
    b.all_running(ns, names)
    containers = b.container_ids(ns)
    started = time.monotonic()
    api.restart(b.handle.name, component)
    b.wait(b.node_ready, 120, "node Ready")
    b.apply_pod(ns, "after", True)
    b.all_running(ns, [*names, "after"])
    new_pod_seconds = time.monotonic() - started
    same = {n: b.container_ids(ns).get(n) == cid for n, cid in containers.items()}
    missing = b.missing_specs(b.live_claim_uids(ns))
    uids = b.live_claim_uids(ns)
    b.delete_namespace(ns)
    leaked = [f for f in b.spec_files() if any(u in f for u in uids)]
    ok = all(same.values()) and not missing and not leaked
    return {"ok": ok, "containers_kept": sum(same.values()), "pods": len(names),
            "restart_to_new_claim_pod_running_seconds": round(new_pod_seconds, 2),
            "missing_specs": missing, "leaked_specs": leaked}  # fmt: skip


def fault_cdi_wiped_kubelet_restart(b: Bench) -> dict[str, Any]:
    from dralab_kit.cluster import api

    ns = b.namespace("f-cdi")
    names = [f"p{i}" for i in range(3)]
    for n in names:
        b.apply_pod(ns, n, True)
    b.all_running(ns, names)
    uids = b.live_claim_uids(ns)
    wiped = api.wipe_cdi(b.handle.name, b.node)
    before = len(b.records())
    api.restart(b.handle.name, "kubelet")
    b.wait(b.node_ready, 120, "node Ready")
    b.apply_pod(ns, "after", True)
    b.all_running(ns, [*names, "after"])
    calls = [r["call"] for r in b.records()[before:] if any(c["uid"] in uids for c in r.get("claims") or [])]
    restored = sorted(uids - set(b.missing_specs(uids)))
    common_after_kubelet = any(f.endswith("_common.yaml") for f in b.spec_files())
    # a reboot restarts the driver too: it rewrites its common spec at start
    api.restart(b.handle.name, f"driver/{b.node}")
    common_after_driver = any(f.endswith("_common.yaml") for f in b.spec_files())
    all_uids = b.live_claim_uids(ns)
    b.delete_namespace(ns)
    leaked = [f for f in b.spec_files() if any(u in f for u in all_uids)]
    # a new claim pod must start; whether the old claims' specs come back is recorded, not required
    return {"ok": not leaked and common_after_driver, "wiped_files": wiped, "old_claims": len(uids),
            "old_specs_restored": len(restored), "kubelet_calls_for_old_claims_after_restart": calls,
            "common_spec_back_after_kubelet_restart": common_after_kubelet,
            "common_spec_back_after_driver_restart": common_after_driver,
            "new_claim_pod_running": True, "leaked_specs": leaked}  # fmt: skip


def fault_reboot(b: Bench) -> dict[str, Any]:
    """A reboot (``api.reboot``) with one pod and its claim deleted while the node is off.

    Met when the other pods run again in new containers with the same claims, each prepared again by
    the kubelet with its CDI spec back, the same NPU_* env and /etc/ld.so.preload inside, and nothing
    (claim folder, CDI spec, checkpoint entry) is left of the deleted claim or, after cleanup, of any.
    """
    from dralab_kit.cluster import api

    ns = b.namespace("f-reboot")
    names = [f"p{i}" for i in range(3)]
    for n in [*names, "gone"]:
        b.apply_pod(ns, n, True)
    b.all_running(ns, [*names, "gone"])
    claims, containers = b.claims_by_pod(ns), b.container_ids(ns)
    seen = {n: b.enforcement_view(ns, n) for n in names}
    had_traces = bool(b.claim_traces(claims["gone"]))
    before = len(b.records())

    powered_off = time.monotonic()
    api.reboot(b.handle.name, b.node, start=False)
    # deleted while the node is off: no kubelet confirms it, so by force, and its claim with it
    b.kube.delete(f"/api/v1/namespaces/{ns}/pods/gone", grace_period_seconds=0)
    claim_path = f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/gone"
    b.kube.delete(claim_path, missing_ok=True)
    b.wait(lambda: b.kube.get(claim_path, missing_ok=True) is None, 60, "the deleted pod's claim gone")
    powered_on = time.monotonic()
    api.ensure_cluster(b.handle.name, real_node=True)
    node_up = time.monotonic()
    b.wait(lambda: all(b.restarted(ns, n, containers[n]) for n in names), 300, "the pods Running again")
    all_running = time.monotonic()

    same_claims = {n: b.claims_by_pod(ns).get(n) == claims[n] for n in names}
    views = {n: b.enforcement_view(ns, n) for n in names}
    live = {claims[n] for n in names}
    prepared = {c["uid"] for r in b.records()[before:] if r["call"] == "NodePrepareResources" and not r.get("error")
                for c in r.get("claims") or []}  # fmt: skip
    missing = b.missing_specs(live)
    # the kubelet unprepares what no pod holds any more once it has synced: seconds, not at once
    cleaned = b.settles(lambda: not b.claim_traces(claims["gone"]), 180, "no trace of the deleted claim")
    cleaned_at = time.monotonic()
    b.delete_namespace(ns)

    def leftovers() -> list[str]:
        return [t for uid in sorted(live | {claims["gone"]}) for t in b.claim_traces(uid)]

    b.settles(lambda: not leftovers(), 60, "no trace of the fault's claims after cleanup")
    leaked = leftovers()
    ok = (had_traces and cleaned and all(same_claims.values()) and views == seen
          and "NPU_MEM_QUOTA=1024" in views[names[0]] and live <= prepared and not missing and not leaked)
    return {"ok": ok, "pods": len(names), "deleted_while_off": 1,
            "power_off_to_all_pods_running_seconds": round(all_running - powered_off, 2),
            "node_off_seconds": round(powered_on - powered_off, 2),
            "power_on_to_node_healthy_seconds": round(node_up - powered_on, 2),
            "power_on_to_all_pods_running_seconds": round(all_running - powered_on, 2),
            "deleted_claim_traces_gone_seconds": round(cleaned_at - all_running, 2),
            "same_claims": sum(same_claims.values()), "same_env_and_preload": views == seen,
            "quota_inside": next((line for line in views[names[0]].splitlines() if "NPU_MEM_QUOTA" in line), None),
            "prepared_again": len(live & prepared), "missing_specs": missing, "leaked": leaked}  # fmt: skip


def measure_lab(handle: Any, work: Path) -> dict[str, Any]:
    data = yamlio.load(resources.files("harness").joinpath("profiles", "node.yaml").read_text(), "profile node")
    data["cluster"]["name"] = handle.name
    profile = work / "node-bench-profile.yaml"
    profile.write_text(yaml.safe_dump(data))
    reports = work / "reports"
    cmd = [
        sys.executable,
        "-m",
        "dralab.cli",
        "lab",
        "run",
        LAB,
        "--profile",
        str(profile),
        "--reports-dir",
        str(reports),
    ]
    started = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    result = json.loads((reports / "latest" / "labs" / f"{LAB}.json").read_text())
    if proc.returncode != 0:
        failed = [s for s in result["steps"] if s.get("status") == "failed"]
        detail = json.dumps(failed[:1], default=str)[:3000] if failed else proc.stdout[-3000:]
        raise click.ClickException(f"Lab 20 on the node failed (exit {proc.returncode}): {detail}")
    return {
        "replay_wall_seconds": round(wall, 2),
        "lab_seconds": result["seconds"],
        "steps_seconds": round(sum(s["seconds"] for s in result["steps"]), 3),
        "status": result["status"],
        "target_seconds": REPLAY_TARGET_S,
        "within_target": wall <= REPLAY_TARGET_S,
        "step_seconds": {s["id"]: s["seconds"] for s in result["steps"]},
    }


@contextlib.contextmanager
def bench_cluster(keep: bool) -> Iterator[tuple[Any, float]]:
    import os

    from dralab_kit.cluster.api import down, ensure_cluster

    name = f"nbench{os.getpid() % 100000}"
    started = time.monotonic()
    try:
        handle = ensure_cluster(name, real_node=True)
        yield handle, time.monotonic() - started
    finally:
        if not keep:
            down(name, keep_logs=False)


@click.command("node")
@click.option("--out", default="bench/results", show_default=True, help="folder for node.json")
@click.option("--quick", is_flag=True, help="5 pods instead of 20; no Lab 20 replay")
@click.option("--keep", is_flag=True, help="leave the benchmark cluster up")
def node(out: str, quick: bool, keep: bool) -> None:
    """The real node: pod apply->Running with claims, kubelet/containerd memory, faults, Lab 20 replay.

    \b
    Example:
      dralab bench node
    """
    count = 5 if quick else PODS
    result: dict[str, Any] = {"benchmark": "node", "pods": count, "kubelet": K8S_VERSION, "containerd": "v2.2.9"}
    with tempfile.TemporaryDirectory(prefix="dralab-nbench-") as tmp, bench_cluster(keep) as (handle, up_seconds):
        b = Bench(handle)
        result["bring_up_seconds"] = round(up_seconds, 2)
        console.print(f"cluster {handle.name} up in {up_seconds:.1f}s; pods")
        result.update(measure_pods(b, count))
        faults: dict[str, Any] = {}
        console.print("fault: driver killed mid-prepare")
        faults["driver_killed_mid_prepare"] = fault_driver_killed_mid_prepare(b)
        for comp in ("kubelet", "containerd"):
            console.print(f"fault: {comp} restart")
            faults[f"{comp}_restart"] = fault_restart(b, comp)
        console.print("fault: CDI wiped, kubelet restarted")
        faults["cdi_wiped_kubelet_restart"] = fault_cdi_wiped_kubelet_restart(b)
        console.print("fault: reboot")
        faults["reboot"] = fault_reboot(b)
        result["faults"] = faults
        result["bench_did_kubelet_work"] = False  # no pod patched Ready, no Prepare sent by the bench
        if not quick:
            console.print("Lab 20 replay")
            result["lab20"] = measure_lab(handle, Path(tmp))
        b.kube.close()
    path = write_result(out, "node", result)
    console.print(f"wrote {path}")
    bad = [k for k, v in result["faults"].items() if not v["ok"]]
    if bad:
        raise click.ClickException(f"faults not recovered cleanly: {', '.join(bad)} (see {path})")
