"""``dralab bench fleet-quiet``: what one pod costs on a filled fleet when it is the only thing happening.

``dralab bench fleet`` measures fleets under load: thousands of pods at once on one 2-core machine,
where every component's CPU per pod rises with the machine's contention, the baseline's as much as
dralab's (README "Scale"). That cannot tell a cost that grows with the fleet from a machine that is
busier. This bench asks the issue's question ("cost per pod must stay flat as the fleet grows")
without the contention:

1. each size is the fleet bench's throw-away cluster (``dralab cluster up --fleet NODESx8``, the same
   bring-up: :func:`dralab_kit.bench.fleet.measure_size`), filled as the fleet bench fills it (8 dralab
   pods per node, half the capacity), so every cache holds the fleet's objects;
2. its rest is read on the filled fleet;
3. the two kinds take turns, dralab, baseline, baseline, dralab (an A-B-B-A crossover, as the fleet
   bench's fill: whatever favours a window's place after the fill falls on both kinds alike): in each
   window, half of :data:`QUIET_PODS` pods are created one at a time, each once the one before it is
   Running, and each deleted once it runs; the window ends when the last one's claim is unprepared
   (the stand-ins' checkpoints, read as files: waiting asks nothing of the cluster). Each window is a
   row (:meth:`~dralab_kit.bench.fleet.Fleet.measured`, phase :data:`QUIET` for the first pair and
   :data:`QUIET_AGAIN` for the second): every component's CPU per pod, the components' histograms per
   pod (the driver's own CPU by work), create to Running of a pod alone;
4. the rest again, and the rest's lower reading is taken out (as in the fleet bench).

The verdict divides the largest size's figures by the smallest's, each the mean of a kind's two
windows: dralab's CPU per pod counted where it is spent (the webhook above rest + the driver's own
CPU for the pod's Prepare, Unprepare and status write), and the same for the whole of dralab's
processes above rest.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import click

from dralab_kit.bench import DEFAULT_OUT
from dralab_kit.bench.common import parse_sizes, write_result
from dralab_kit.bench.concurrency import Burst, async_client
from dralab_kit.bench.fleet import (
    CPU_GROWTH_TARGET,
    DEVICES_PER_NODE,
    FILL_PER_NODE,
    FILL_POD,
    KINDS,
    SIZES_FULL,
    SIZES_QUICK,
    STALL_S,
    Fleet,
    Runner,
    _batch,
    _create_templates,
    _delete_pods,
    _pods,
    _ratio,
    _timed_clear,
    _wait_released,
    at_most,
    console,
    driver_pod_work,
    measure_size,
    phase_row,
    rest_floor,
    subtract_rest,
    summarize,
)

QUIET, QUIET_AGAIN = "quiet", "quiet_again"  # the phases in a size's ``phases``: dralab first, then baseline first
ORDERS = ((QUIET, KINDS), (QUIET_AGAIN, tuple(reversed(KINDS))))
QUIET_PHASES = tuple(phase for phase, _ in ORDERS)
QUIET_PODS, QUIET_PODS_QUICK = 100, 10  # pods per kind, one at a time, half in each of its two windows
# components whose CPU per pod above rest the verdict reports beside dralab's (whose cost a lone pod is)
CONTROL_PLANE = ("apiserver", "etcd", "scheduler", "controller-manager")
REST = "rest_cpu_ms_per_s"  # a size's field: the filled fleet's rest, the lower of the readings around the lone pods


# ---------------------------------------------------------------- pure


def n_pods(quick: bool) -> int:
    """Lone pods per kind (half in each of its two windows)."""
    return QUIET_PODS_QUICK if quick else QUIET_PODS


def merge(bursts: list[Burst], span_s: float) -> Burst:
    """Single-pod batches as one: their pods' figures together; ``completion_s`` the whole ``span_s``."""
    out = Burst(n=sum(b.n for b in bursts), completion_s=span_s)
    for b in bursts:
        out.latencies += b.latencies
        out.running += b.running
        out.admitted += b.admitted
        out.failures += b.failures
        out.first_error = out.first_error or b.first_error
        out.watch_restarts += b.watch_restarts
        out.retries += b.retries
        out.not_running += b.not_running
    return out


def component_above_rest(row: dict[str, Any], component: str, rest: dict[str, float]) -> float | None:
    """One component's CPU per pod in ``row`` less its rest over the row's window, ms (negative kept: a
    lone pod's share can be below what the rest reading's noise takes out, and hiding it would bias)."""
    spent = (row.get("cpu_ms_per_pod") or {}).get(component)
    pods = row.get("created") or 0
    if spent is None or component not in rest or not pods:
        return None
    return round(spent - rest[component] * (row.get("window_s") or 0.0) / pods, 3)


def phases_of(size: dict[str, Any]) -> list[str]:
    """The lone-pod phases a size has (a stopped size may lack the second)."""
    return [p for p in QUIET_PHASES if phase_row(size, p, "dralab") and phase_row(size, p, "baseline")]


def mean(values: list[float | None]) -> float | None:
    """The mean of figures all measured; None where one is missing (a mean of what is left would favour it)."""
    if not values or any(v is None for v in values):
        return None
    return round(sum(v for v in values if v is not None) / len(values), 3)


def kind_figure(size: dict[str, Any], kind: str, field: str, phases: list[str]) -> float | None:
    """A kind's figure over its lone-pod windows in ``phases`` (the mean of the windows' per-pod figures:
    each window has as many pods)."""
    return mean([phase_row(size, p, kind).get(field) for p in phases])


def kind_above_rest(size: dict[str, Any], kind: str, component: str, phases: list[str]) -> float | None:
    """A component's CPU per lone pod of ``kind`` above the filled fleet's rest, over its windows in ``phases``."""
    return mean([component_above_rest(phase_row(size, p, kind), component, size.get(REST) or {}) for p in phases])


def verdict(sizes: list[dict[str, Any]]) -> dict[str, Any]:
    """Largest size ÷ smallest: dralab's CPU per lone pod counted where spent, dralab's processes above
    rest, the driver's own work per kind; each control-plane component's CPU per pod beside them. Each
    figure is the mean of a kind's windows (both orders where both ran)."""
    measured = sorted((s for s in sizes if phases_of(s)), key=lambda s: int(s["nodes"]))
    if not measured:
        return {}
    small, large = measured[0], measured[-1]
    two = large is not small
    same = [p for p in QUIET_PHASES if p in phases_of(small) and p in phases_of(large)]

    def growth(a: float | None, b: float | None) -> float | None:
        return _ratio(a, b) if two and a is not None and b is not None and a > 0 and b > 0 else None

    work, above = (growth(kind_figure(large, "dralab", f, same), kind_figure(small, "dralab", f, same))
                   for f in ("dralab_work_cpu_ms_per_pod", "dralab_cpu_ms_per_pod_above_rest"))
    driver = {k: growth(driver_pod_work(large, same, k), driver_pod_work(small, same, k)) for k in KINDS}
    per_pod = {str(s["nodes"]): {k: {c: kind_above_rest(s, k, c, phases_of(s))
                                     for c in (*CONTROL_PLANE, "webhook", "driver")} for k in KINDS}
               for s in measured}
    driver_vs_baseline = _ratio(driver["dralab"], driver["baseline"])
    webhook = growth(*(kind_above_rest(s, "dralab", "webhook", same) for s in (large, small)))
    leaks = [s.get("leaks") for s in measured]
    no_leaks = None if any(lk is None for lk in leaks) else all(not any(lk.values()) for lk in leaks if lk)
    return {
        "largest_nodes": large["nodes"], "smallest_nodes": small["nodes"], "phases_compared": same,
        "cpu_growth_target": CPU_GROWTH_TARGET,
        "pod_work_cpu_growth": work,
        "meets_pod_work_cpu_growth": at_most(work, CPU_GROWTH_TARGET),
        "cpu_growth_above_rest": above,
        "meets_cpu_growth_above_rest": at_most(above, CPU_GROWTH_TARGET),
        # the same code does the same Prepare, Unprepare and status write for the baseline's pods: their growth is
        # the machine's (the filled fleet's rest, busier with size), dralab's over it is what dralab's pods add
        "driver_pod_work_growth": driver,
        "driver_pod_work_growth_vs_baseline": driver_vs_baseline,
        "meets_driver_pod_work_growth_vs_baseline": at_most(driver_vs_baseline, CPU_GROWTH_TARGET),
        "webhook_cpu_growth": webhook,
        "meets_webhook_cpu_growth": at_most(webhook, CPU_GROWTH_TARGET),
        "above_rest_ms_per_pod": per_pod,
        "no_leaks": no_leaks,
    }


# ---------------------------------------------------------------- the fleet


async def one_at_a_time(fleet: Fleet, runner: Runner, ns: str, kind: str, n: int) -> Burst:
    """``n`` pods of ``kind``, each created once the one before is Running and deleted once it runs; done
    when every one's claim is unprepared (the prepared count back where it started)."""
    pods, _ = _pods(kind, ns, "q", n, FILL_POD)  # the baseline's template is made before the clock
    prepared = fleet.prepared()
    started = time.monotonic()
    bursts = []
    for pod in pods:
        bursts.append(await runner.run(ns, [pod], wait_running=True))
        await _delete_pods(runner, ns, [pod["metadata"]["name"]])
    deadline = started + fleet.timeout
    while fleet.prepared() > prepared:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{kind}: the lone pods' claims were still prepared after {fleet.timeout:.0f}s")
        await asyncio.sleep(0.2)  # the stand-ins' checkpoint files, polled: nothing in the cluster to watch
    return merge(bursts, time.monotonic() - started)


async def run_quiet(handle: Any, nodes: int, quick: bool, timeout: float, row: dict[str, Any]) -> None:
    """Fill, rest, each kind's lone pods, rest again, clear, leaks: into ``row`` (``row["step"]`` names the
    step running, so the caller keeps what was measured when one fails)."""
    fleet = Fleet(handle, nodes, timeout)
    phases: dict[str, dict[str, Any]] = {phase: {} for phase in QUIET_PHASES}
    n = n_pods(quick) // 2  # per window: each kind has two
    row.update(nodes=nodes, devices_per_node=DEVICES_PER_NODE, quiet_pods=n_pods(quick), window_pods=n,
               phases=phases, step="fill")
    async with async_client(handle) as client:
        runner = Runner(client, timeout=timeout, retry_refusals=True, stall_s=STALL_S)
        fill_ns = await runner.namespace("fleet-dralab")
        try:
            filled = summarize(await _batch(runner, fill_ns, "dralab", "f", nodes * FILL_PER_NODE, FILL_POD))
            row["fill"] = {k: filled[k] for k in ("pods", "pods_per_s", "failures", "not_running")}
            row["step"] = "at rest, filled"
            row["rest_before_cpu_ms_per_s"] = await fleet.at_rest()
            for phase, kinds in ORDERS:
                for kind in kinds:
                    row["step"] = f"lone pods, {phase}, {kind}"
                    ns = await runner.namespace(f"quiet-{kind}")
                    await _create_templates(runner, ns, _pods(kind, ns, "q", 1, FILL_POD)[1])
                    got = phases[phase][kind] = await fleet.measured(client, n,
                                                                     one_at_a_time(fleet, runner, ns, kind, n))
                    console.print(f"[{nodes} nodes] {phase} {kind}: running p50 {got['running_p50_s']}s "
                                  f"dralab {got['dralab_cpu_ms_per_pod']} ms/pod", markup=False, highlight=False)
                    await _timed_clear(runner, ns, timeout)
            row["step"] = "at rest, filled, after"
            row["rest_after_cpu_ms_per_s"] = await fleet.at_rest()
            row[REST] = rest_floor(row["rest_before_cpu_ms_per_s"], row["rest_after_cpu_ms_per_s"])
            subtract_rest(phases, row[REST])
            row["step"] = "clear and leak check"
            await _timed_clear(runner, fill_ns, timeout)
        except Exception as exc:  # what was measured before the failure is kept, and the failure named
            row["failed"] = f"{row.pop('step')}: {type(exc).__name__}: {str(exc)[:300]}"
            return
        _wait_released(fleet, timeout)
        row["leaks"] = fleet.leaks()
    del row["step"]


@click.command("fleet-quiet")
@click.option("--out", default=DEFAULT_OUT, show_default=True, help="directory for fleet-quiet.json")
@click.option("--quick", is_flag=True, help=f"{SIZES_QUICK} nodes only, {QUIET_PODS_QUICK} pods per kind")
@click.option("--sizes", default=None, metavar="N,N,...", help=f"node counts (default {SIZES_FULL})")
@click.option("--keep", is_flag=True, help="leave each size's cluster running (for debugging)")
@click.option("--timeout", type=float, default=900.0, show_default=True, help="seconds a batch may take")
def fleet_quiet(out: str, quick: bool, sizes: str | None, keep: bool, timeout: float) -> None:
    """One pod at a time on filled fleets: dralab's cost per pod without the machine's contention.

    Each size is a throw-away cluster (`dralab cluster up --fleet NODESx8`) with the webhook's template
    lifecycle, as the committed `dralab bench fleet` figures; never `dralab`.

    \b
    Example:
      dralab bench fleet-quiet --quick --out /tmp/results
      dralab bench fleet-quiet --sizes 50,500
    """
    from dralab.vcore import ensure_built
    from dralab_kit.cluster import build

    build.require_binaries()
    ensure_built()  # the nodes' drivers refuse every Prepare without vcore's library
    chosen = parse_sizes(sizes, "node counts") if sizes else (SIZES_QUICK if quick else SIZES_FULL)
    started = time.monotonic()
    rows: list[dict[str, Any]] = []
    path = Path(out) / "fleet-quiet.json"
    for nodes in chosen:
        row = measure_size(nodes, quick, keep, timeout, "template", run=run_quiet)
        rows.append(row)
        # each size as soon as it is measured: a later one may fail
        path = write_result(out, "fleet-quiet", {
            "quick": quick, "devices_per_node": DEVICES_PER_NODE, "quiet_pods": n_pods(quick),
            "fill_per_node": FILL_PER_NODE, "pod": FILL_POD, "control_plane": list(CONTROL_PLANE),
            "sizes": rows, "verdict": verdict(rows), "duration_s": round(time.monotonic() - started, 1)})
        if row.get("interrupted"):
            break
    v = verdict(rows)
    click.echo(f"dralab CPU per lone pod, {v.get('largest_nodes')} ÷ {v.get('smallest_nodes')} nodes: counted where "
               f"spent {v.get('pod_work_cpu_growth')}, above rest {v.get('cpu_growth_above_rest')} -> {path}")
