"""The report's section and verdicts for ``vcore.json``: cost per allocation and SM throttle accuracy."""

from __future__ import annotations

from dralab_kit.bench.common import fmt
from dralab_kit.bench.models.vcore import OverheadVerdict, VcoreResult
from dralab_kit.bench.sections.format import table, verdict_text

TITLE = "vcore: cost per allocation and SM throttle accuracy"


def verdicts(res: VcoreResult) -> list[list[str]]:
    """One process's CPU overhead, the contended wall overhead and the throttle's accuracy."""
    single = res.verdicts.single_process_cpu_overhead or OverheadVerdict(  # results before the verdicts block
        ns_per_pair=res.single_process.best_overhead_cpu_ns_per_pair, target_ns=res.target_overhead_ns_per_pair,
        met=res.meets_target)
    rows = [["vcore", "overhead per alloc/free pair, 1 process, CPU time", fmt(single.ns_per_pair, " ns"),
             f"<= {fmt(single.target_ns, ' ns')}", verdict_text(single.met)]]
    cont = res.verdicts.contended_wall_overhead
    if cont:
        rows.append(["vcore", f"overhead per alloc/free pair, {cont.processes} processes on one region, wall clock",
                     fmt(cont.ns_per_pair, " ns"), f"<= {fmt(cont.target_ns, ' ns')}", verdict_text(cont.met)])
    else:
        rows.append(["vcore", "overhead per pair, 8 processes, wall clock", "-", "-", "not judged in this result"])
    thr = res.throttle
    if thr:
        busy = ", ".join(f"{r.limit_pct}→{fmt(r.busy_pct)}" for r in thr.limits)
        rows.append(["vcore", "SM throttle: device busy % at limits 25/50/75 %", busy,
                     f"within {fmt(thr.tolerance_pp)} pp", verdict_text(thr.met)])
    else:
        rows.append(["vcore", "SM throttle accuracy", "-", "-", "not measured in this result"])
    return rows


def section(res: VcoreResult) -> list[str]:
    """ns per pair without and with the library, wall clock and CPU, and the throttle per limit."""
    out = [
        f"ns per `cuMemAlloc_v2`+`cuMemFree_v2` pair on the fake libcuda, {res.iterations_per_process} "
        f"pairs per process, {res.repeats} repeat(s), the program without the library as the baseline",
        "(interleaved in the same run). CPU time is the intrinsic cost; wall clock adds waiting for the region",
        "lock when processes contend.",
        "",
    ]
    rows = [[f"{'?' if s.processes is None else s.processes} process(es)", fmt(s.baseline_ns_per_pair),
             fmt(s.vcore_ns_per_pair), fmt(s.overhead_ns_per_pair), fmt(s.baseline_cpu_ns_per_pair),
             fmt(s.vcore_cpu_ns_per_pair), fmt(s.overhead_cpu_ns_per_pair), fmt(s.best_overhead_cpu_ns_per_pair)]
            for s in (res.single_process, res.contended_8)]
    out += table(["run", "wall ns without", "wall ns with", "wall overhead", "CPU ns without", "CPU ns with",
                  "CPU overhead (median)", "CPU overhead (best)"], rows)
    thr = res.throttle
    if thr:
        out += [
            f"SM throttle: {thr.kernels} kernels of a simulated {thr.kernel_us} µs each, back to "
            f"back, {thr.repeats} repeat(s) per limit (median), the library's shipped window and queue.",
            "",
        ]
        out += table(["limit %", "device busy %", "error (pp)", "samples %", "verdict"],
                     [[r.limit_pct, fmt(r.busy_pct), fmt(r.error_pp), ", ".join(map(str, r.samples_pct)),
                       verdict_text(r.met)] for r in thr.limits])
    return out
