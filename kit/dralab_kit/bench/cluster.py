"""``dralab bench cluster``: how fast the local cluster comes up and goes down, and what it costs in memory.

Brings up a throw-away cluster of its own name (the developer's cluster is not touched), times
``up`` from an empty state directory to ready, ``up`` of the running cluster (the baseline: the
fixed cost of the command itself), ``down``, and samples the control plane's resident memory
once it is idle. Build times are not re-measured here (a cold build takes minutes): the Go
builder records the duration of every build it really runs in the cache
(``dralab_kit.gobuild.builder.read_build_times``), and this benchmark reports the latest record per
wrapper module with its date, or "not measured" where the cache has none.
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

import click

from dralab_kit.bench import DEFAULT_OUT
from dralab_kit.bench.common import write_result

UP_TARGET_SECONDS = 20.0


def recorded_builds() -> dict[str, object]:
    """The latest build the Go builder recorded for each wrapper module, or "not measured"."""
    from dralab_kit.gobuild.builder import build_times_path, read_build_times

    latest: dict[str, dict[str, object]] = {}
    for record in read_build_times():
        latest[str(record["wrapper"])] = record
    return {
        "source": str(build_times_path()),
        "builds": latest or "not measured: no build recorded in this cache (builds are recorded when they run)",
    }


def _summary(values: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(values), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
        "runs": len(values),
    }


def _sample_memory(name: str, seconds: float) -> dict[str, float]:
    """Mean resident memory (MiB) per control-plane component over ``seconds`` of idling."""
    from dralab_kit.cluster.api import control_plane_rss

    samples: list[dict[str, int]] = []
    deadline = time.monotonic() + seconds
    while True:
        samples.append(control_plane_rss(name))
        if time.monotonic() >= deadline:
            break
        time.sleep(1.0)  # a measurement interval, not a synchronization
    comps = samples[0].keys()
    out = {comp: round(statistics.mean(s[comp] for s in samples) / 2**20, 1) for comp in comps}
    out["total"] = round(sum(out[c] for c in comps), 1)
    return out


@click.command()
@click.option("--out", default=DEFAULT_OUT, show_default=True, help="folder for cluster.json")
@click.option("--quick", is_flag=True, help="one run and a short memory sample")
@click.option("--runs", type=int, default=3, show_default=True, help="up/down cycles (ignored with --quick)")
def cluster(out: str, quick: bool, runs: int) -> None:
    """Time `cluster up` (empty state to ready), `up` of a running cluster, `down`; sample memory.

    \b
    Example:
      dralab bench cluster --quick --out /tmp/results
    """
    from dralab_kit.cluster import build
    from dralab_kit.cluster.api import down, ensure_cluster, list_clusters, status

    console_echo = click.echo
    name = f"bench{os.getpid() % 100000}"
    cycles = 1 if quick else max(1, runs)
    others = [c for c in list_clusters() if c != name]

    started = time.monotonic()
    build.build(progress=False)
    build_check = time.monotonic() - started

    ups: list[float] = []
    reuses: list[float] = []
    downs: list[float] = []
    memory: dict[str, float] = {}
    components: dict[str, float] = {}
    try:
        for cycle in range(cycles):
            t0 = time.monotonic()
            ensure_cluster(name)
            ups.append(time.monotonic() - t0)
            t1 = time.monotonic()
            ensure_cluster(name)
            reuses.append(time.monotonic() - t1)
            console_echo(f"cycle {cycle + 1}/{cycles}: up {ups[-1]:.1f}s, reuse {reuses[-1]:.2f}s")
            if cycle == cycles - 1:
                memory = _sample_memory(name, 5.0 if quick else 20.0)
                components = {r.name: round(r.rss / 2**20, 1) for r in status(name) if r.state == "running"}
            t2 = time.monotonic()
            down(name, keep_logs=False)
            downs.append(time.monotonic() - t2)
    finally:
        down(name, keep_logs=False)

    result: dict[str, Any] = {
        "recorded_builds": recorded_builds(),
        "build_check_s": round(build_check, 3),
        "up_s": _summary(ups),
        "up_target_s": UP_TARGET_SECONDS,
        "up_within_target": statistics.median(ups) <= UP_TARGET_SECONDS,
        "down_s": _summary(downs),
        "control_plane_rss_mib": memory,
        "all_components_rss_mib": components,
        "baseline": {"what": "up of the already running cluster (fixed cost of the command)", **_summary(reuses)},
        "reference": {"kind_create_cluster_s": "30-60 (published figures, not measured here)"},
        "other_clusters_running": others,
    }
    path = write_result(out, "cluster", result)
    console_echo(
        f"up {result['up_s']['median']}s (target {UP_TARGET_SECONDS}s), reuse {result['baseline']['median']}s, "
        f"down {result['down_s']['median']}s, control plane {memory.get('total')} MiB -> {path}"
    )
