"""``dralab bench node``: the real node (profile ``node``): pod latency, daemon memory, faults, Lab 20.

All on a cluster of its own (``nbench<pid>``, Lab 20's inventory, the first node real), taken
down afterwards. Nothing here does the kubelet's work: no pod is patched Ready and no
NodePrepareResources is sent by the benchmark; only the real kubelet prepares claims.

- ``pods``: 20 pods, each with its own claim (1 GiB, 5 cores of a 310P3), applied one after the
  other; apply -> Running per pod (p50/p99). Baseline in the same run: 20 pods without a claim.
- ``memory``: RSS of the kubelet and containerd at idle and with the 20 claim pods, and of the
  containerd shims (one per pod).
- ``faults``: the ``node`` profile's scenarios of :mod:`dralab_kit.faults` (the same engine and leak
  audit as ``dralab bench faults``): the driver SIGKILLed while the kubelet's NodePrepareResources
  calls are in flight; the kubelet and containerd restarted under running claim pods; the CDI folder
  wiped then the kubelet restarted; a whole reboot (``dralab cluster reboot``) with a pod and its
  claim deleted while the node is off. Each row keeps the scenario's figures (recovery times).
- ``lab``: wall time of ``dralab lab run lab20-ascend-hami-dra`` on that cluster (target <= 60 s).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from functools import partial
from importlib import resources
from pathlib import Path
from typing import Any

import click
import yaml
from rich.console import Console

from dralab import yamlio
from dralab_kit.bench.common import percentile, write_result
from dralab_kit.bench.faults import grace_for
from dralab_kit.cluster.build import K8S_VERSION
from dralab_kit.faults.context import Ctx
from dralab_kit.faults.engine import run_all
from dralab_kit.faults.target import claim_obj, pod_obj

console = Console(stderr=True)
LAB = "lab20-ascend-hami-dra"
PODS = 20
REPLAY_TARGET_S = 60.0


def summary(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50": round(percentile(values, 50), 3),
        "p99": round(percentile(values, 99), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
    }


def apply_pod(ctx: Ctx, ns: str, name: str, with_claim: bool) -> None:
    """One pod of the lab image, with a claim of its own (named after it) or none (the baseline)."""
    if with_claim:
        ctx.kube.create(f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims", claim_obj(name))
    ctx.kube.create(f"/api/v1/namespaces/{ns}/pods", pod_obj(name, name if with_claim else None))


def is_running(ctx: Ctx, ns: str, name: str) -> bool:
    obj = ctx.kube.get(f"/api/v1/namespaces/{ns}/pods/{name}", missing_ok=True) or {}
    return (obj.get("status") or {}).get("phase") == "Running"


def rss(ctx: Ctx) -> dict[str, float]:
    """Resident memory of the real node's kubelet, containerd and containerd shims."""
    from dralab_kit.cluster.api import get_cluster
    from dralab_kit.cluster.node import lifecycle
    from dralab_kit.cluster.node.integration import node_paths
    from dralab_kit.cluster.supervisor import ProcRecord, rss_bytes

    state = get_cluster(ctx.handle.name).state  # type: ignore[union-attr]
    out = {}
    for comp in ("kubelet", "containerd"):
        raw = state["components"][f"{comp}/{ctx.node}"]
        out[f"{comp}_mib"] = round(rss_bytes(ProcRecord.from_json(raw)) / 2**20, 1)
    mntns = lifecycle.read_ns(node_paths(ctx.handle, ctx.node))
    shims = [p for p in lifecycle.namespace_pids(mntns or "") if _comm(p) == "containerd-shim"]
    out["shims"] = len(shims)
    out["shims_mib"] = round(sum(_rss_pid(p) for p in shims) / 2**20, 1)
    return out


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


def measure_pods(ctx: Ctx, count: int) -> dict[str, Any]:
    from dralab.util import wait_for

    out: dict[str, Any] = {}
    idle = rss(ctx)
    for label, with_claim in (("plain", False), ("claim", True)):
        ns = ctx.namespace(f"lat-{label}")
        times = []
        for i in range(count):
            name = f"p{i}"
            started = time.monotonic()
            apply_pod(ctx, ns, name, with_claim)
            wait_for(partial(is_running, ctx, ns, name), 120, f"{name} Running", interval=0.05)
            times.append(time.monotonic() - started)
        out[f"{label}_apply_to_running_seconds"] = summary(times)
        if with_claim:
            out["memory_with_pods"] = rss(ctx)
        ctx.delete_namespace(ns)
    out["memory_idle"] = idle
    return out


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
        ctx = Ctx(handle, quick, grace_for(quick=False))  # the cluster runs the shipped grace period
        result["bring_up_seconds"] = round(up_seconds, 2)
        console.print(f"cluster {handle.name} up in {up_seconds:.1f}s; pods")
        result.update(measure_pods(ctx, count))
        result["faults"], result["faults_baseline"] = run_all(ctx)
        result["bench_did_kubelet_work"] = False  # no pod patched Ready, no Prepare sent by the bench
        if not quick:
            console.print("Lab 20 replay")
            result["lab20"] = measure_lab(handle, Path(tmp))
        ctx.close()
    path = write_result(out, "node", result)
    console.print(f"wrote {path}")
    bad = [row["name"] for row in result["faults"] if not row["passed"]]
    if bad:
        raise click.ClickException(f"faults not recovered cleanly: {', '.join(bad)} (see {path})")
