"""``dralab bench pains``: the figures behind "What DRA fixes, proven", from one run.

Three labs replayed on a cluster profile (``local`` by default, cluster ``dralab-team-gpus``;
``--profile node`` for a real kubelet, result ``pains-node.json``) with their own inventory,
``team-gpus``, plus a concurrent burst against a ShareBudget on the same cluster:

- ``budget_burst``: N pods of one namespace created at once against a memory budget that fits
  only some; ``overshoot_bytes`` is what the admitted claims request past the budget (the
  webhook's per-namespace lock must make it 0), next to ``expected_admitted``;
- ``failed_prepare``: time to Running of three pods sharing a node and GPU with a claim whose
  NodePrepareResources keeps failing, beside three baseline pods measured in the same replay
  before the fault; ``extra_delay_seconds`` is the slowest neighbour minus the slowest baseline pod
  (and ``extra_delay_median_seconds`` the medians' difference);
- ``preemption``: what kube-scheduler did for a high-priority pod on a full shared GPU, and the
  time from evicting one sharer to the preemptor's allocation.
"""

from __future__ import annotations

import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from dralab.model import budget as model
from dralab.model.quantity import MIB
from dralab_kit.bench.common import write_result

INVENTORY = "team-gpus"
LABS = ("team-budgets", "failed-prepare-isolation", "preempt-sharers")
NOWHERE = {"dralab.io/bench": "no-such-node"}  # admitted pods stay unscheduled: only admission is measured

console = Console(stderr=True)


def _budget(namespace: str, device_class: str, memory_mib: int) -> dict[str, Any]:
    return {
        "apiVersion": model.API_VERSION,
        "kind": model.KIND,
        "metadata": {"name": "burst", "namespace": namespace},
        "spec": {"deviceClassName": device_class, "memory": f"{memory_mib}Mi"},
    }


def _pod(namespace: str, name: str, limits: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "nodeSelector": dict(NOWHERE),
            "containers": [{"name": "app", "image": "busybox:1.36", "resources": {"limits": limits}}],
        },
    }


def budget_burst(
    kube: Any,
    namespace: str,
    *,
    device_class: str,
    limits: dict[str, Any],
    memory_mib: int,
    budget_mib: int,
    pods: int = 24,
    workers: int = 12,
) -> dict[str, Any]:
    """Create ``pods`` pods (each ``memory_mib``) at once against a ``budget_mib`` ShareBudget.

    ``kube`` is a :class:`dralab.kube.Kube` (thread-safe); ``namespace`` must exist.
    Returns the counts, what the namespace's claims request afterwards and the overshoot.
    """
    from dralab.kube import KubeError

    base = f"/apis/{model.API_VERSION}/namespaces/{namespace}/{model.PLURAL}"
    kube.create(base, _budget(namespace, device_class, budget_mib))
    start = threading.Barrier(min(workers, pods))
    outcomes: list[tuple[str, str]] = []
    lock = threading.Lock()

    def one(i: int) -> None:
        with contextlib.suppress(threading.BrokenBarrierError):
            start.wait(timeout=30)
        try:
            kube.create(f"/api/v1/namespaces/{namespace}/pods", _pod(namespace, f"burst-{i}", limits))
            result = ("admitted", "")
        except KubeError as exc:
            result = ("denied" if "ShareBudget" in exc.message else "error", exc.message[:300])
        with lock:
            outcomes.append(result)

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(one, range(pods)))
    wall = time.monotonic() - started
    claims = kube.get(f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims", missing_ok=True) or {}
    used = model.namespace_use(claims.get("items") or [], device_class)
    budget_bytes = budget_mib * MIB
    admitted = sum(1 for kind, _ in outcomes if kind == "admitted")
    return {
        "pods": pods,
        "workers": workers,
        "pod_memory_mib": memory_mib,
        "budget_mib": budget_mib,
        "expected_admitted": budget_mib // memory_mib,
        "admitted": admitted,
        "denied": sum(1 for kind, _ in outcomes if kind == "denied"),
        "errors": [msg for kind, msg in outcomes if kind == "error"],
        "claims": used.claims,
        "requested_bytes": used.amount.memory,
        "budget_bytes": budget_bytes,
        "overshoot_bytes": max(0, used.amount.memory - budget_bytes),
        "wall_seconds": round(wall, 3),
        "sample_denial": next((msg for kind, msg in outcomes if kind == "denied"), None),
    }


def _replay(lab: str, work: Path, profile: str) -> dict[str, Any]:
    reports = work / "reports"
    cmd = [sys.executable, "-m", "dralab.cli", "lab", "run", lab, "--profile", profile, "--reports-dir", str(reports)]
    proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = proc.stdout[-3000:] + proc.stderr[-2000:]
        raise click.ClickException(f"lab {lab} failed (exit {proc.returncode}):\n{tail}")
    result = json.loads((reports / "latest" / "labs" / f"{lab}.json").read_text())
    return {
        "status": result["status"],
        "seconds": result["seconds"],
        "metrics": result["metrics"],
        "scheduler_reasons": pending_reasons(result),
    }


def pending_reasons(result: dict[str, Any]) -> dict[str, str]:
    """Pod -> the FailedScheduling message each passed ``expect-pending`` of a lab result saw."""
    out = {}
    for step in result.get("steps") or []:
        for op in step.get("ops") or []:
            if op.get("kind") == "expect-pending" and op.get("status") == "passed":
                excerpt = op.get("excerpt") or {}
                out[(excerpt.get("pod") or {}).get("name", "?")] = (excerpt.get("event") or {}).get("message", "")
    return out


def _failed_prepare(metrics: dict[str, float]) -> dict[str, Any]:
    """Neighbours of the failing claim against the baseline pods of the same replay."""
    neighbours = [v for k, v in sorted(metrics.items()) if k.startswith("neighbour_")]
    baselines = [v for k, v in sorted(metrics.items()) if k.startswith("baseline_")]
    return {
        "baseline_running_seconds": baselines,
        "neighbour_running_seconds": neighbours,
        "extra_delay_seconds": round(max(neighbours) - max(baselines), 3),
        "extra_delay_median_seconds": round(statistics.median(neighbours) - statistics.median(baselines), 3),
        "recovery_seconds": metrics.get("recovery_seconds"),
    }


def _burst(cluster: str, pods: int) -> dict[str, Any]:
    """The budget burst in a namespace of its own on ``cluster`` (which the labs brought up)."""
    from dralab_kit.cluster import api

    handle = api.get_cluster(cluster)
    if handle is None:
        raise click.ClickException(f"cluster {cluster} is not up; the labs should have brought it up")
    kube = handle.kube()
    namespace = f"bench-burst-{uuid.uuid4().hex[:5]}"
    try:
        kube.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        console.print(f"burst: {pods} pods at once against a budget in {namespace}")
        return budget_burst(
            kube,
            namespace,
            device_class="hami-core-gpu.project-hami.io",
            limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": "1024", "nvidia.com/gpucores": "1"},
            memory_mib=1024,
            budget_mib=8 * 1024,
            pods=pods,
        )
    finally:
        kube.delete(f"/api/v1/namespaces/{namespace}", missing_ok=True)
        kube.close()


@click.command("pains")
@click.option("--out", default="bench/results", show_default=True, help="Folder for the result.")
@click.option("--pods", default=24, show_default=True, help="Pods in the budget burst.")
@click.option(
    "--profile", default="local", show_default=True,
    help="Cluster profile of the labs (local, node); the result is pains.json for local, pains-<profile>.json else.",
)
def pains(out: str, pods: int, profile: str) -> None:
    """Replay the three pain labs and burst pods against a budget on their cluster; write pains.json.

    \b
    Example:
      dralab bench pains --out /tmp/results
      dralab bench pains --profile node      # the labs against a real kubelet
    """
    from harness.profile import load_profile

    cluster = load_profile(profile).cluster_name_for(INVENTORY)
    labs: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="dralab-bench-pains-") as tmp:
        for lab in LABS:
            console.print(f"replaying {lab} on profile {profile}")
            labs[lab] = _replay(lab, Path(tmp), profile)
    burst = _burst(cluster, pods)
    stall = _failed_prepare(labs["failed-prepare-isolation"]["metrics"])
    pre = labs["preempt-sharers"]
    result = {
        "profile": profile,
        "quick": False,
        "cluster": cluster,
        "budget_burst": burst,
        "failed_prepare": stall,
        "preemption": {
            # The lab passes only if the preemptor stayed Pending and no sharer was evicted or nominated.
            "kube_scheduler_preempted": False if pre["status"] == "passed" else None,
            "scheduler_reasons": pre["scheduler_reasons"],
            **pre["metrics"],
        },
        "budgets": labs["team-budgets"]["metrics"],
        "labs": labs,
        "baseline": {"running_seconds": stall["baseline_running_seconds"]},
    }
    path = write_result(out, "pains" if profile == "local" else f"pains-{profile}", result)
    extra = result["failed_prepare"]["extra_delay_seconds"]
    console.print(
        f"burst: {burst['admitted']}/{pods} admitted (expected {burst['expected_admitted']}), overshoot "
        f"{burst['overshoot_bytes']} bytes; failed-prepare neighbours +{extra}s over the baseline"
    )
    click.echo(str(path))
