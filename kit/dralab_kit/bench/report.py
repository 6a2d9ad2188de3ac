"""``dralab bench report``: render bench/REPORT.md from the committed JSON results, and check it.

The report is a pure function of the result files in ``bench/results/``: every figure in it comes
from one of them, every verdict says met or NOT met (or why it was not judged), and every section
says when, where (commit, cores, load average) and how (quick or full run) it was measured. A
benchmark with no result file is reported as not measured. ``--check`` renders without writing
and fails when REPORT.md differs, so a hand edit or a result committed without its report shows.
"""

from __future__ import annotations

import difflib
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from dralab.util import atomic_write
from dralab_kit.bench import DEFAULT_OUT
from dralab_kit.bench.caches import caches_section
from dralab_kit.bench.common import fmt as _fmt
from dralab_kit.bench.fleet_report import fleet_section, fleet_verdicts
from dralab_kit.bench.pains import pains_section
from dralab_kit.bench.prefer import prefer_section
from dralab_kit.bench.results import load_results
from dralab_kit.bench.taints import taints_section

DEFAULT_REPORT = "bench/REPORT.md"
PLOT = "concurrency.png"
FLEET_PLOT = "fleet.png"
# the order of the sections; results of other benchmarks follow, listed with their context
ORDER = (
    "setup", "admission", "driver", "vcore", "cluster", "lab", "concurrency", "prefer", "taints", "fleet", "faults",
    "fuzz", "pains", "pains-node", "node", "install", "janitor", "caches",
)  # fmt: skip

Section = Callable[[dict[str, Any]], list[str]]


# formatting ----------------------------------------------------------------------------------

def verdict_text(met: Any, not_judged: str = "not judged") -> str:
    """``met`` / ``NOT met``, or why there is no verdict."""
    if met is None:
        return not_judged
    return "met" if met else "NOT met"


def _cell(value: Any) -> str:
    return str(value).replace("|", "/").replace("\n", " ")


def _ctx(res: dict[str, Any]) -> dict[str, Any]:
    """The run context, also for results written before contexts existed."""
    ctx = dict(res.get("context") or {})
    if not ctx:
        load = res.get("load_average") or {}
        ctx = {
            "date": res.get("measured_at"),
            "cores": (res.get("machine") or {}).get("cpus"),
            "python": (res.get("machine") or {}).get("python"),
            "load_average": {"start": load.get("before"), "end": load.get("after")},
        }
    if "run" not in ctx or ctx.get("run") == "unknown":
        quick = res.get("quick")
        ctx["run"] = "quick" if quick else ("full" if quick is False else "unknown")
    return ctx


def _load(ctx: dict[str, Any]) -> str:
    load = ctx.get("load_average") or {}
    start, end = load.get("start"), load.get("end")
    if not start and not end:
        return "not recorded"
    first = lambda v: f"{v[0]:.1f}" if v else "?"  # noqa: E731
    return f"{first(start)} → {first(end)}"


def context_line(res: dict[str, Any]) -> str:
    """One line saying when, where and how a result was measured."""
    ctx = _ctx(res)
    commit = ctx.get("commit")
    at = f" at commit `{commit[:10]}`{' (uncommitted changes)' if ctx.get('dirty') else ''}" if commit else ""
    parts = [
        f"Linux {ctx['kernel']}" if ctx.get("kernel") else "",
        f"Python {ctx['python']}" if ctx.get("python") else "",
        str(ctx.get("go") or ""),
    ]
    extra = ", ".join(p for p in parts if p)
    return (
        f"_Measured {ctx.get('date') or '?'} ({ctx.get('run')} run){at} on {ctx.get('cores', '?')} cores, "
        f"load average (1 min) {_load(ctx)}{'; ' + extra if extra else ''}._"
    )


def _table(header: list[str], rows: list[list[Any]], align: str = "") -> list[str]:
    sep = [align or "---"] * len(header)
    sep[0] = "---"
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(sep) + "|"]
    out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return [*out, ""]


def _spread_text(pair: Any, unit: str = "") -> str:
    """`` (min-max)`` over a benchmark's repeats, or nothing for a single run."""
    if not isinstance(pair, list | tuple) or len(pair) != 2 or None in pair or pair[0] == pair[1]:
        return ""
    return f" ({_fmt(pair[0])}-{_fmt(pair[1], unit)})"


def _admission_rows(t: dict[str, Any]) -> list[list[str]]:
    """Verdict rows of the admission targets judged against the same run's direct apiserver baseline."""
    rows = []
    every = t.get("create_p99_every_rate")
    if every is not None:
        by_rate = every.get("p99_ms_by_rate") or {}
        rows.append(["admission", "create p99 at every offered rate (median of runs, open loop)",
                     " / ".join(f"{r}: {_fmt(v, ' ms')}" for r, v in by_rate.items()) or "-",
                     f"<= {_fmt(every.get('target_ms'), ' ms')}",
                     verdict_text(every.get("met"), f"not judged: {every.get('skipped', 'no run')}")])
    direct = t.get("create_max_vs_direct")
    if direct is not None:
        rows.append(["admission", "max throughput with claim creation ÷ same claims created directly (same run)",
                     f"{_fmt(direct.get('ratio'))}{_spread_text(direct.get('spread'))} "
                     f"({_fmt(direct.get('create_rps'))} vs {_fmt(direct.get('direct_rps'))} req/s)"
                     if direct.get("ratio") is not None else "-",
                     f">= {_fmt(direct.get('target'))}",
                     verdict_text(direct.get("met"), f"not judged: {direct.get('skipped', 'no run')}")])
    cpu = t.get("server_cpu_per_pod")
    if cpu is not None:
        rows.append(["admission", "webhook CPU per admitted pod with its claim (all processes, janitor included)",
                     _fmt(cpu.get("ms"), " ms") + _spread_text(cpu.get("spread_ms"), " ms"),
                     f"<= {_fmt(cpu.get('target_ms'), ' ms')}",
                     verdict_text(cpu.get("met"), f"not judged: {cpu.get('skipped', 'no run')}")])
    return rows


# verdicts ------------------------------------------------------------------------------------
def verdicts(results: dict[str, dict[str, Any]]) -> list[list[str]]:
    """Rows ``[benchmark, check, figure, target, verdict]`` for every judged target in the results."""
    rows: list[list[str]] = []
    adm = results.get("admission")
    if adm:
        t = adm.get("targets") or {}
        conv = t.get("convert_max_throughput_vs_noop") or {}
        rows.append(
            [
                "admission",
                "conversion throughput ÷ no-op throughput (same server, same run)",
                _fmt(conv.get("ratio")) + _spread_text(conv.get("spread")),
                f">= {_fmt(conv.get('target'))}",
                verdict_text(conv.get("met")),
            ]
        )
        create = t.get("create_p99_at_100_rps") or {}
        rows.append(
            [
                "admission",
                "create p99 at 100 req/s (claim created in the apiserver)",
                _fmt(create.get("p99_ms"), " ms") + _spread_text(create.get("spread_ms"), " ms"),
                f"<= {_fmt(create.get('target_ms'), ' ms')}",
                verdict_text(create.get("met"), f"not judged: {create.get('skipped', 'no run')}"),
            ]
        )
        rows += _admission_rows(t)
    drv = results.get("driver")
    if drv:
        worst = max(((drv.get(k) or {}).get("p99_per_claim_ms") or 0) for k in ("prepare_1_claim", "prepare_16_claims"))
        rows.append(
            [
                "driver",
                "NodePrepareResources p99 per claim (1 and 16 claims a call)",
                _fmt(worst, " ms"),
                f"<= {_fmt(drv.get('target_p99_per_claim_ms'), ' ms')}",
                verdict_text(drv.get("meets_target")),
            ]
        )
    vc = results.get("vcore")
    if vc:
        v = vc.get("verdicts") or {}
        single = v.get("single_process_cpu_overhead") or {
            "ns_per_pair": (vc.get("single_process") or {}).get("best_overhead_cpu_ns_per_pair"),
            "target_ns": vc.get("target_overhead_ns_per_pair"),
            "met": vc.get("meets_target"),
        }
        rows.append(
            [
                "vcore",
                "overhead per alloc/free pair, 1 process, CPU time",
                _fmt(single.get("ns_per_pair"), " ns"),
                f"<= {_fmt(single.get('target_ns'), ' ns')}",
                verdict_text(single.get("met")),
            ]
        )
        cont = v.get("contended_wall_overhead")
        if cont:
            rows.append(
                [
                    "vcore",
                    f"overhead per alloc/free pair, {cont.get('processes')} processes on one region, wall clock",
                    _fmt(cont.get("ns_per_pair"), " ns"),
                    f"<= {_fmt(cont.get('target_ns'), ' ns')}",
                    verdict_text(cont.get("met")),
                ]
            )
        else:
            rows.append(["vcore", "overhead per pair, 8 processes, wall clock", "-", "-", "not judged in this result"])
        thr = vc.get("throttle")
        if thr:
            busy = ", ".join(f"{r['limit_pct']}→{_fmt(r['busy_pct'])}" for r in thr.get("limits") or [])
            rows.append(
                [
                    "vcore",
                    "SM throttle: device busy % at limits 25/50/75 %",
                    busy,
                    f"within {_fmt(thr.get('tolerance_pp'))} pp",
                    verdict_text(thr.get("met")),
                ]
            )
        else:
            rows.append(["vcore", "SM throttle accuracy", "-", "-", "not measured in this result"])
    cl = results.get("cluster")
    if cl:
        rows.append(
            [
                "cluster",
                "`cluster up` from an empty state to ready (median)",
                _fmt((cl.get("up_s") or {}).get("median"), " s"),
                f"<= {_fmt(cl.get('up_target_s'), ' s')}",
                verdict_text(cl.get("up_within_target")),
            ]
        )
    lab = results.get("lab")
    if lab:
        tg = lab.get("targets") or {}
        worst = lab.get("release_to_reallocate_worst_seconds")
        if worst is None:  # results written before the cold first replay was recorded
            worst = (lab.get("release_to_reallocate_seconds") or {}).get("max")
        rows.append(
            [
                "lab",
                "Lab 20 replay wall time (max) / release to reallocation (worst, first replay included)",
                f"{_fmt((lab.get('replay_wall_seconds') or {}).get('max'), ' s')} / "
                f"{_fmt(worst, ' s')}",
                f"<= {_fmt(tg.get('replay_wall_seconds_max'), ' s')} / "
                f"<= {_fmt(tg.get('release_to_reallocate_seconds_max'), ' s')}",
                verdict_text(lab.get("meets_targets")),
            ]
        )
    conc = results.get("concurrency")
    if conc:
        v = conc.get("verdict") or {}
        if "dra_to_plain_target" in v:
            n = v.get("dra_to_plain_judged_at_n")
            rows.append(
                [
                    "concurrency",
                    f"DRA pods/s ÷ plain pods/s, same run, at N={n}",
                    _fmt(v.get("dra_to_plain_at_judged_n")),
                    f">= {_fmt(v.get('dra_to_plain_target'))}",
                    verdict_text(v.get("meets_dra_to_plain"), f"not judged: the run did not reach N={n}"),
                ]
            )
        else:
            rows.append(
                ["concurrency", "DRA pods/s ÷ plain pods/s at N=200", "-", ">= 0.8", "not judged in this result"]
            )
        rows.append(
            [
                "concurrency",
                f"flatness: pods/s at N={v.get('largest_n')} ÷ pods/s at N=10",
                _fmt(v.get("ratio_largest_to_10")),
                f">= {_fmt(v.get('ratio_target'))}",
                verdict_text(v.get("flat")),
            ]
        )
        rows.append(
            [
                "concurrency",
                f"DRA pods bound per second at N={v.get('largest_n')}",
                _fmt(
                    dict(zip(conc.get("n") or [], conc.get("pods_per_s") or [], strict=False)).get(v.get("largest_n"))
                ),
                f">= {_fmt(v.get('rate_target_pods_per_s'))}",
                verdict_text(v.get("meets_rate")),
            ]
        )
    rows += fleet_verdicts(results.get("fleet"))
    faults = results.get("faults")
    if faults:
        for row in faults.get("scenarios") or []:
            rows.append(
                [
                    "faults",
                    f"{row['name']}: no leaked claim or capacity",
                    f"{row.get('leaked_claims')} / {row.get('leaked_capacity')}",
                    "0 / 0",
                    verdict_text(row.get("passed")),
                ]
            )
    fz = results.get("fuzz")
    if fz:
        for name, t in (fz.get("targets") or {}).items():
            broken = sum((t.get("problems") or {}).values())
            rows.append(
                [
                    "fuzz",
                    f"{name}: contract holds for every case",
                    f"{broken} of {t.get('cases')} broke it",
                    "0",
                    verdict_text(t.get("passed")),
                ]
            )
    return rows


# sections ------------------------------------------------------------------------------------
def admission_section(res: dict[str, Any]) -> list[str]:
    out = [
        "The real `dralab webhook serve` over TLS; `noop` (parse and allow) is the baseline for `convert`",
        "(conversion, no API call) and `create` (conversion plus the ResourceClaim created in the apiserver).",
        "Open loop: requests start on a fixed schedule, latency counted from the scheduled start.",
        "",
    ]
    rows = []
    for name, h in (res.get("handlers") or {}).items():
        if h.get("skipped"):
            rows.append([name, "skipped", h["skipped"], "", "", "", ""])
            continue
        closed = h.get("closed_loop") or {}
        rows.append(
            [
                name,
                _fmt(closed.get("throughput_rps")),
                _fmt(closed.get("server_cpu_ms_per_request")),
                *[
                    f"{_fmt(r.get('p50_ms'))} / {_fmt(r.get('p99_ms'))} ({r.get('errors', 0)} errors)"
                    for r in (h.get("open_loop") or [])[:4]
                ],
            ]
        )
    rates = res.get("rates") or []
    header = ["handler", "closed loop req/s", "server CPU ms/req", *[f"{r} req/s p50 / p99 ms" for r in rates]]
    rows = [r + [""] * (len(header) - len(r)) for r in rows]
    out += _table(header, rows)
    out += _admission_repeats(res)
    out += _prefer_vs_single(res)
    api = res.get("apiserver_create_sequential") or {}
    if api.get("p50_ms") is not None:
        out += [
            f"apiserver alone, sequential claim creates: p50 {_fmt(api.get('p50_ms'))} ms, p99 "
            f"{_fmt(api.get('p99_ms'))} ms over {api.get('requests')} requests.",
            "",
        ]
    return out


def _admission_repeats(res: dict[str, Any]) -> list[str]:
    """The figures over the repeats: median (min-max) per handler, and where the CPU went."""
    summary = res.get("summary")
    if not summary:
        return []
    out = [f"Over {res.get('repeats')} rounds ({res.get('server_workers')} server workers; `direct` is the same load "
           "generator creating the same claims in the apiserver, the create handler's baseline): median (min-max).", ""]
    rates = [str(r) for r in res.get("rates") or []]
    rows = []
    for name, mx in (summary.get("max_rps") or {}).items():
        cpu = (summary.get("server_cpu_ms_per_request") or {}).get(name) or {}
        api = (summary.get("apiserver_cpu_ms_per_request") or {}).get(name) or {}
        p99 = (summary.get("p99_ms") or {}).get(name) or {}
        rows.append([name, f"{_fmt(mx.get('median'))}{_spread_text([mx.get('min'), mx.get('max')])}",
                     f"{_fmt(cpu.get('median'))}{_spread_text([cpu.get('min'), cpu.get('max')])}",
                     _fmt(api.get("median")),
                     *[f"{_fmt((p99.get(r) or {}).get('median'))}"
                       f"{_spread_text([(p99.get(r) or {}).get('min'), (p99.get(r) or {}).get('max')])}"
                       for r in rates]])
    out += _table(["handler", "max req/s", "webhook CPU ms/req", "apiserver CPU ms/req",
                   *[f"p99 ms at {r} req/s" for r in rates]], rows)
    out += ["A p99 of `-` means every run at that rate had errors (timeouts count as errors); webhook CPU for "
            "`direct` is what the janitor's watch and the idle server cost per claim created without it.", ""]
    loops = [h.get("closed_loop") or {} for h in (res.get("handlers") or {}).values()]
    if any(loop.get("turns_with") == ["direct", "create"] for loop in loops):
        out += ["The closed loops of `noop` and `convert`, and of `direct` and `create`, take turns of about a second, "
                "so each pair sees the same load from other processes (`noop` and `convert` also on the same "
                "connections). The webhook's CPU per request is read around every turn.", ""]
    elif any(loop.get("shared_connections") for loop in loops):
        out += ["`noop` and `convert` closed loops run on the same connections, taking turns, so both see the same "
                "spread of connections over the server workers and the same load from other processes.", ""]
    out += _apiserver_share(summary, rates)
    out += _machine_share(summary.get("cpu_during_open_loop") or {}, rates)
    out += _closed_loop_cpu(summary.get("closed_loop_cpu") or {})
    return out


def _prefer_vs_single(res: dict[str, Any]) -> list[str]:
    """CPU per admission of `prefer-types` pods (3 types, firstAvailable) against one-type pods (older results:
    nothing)."""
    summary = res.get("summary") or {}
    rows = []
    for key, who in (("prefer_vs_single_cpu", "webhook"), ("prefer_vs_single_apiserver_cpu", "apiserver")):
        fig = summary.get(key)
        if fig:
            ratio, extra = fig.get("ratio") or {}, fig.get("extra_ms") or {}
            rows.append([who, f"{_fmt(ratio.get('median'))}{_spread_text([ratio.get('min'), ratio.get('max')])}",
                         f"{_fmt(extra.get('median'))}{_spread_text([extra.get('min'), extra.get('max')])}"])
    if not rows:
        return []
    typed = res.get("typed_pods") or {}
    return [f"`prefer` ({typed.get('prefer')}) against `single` ({typed.get('single')}), both on "
            f"`{typed.get('path')}`, closed loops taking turns: CPU per admission, ratio and extra ms taken inside "
            "each round.", "",
            *_table(["process", "prefer ÷ single", "extra ms per admission"], rows)]


MACHINE_COLUMNS = ("apiserver", "etcd", "bench webhook", "generator")


def _machine_share(cpu: dict[str, Any], rates: list[str]) -> list[str]:
    """Who used the machine's cores during the create and direct open-loop runs (older results: nothing)."""
    rows = []
    for name in ("create", "direct"):
        for rate in rates:
            got = (cpu.get(name) or {}).get(rate)
            if not got:
                continue
            cores = got.get("cores") or {}
            rest = sum(v for k, v in cores.items() if k not in (*MACHINE_COLUMNS, "other"))
            busy = got.get("machine_busy") or {}
            hook = cores.get("bench webhook")
            rows.append([name, rate, f"{_fmt(busy.get('median'))}{_spread_text([busy.get('min'), busy.get('max')])}",
                         *[_fmt(cores.get(k)) for k in MACHINE_COLUMNS], _fmt(round(rest, 3)),
                         _fmt(cores.get("other")),
                         _fmt(round(hook * 1000 / int(rate), 3)) if hook is not None else "-"])
    if not rows:
        return []
    return ["", "Where the machine's cores went during those runs (from /proc, median over the rounds): the busy "
            "share of all cores, then cores used on average by each process; `rest of cluster` is the "
            "scheduler, controller-manager, KWOK, the kubelet stand-in, the DRA driver and the cluster's own "
            "webhook, `other` the kernel and everything unnamed. The last column is the bench webhook's CPU per "
            "request at that rate (for `direct`: what its janitor's watch costs per claim created without it); "
            "it is higher than the closed loop's, where each wake-up of a worker serves several requests.", "",
            *_table(["run", "req/s", "machine busy", *MACHINE_COLUMNS, "rest of cluster", "other",
                     "bench webhook ms/req"], rows)]


def _closed_loop_cpu(cpu: dict[str, Any]) -> list[str]:
    """CPU per request by process in the create and direct closed loops, and create's extra (older results: nothing)."""
    if not {"create", "direct"} <= set(cpu):
        return []
    per = {name: cpu[name].get("ms_per_request") or {} for name in ("create", "direct")}
    columns = [*MACHINE_COLUMNS, "cluster webhook", "controller-manager", "scheduler", "driver", "other"]
    columns = [c for c in columns if c in per["create"] or c in per["direct"]]
    rows = []
    for name in ("create", "direct"):
        busy = cpu[name].get("machine_busy") or {}
        rest = sum(v for k, v in per[name].items() if k not in columns)
        rows.append([name, f"{_fmt(busy.get('median'))}{_spread_text([busy.get('min'), busy.get('max')])}",
                     *[_fmt(per[name].get(k)) for k in columns], _fmt(round(rest, 3)),
                     _fmt(round(sum(per[name].values()), 3))])
    extra = {k: per["create"].get(k, 0.0) - per["direct"].get(k, 0.0) for k in {*per["create"], *per["direct"]}}
    rest = sum(v for k, v in extra.items() if k not in columns)
    rows.append(["create - direct", "", *[_fmt(round(extra.get(k, 0.0), 3)) for k in columns], _fmt(round(rest, 3)),
                 _fmt(round(sum(extra.values()), 3))])
    return ["", "Where a closed-loop request's CPU went (`create` and `direct` taking turns; ms of CPU per request "
            "by process, median over the rounds). With the machine saturated, maximum throughput is the cores "
            "divided by the total, so the last row splits create's extra cost, the throughput gap, by owner.", "",
            *_table(["closed loop", "machine busy", *columns, "rest", "total"], rows)]


def _apiserver_share(summary: dict[str, Any], rates: list[str]) -> list[str]:
    """The apiserver's own time per claim create in the same open-loop runs (its request histogram), and how
    often its write to etcd took over 25 ms (older results: no etcd column)."""
    mean = summary.get("apiserver_mean_ms") or {}
    over = summary.get("apiserver_share_over_25ms") or {}
    etcd = summary.get("etcd_share_over_25ms") or {}
    if not mean:
        return []

    def median(table: dict[str, Any], name: str, rate: str) -> str:
        return _fmt(((table.get(name) or {}).get(rate) or {}).get("median"))

    rows = [[name, *[f"{median(mean, name, r)} / {median(over, name, r)}"
                     + (f" / {median(etcd, name, r)}" if etcd else "") for r in rates]]
            for name in ("create", "direct")]
    what = "mean ms / share of creates over 25 ms" + (" / share of its etcd writes over 25 ms" if etcd else "")
    return [f"The apiserver's own time per claim create in those runs (its request histogram), median over the "
            f"rounds: {what}.", "", *_table(["run", *[f"at {r} req/s" for r in rates]], rows)]


def driver_section(res: dict[str, Any]) -> list[str]:
    out = [
        f"NodePrepareResources over the real gRPC socket; claims from the {res.get('claim_source', '?')} "
        f"({_cell(res.get('claim_source_note', ''))}). The empty call is the baseline.",
        "",
    ]
    rows = []
    for key, label in (
        ("baseline_empty_prepare", "empty call (baseline)"),
        ("prepare_1_claim", "1 claim"),
        ("prepare_16_claims", "16 claims"),
        ("publish_8_devices", "publish 8 devices"),
    ):
        s = res.get(key) or {}
        rows.append([label, s.get("n"), _fmt(s.get("p50_ms")), _fmt(s.get("p99_ms")), _fmt(s.get("p99_per_claim_ms"))])
    return out + _table(["call", "calls", "p50 ms", "p99 ms", "p99 per claim ms"], rows)


def vcore_section(res: dict[str, Any]) -> list[str]:
    out = [
        f"ns per `cuMemAlloc_v2`+`cuMemFree_v2` pair on the fake libcuda, {res.get('iterations_per_process')} "
        f"pairs per process, {res.get('repeats')} repeat(s), the program without the library as the baseline",
        "(interleaved in the same run). CPU time is the intrinsic cost; wall clock adds waiting for the region",
        "lock when processes contend.",
        "",
    ]
    rows = []
    for key in ("single_process", "contended_8"):
        s = res.get(key) or {}
        rows.append(
            [
                f"{s.get('processes', '?')} process(es)",
                _fmt(s.get("baseline_ns_per_pair")),
                _fmt(s.get("vcore_ns_per_pair")),
                _fmt(s.get("overhead_ns_per_pair")),
                _fmt(s.get("baseline_cpu_ns_per_pair")),
                _fmt(s.get("vcore_cpu_ns_per_pair")),
                _fmt(s.get("overhead_cpu_ns_per_pair")),
                _fmt(s.get("best_overhead_cpu_ns_per_pair")),
            ]
        )
    out += _table(
        [
            "run",
            "wall ns without",
            "wall ns with",
            "wall overhead",
            "CPU ns without",
            "CPU ns with",
            "CPU overhead (median)",
            "CPU overhead (best)",
        ],
        rows,
    )
    thr = res.get("throttle")
    if thr:
        out += [
            f"SM throttle: {thr.get('kernels')} kernels of a simulated {thr.get('kernel_us')} µs each, back to "
            f"back, {thr.get('repeats')} repeat(s) per limit (median), the library's shipped window and queue.",
            "",
        ]
        out += _table(
            ["limit %", "device busy %", "error (pp)", "samples %", "verdict"],
            [
                [
                    r["limit_pct"],
                    _fmt(r["busy_pct"]),
                    _fmt(r["error_pp"]),
                    ", ".join(map(str, r["samples_pct"])),
                    verdict_text(r["met"]),
                ]
                for r in thr.get("limits") or []
            ],
        )
    return out


def cluster_section(res: dict[str, Any]) -> list[str]:
    up, down, base = res.get("up_s") or {}, res.get("down_s") or {}, res.get("baseline") or {}
    out = [
        "A throw-away cluster of the benchmark's own; `up` of the running cluster is the baseline (the fixed",
        "cost of the command).",
        "",
    ]
    out += _table(
        ["measure", "median s", "min s", "max s", "runs"],
        [
            [
                "`up`, empty state to ready",
                _fmt(up.get("median")),
                _fmt(up.get("min")),
                _fmt(up.get("max")),
                up.get("runs"),
            ],
            [
                "`up` of the running cluster (baseline)",
                _fmt(base.get("median")),
                _fmt(base.get("min")),
                _fmt(base.get("max")),
                base.get("runs"),
            ],
            ["`down`", _fmt(down.get("median")), _fmt(down.get("min")), _fmt(down.get("max")), down.get("runs")],
            ["`cluster build` when everything is built", _fmt(res.get("build_check_s")), "", "", 1],
        ],
    )
    mem = res.get("control_plane_rss_mib") or {}
    if mem:
        out += [
            "Control plane resident memory at idle (MiB, mean over the sample): "
            + ", ".join(f"{k} {_fmt(v)}" for k, v in mem.items())
            + ".",
            "",
        ]
    builds = (res.get("recorded_builds") or {}).get("builds")
    out += ["**Go builds recorded by the builder** (measured when a build really ran; never a constant):", ""]
    if isinstance(builds, dict) and builds:
        rows = [
            [
                w,
                ", ".join(b.get("binaries") or []),
                _fmt(b.get("seconds"), " s"),
                b.get("finished"),
                b.get("go"),
                ", ".join(f"{m} {v}" for m, v in (b.get("modules") or {}).items()),
                {True: "warm", False: "empty (cold)"}.get(b.get("go_cache_was_present"), "unknown"),
                b.get("cpus"),
            ]
            for w, b in sorted(builds.items())
        ]
        out += _table(
            ["wrapper", "binaries", "build time", "finished", "Go", "modules", "Go build cache", "cores"], rows
        )
    else:
        out += ["Not measured: no build was recorded in the benchmark machine's cache.", ""]
    return out


def lab_section(res: dict[str, Any]) -> list[str]:
    replay, realloc = res.get("replay_wall_seconds") or {}, res.get("release_to_reallocate_seconds") or {}
    first = (res.get("baseline") or {}).get("first_allocation_seconds") or {}
    out = [
        f"`dralab lab run {res.get('lab')}` on the `local` profile, {res.get('runs')} replay(s); the first",
        "allocation (apply to allocated) is the baseline for release to reallocation.",
        "",
    ]
    out += _table(
        ["measure", "p50 s", "min s", "max s"],
        [
            ["replay, wall clock", _fmt(replay.get("p50")), _fmt(replay.get("min")), _fmt(replay.get("max"))],
            ["release to reallocation", _fmt(realloc.get("p50")), _fmt(realloc.get("min")), _fmt(realloc.get("max"))],
            ["first allocation (baseline)", _fmt(first.get("p50")), _fmt(first.get("min")), _fmt(first.get("max"))],
        ],
    )
    cold = res.get("first_replay")
    if cold:
        out += [
            "The first replay, on a cluster that was down (the replay brings it up, as `make lab` does): "
            f"release to reallocation {_fmt((cold.get('metrics') or {}).get('release_to_reallocate_seconds'), ' s')}, "
            f"wall clock {_fmt(cold.get('wall_seconds'), ' s')}.",
            "",
        ]
    out += [
        f"Cold bring-up of the lab's cluster: {_fmt(res.get('bring_up_cold_seconds'), ' s')}; CLI start-up "
        f"{_fmt((res.get('baseline') or {}).get('cli_startup_seconds'), ' s')}.",
        "",
    ]
    return out


def concurrency_section(res: dict[str, Any], plot: str | None = None) -> list[str]:
    out = [
        "N pods created at once through the webhook and the real kube-scheduler against one KWOK node",
        f"with {(res.get('node') or {}).get('devices', '?')} shared fake devices; latency from the create to the "
        'pod\'s binding (watch), throughput = pods bound / burst completion time; "admitted" is the create call',
        "itself (admission, including the webhook creating the claim). Plain pods (no claim) in the same run are",
        "the baseline.",
        "",
    ]

    def table(cols: dict[str, Any], title: str) -> list[str]:
        n = cols.get("n") or []
        get = lambda k, i: (cols.get(k) or [None] * len(n))[i]  # noqa: E731
        rows = [
            [
                x,
                _fmt(get("p50_s", i)),
                _fmt(get("p99_s", i)),
                _fmt(get("admitted_p50_s", i)),
                _fmt(get("completion_s", i)),
                _fmt(get("pods_per_s", i)),
                _fmt(get("running_p50_s", i)),
                _fmt(get("failures", i)),
            ]
            for i, x in enumerate(n)
        ]
        return [
            f"**{title}**",
            "",
            *_table(
                [
                    "N",
                    "p50 (s)",
                    "p99 (s)",
                    "admitted p50 (s)",
                    "completion (s)",
                    "pods/s",
                    "Running p50 (s)",
                    "failures",
                ],
                rows,
                "---:",
            ),
        ]

    qps = (res.get("scheduler_qps") or {}).get("local", ["?", "?"])
    out += table(res, f"DRA sharing pods, scheduler client QPS {qps[0]} / burst {qps[1]}")
    if res.get("baseline"):
        out += table(res["baseline"], "Baseline: plain pods (no claim), same run")
    if res.get("direct"):
        out += table(res["direct"], "Baseline: DRA pods without dralab (claims created before the burst, "
                                    "no webhook conversion, no janitor), same run")
    v = res.get("verdict") or {}
    if v.get("dra_to_plain_by_n"):
        ratios = v["dra_to_plain_by_n"]
        out += [
            "**DRA pods/s ÷ plain pods/s, same run**",
            "",
            *_table(["N", *ratios], [["ratio", *(_fmt(r) for r in ratios.values())]]),
        ]
    out += _judged_and_phases(res)
    if res.get("default_qps"):
        out += table(res["default_qps"], "DRA sharing pods, scheduler at its default client QPS 50 / burst 100")
    if res.get("first_errors"):
        out += [f"First errors: {'; '.join(str(e)[:160] for e in res['first_errors'])}", ""]
    if plot:
        out += [f"![concurrency]({plot})", ""]
    return out


def _judged_and_phases(res: dict[str, Any]) -> list[str]:
    """The judged ratios over alternating repeats, and where a DRA pod's extra time goes, per component."""
    out: list[str] = []
    j = res.get("judged")
    if j:
        rows = [[i + 1, _fmt((r.get("pods_per_s") or {}).get("dra", {}).get(str(j["large_n"]))),
                 _fmt((r.get("pods_per_s") or {}).get("plain", {}).get(str(j["large_n"]))),
                 _fmt(r.get("dra_to_plain")), _fmt(r.get("flatness")), " ".join(map(str, r.get("load_average") or []))]
                for i, r in enumerate(j.get("rounds") or [])]
        out += [f"**Judged: {j['repeats']} rounds, DRA and plain bursts of N={j['small_n']} and N={j['large_n']} "
                "taking turns** (median of the per-round ratios decides)", "",
                *_table(["round", f"DRA pods/s N={j['large_n']}", f"plain pods/s N={j['large_n']}",
                         "DRA ÷ plain", f"flatness N={j['large_n']} ÷ N={j['small_n']}", "load average"], rows)]
        out += _gap_split(j)
    b = (res.get("phases") or {}).get("breakdown")
    if b and (b.get("dra") or b.get("plain")):
        names = sorted(set(b.get("dra") or {}) | set(b.get("plain") or {}))
        rows = [[name, _fmt((b["dra"].get(name) or {}).get("ms_per_pod")),
                 _fmt((b["plain"].get(name) or {}).get("ms_per_pod")),
                 _fmt((b["dra"].get(name) or {}).get("calls_per_pod")),
                 _fmt((b.get("extra_ms_per_dra_pod") or {}).get(name))] for name in names]
        out += [f"**Where the time goes at N={b['n']}**: per-pod milliseconds from the components' own histograms "
                "(deltas over each burst, median over the bursts). Concurrent requests overlap, so these are "
                "work per pod, not wall time.", "",
                *_table(["phase", "DRA ms/pod", "plain ms/pod", "DRA calls/pod", "extra per DRA pod (ms)"], rows)]
        if b.get("direct"):
            out += _direct_phases(b)
    out += _cpu_table(res.get("cpu") or {})
    return out


def _gap_split(j: dict[str, Any]) -> list[str]:
    """The judged rounds' DRA-without-dralab baseline: the gap to plain pods split between the scheduler
    and dralab (rendered only for results that have it)."""
    if "direct_to_plain" not in j:
        return []
    n = j["large_n"]
    rows = []
    for i, r in enumerate(j.get("rounds") or []):
        split = r.get("split") or {}
        rows.append([i + 1, _fmt((r.get("pods_per_s") or {}).get("direct", {}).get(str(n))),
                     _fmt(r.get("direct_to_plain")), _fmt(r.get("dra_to_direct")),
                     _fmt(split.get("gap_ms_per_pod")), _fmt(split.get("scheduler_ms_per_pod")),
                     _fmt(split.get("dralab_ms_per_pod"))])
    med = {k: (j.get(k) or {}).get("median") for k in ("direct_to_plain", "dra_to_direct")}
    split = {k: (v or {}).get("median") for k, v in (j.get("split") or {}).items()}
    rows.append(["median", _fmt((j.get("direct_pods_per_s") or {}).get("median")), _fmt(med["direct_to_plain"]),
                 _fmt(med["dra_to_direct"]), _fmt(split.get("gap_ms_per_pod")),
                 _fmt(split.get("scheduler_ms_per_pod")), _fmt(split.get("dralab_ms_per_pod"))])
    return [f"**The gap split, N={n}, same rounds**: DRA pods without dralab (claims created before the burst, "
            "no webhook conversion, no janitor) against plain pods is the scheduler's and the apiserver's share; "
            "dralab's DRA pods against them is dralab's. Gap = burst time per pod (1000 ÷ pods/s) beyond a plain "
            "pod's; the two shares add up to it.", "",
            *_table(["round", f"no-dralab DRA pods/s N={n}", "no-dralab ÷ plain", "dralab ÷ no-dralab",
                     "gap (ms/pod)", "scheduler's share (ms/pod)", "dralab's share (ms/pod)"], rows)]


def _direct_phases(b: dict[str, Any]) -> list[str]:
    """Per phase, DRA pods without dralab beside dralab's DRA pods (what dralab adds to each)."""
    direct, dra = b.get("direct") or {}, b.get("dra") or {}
    names = sorted(set(direct) | set(dra))
    rows = [[name, _fmt((dra.get(name) or {}).get("ms_per_pod")), _fmt((direct.get(name) or {}).get("ms_per_pod")),
             _fmt((direct.get(name) or {}).get("calls_per_pod")),
             _fmt((b.get("extra_ms_per_direct_pod") or {}).get(name)),
             _fmt((b.get("dralab_ms_per_dra_pod") or {}).get(name))] for name in names]
    return [f"**Same phases, DRA pods without dralab, N={b['n']}**", "",
            *_table(["phase", "DRA ms/pod", "no-dralab DRA ms/pod", "no-dralab calls/pod",
                     "scheduler's extra over plain (ms)", "dralab's extra (ms)"], rows)]


def _cpu_table(cpu: dict[str, Any]) -> list[str]:
    """CPU per pod of each component, per kind of pod (rendered only for results that have it)."""
    by_kind = cpu.get("by_kind") or {}
    if not by_kind:
        return []
    labels = {"dra": "dralab DRA", "direct": "no-dralab DRA", "plain": "plain"}
    kinds = [k for k in ("dra", "direct", "plain") if k in by_kind]
    comps = [*sorted({c for k in kinds for c in by_kind[k].get("burst", {}) if c != "total"}), "total"]
    names = {"kubelet": "kubelet stand-in", "driver": "DRA driver (fake)", "webhook": "webhook (all workers)"}
    rows = [[names.get(comp, comp), *(_fmt(by_kind[k].get(w, {}).get(comp)) for w in ("burst", "with_cleanup")
                                      for k in kinds)] for comp in comps]
    heads = [f"{labels[k]} {w}" for w in ("burst", "with clean-up") for k in kinds]
    return [f"**CPU per pod at N={cpu.get('n')}** (ms, each component's processes from /proc, median over the "
            "judged bursts; 'burst' ends when the last pod is bound (and Running), 'with clean-up' when the pods, "
            "their claims and the namespace are gone)", "",
            *_table(["component", *heads], rows)]


def faults_section(res: dict[str, Any]) -> list[str]:
    out = [
        f"Claim grace period {res.get('claim_grace_period_s')} s. Leaked claims: claims no live pod uses once the",
        "grace period is over. Leaked capacity: devices whose consumed capacity (all allocated claims) differs",
        "from what the claims of live pods hold.",
        "",
    ]
    rows = []
    for row in res.get("scenarios") or []:
        detail = {k: v for k, v in (row.get("detail") or {}).items() if k != "final_audit"}
        rows.append(
            [
                row["name"],
                verdict_text(row.get("passed")),
                row.get("leaked_claims"),
                row.get("leaked_capacity"),
                ", ".join(f"{k} {json.dumps(v)}" for k, v in detail.items()),
            ]
        )
    out += _table(["scenario", "verdict", "leaked claims", "leaked capacity", "figures"], rows)
    base = res.get("baseline") or {}
    total = len(res.get("scenarios") or [])
    out += [
        f"Baseline (idle cluster before the scenarios): {base.get('leaked_claims', '-')} leaked claims, "
        f"{base.get('leaked_capacity', '-')} leaked capacity. {res.get('passed')}/{total} scenarios met the "
        f"contract in {res.get('duration_s')} s.",
        "",
    ]
    return out


def node_section(res: dict[str, Any]) -> list[str]:
    """``dralab bench node``: the real kubelet + containerd node (profile ``node``)."""
    out = [
        f"A real kubelet {res.get('kubelet')} and containerd {res.get('containerd')} on this machine; the benchmark "
        "never patches a pod or calls the driver itself (only the kubelet prepares claims). "
        f"Cold bring-up of its cluster: {_fmt(res.get('bring_up_seconds'), ' s')}.",
        "",
    ]
    rows = []
    for key, label in (("claim", "pod with its own claim"), ("plain", "pod without claim (baseline)")):
        s = res.get(f"{key}_apply_to_running_seconds") or {}
        rows.append([label, s.get("n"), _fmt(s.get("p50")), _fmt(s.get("p99")), _fmt(s.get("max"))])
    out += _table(["apply -> Running, one pod at a time", "pods", "p50 s", "p99 s", "max s"], rows)
    idle, busy = res.get("memory_idle") or {}, res.get("memory_with_pods") or {}
    out += _table(
        ["RSS MiB", "idle", f"with {res.get('pods')} claim pods"],
        [
            ["kubelet", _fmt(idle.get("kubelet_mib")), _fmt(busy.get("kubelet_mib"))],
            ["containerd", _fmt(idle.get("containerd_mib")), _fmt(busy.get("containerd_mib"))],
            [f"shims ({busy.get('shims')})", _fmt(idle.get("shims_mib")), _fmt(busy.get("shims_mib"))],
        ],
    )
    rows = []
    for name, row in (res.get("faults") or {}).items():
        figures = {k: v for k, v in row.items() if k != "ok"}
        rows.append([name, verdict_text(row.get("ok")), ", ".join(f"{k} {json.dumps(v)}" for k, v in figures.items())])
    out += _table(["fault (real kubelet)", "verdict", "figures"], rows)
    out += _reboot_lines((res.get("faults") or {}).get("reboot"), res.get("bring_up_seconds"))
    lab = res.get("lab20") or {}
    if lab:
        out += [
            f"Lab 20 on the node: {lab.get('status')}, replay wall clock {_fmt(lab.get('replay_wall_seconds'), ' s')} "
            f"(target <= {_fmt(lab.get('target_seconds'), ' s')}: {verdict_text(lab.get('within_target'))}); "
            f"steps {_fmt(lab.get('steps_seconds'), ' s')}.",
            "",
        ]
    return out


def _reboot_lines(row: dict[str, Any] | None, bring_up: Any) -> list[str]:
    """The reboot fault in words: how long the pods were gone, beside the cluster's cold bring-up."""
    if not row:
        return []
    return [
        f"Reboot (`dralab cluster reboot`, one more pod and its claim deleted while the node was off): "
        f"power-off to all {row.get('pods')} pods Running again "
        f"{_fmt(row.get('power_off_to_all_pods_running_seconds'), ' s')}, of which the node was off "
        f"{_fmt(row.get('node_off_seconds'), ' s')}; power-on to the node's components healthy "
        f"{_fmt(row.get('power_on_to_node_healthy_seconds'), ' s')} and to the pods Running "
        f"{_fmt(row.get('power_on_to_all_pods_running_seconds'), ' s')} (baseline, same run: the cluster's "
        f"cold bring-up {_fmt(bring_up, ' s')}). Same claims {row.get('same_claims')}/{row.get('pods')}, "
        f"same env and preload: {_fmt(row.get('same_env_and_preload'))}, leaked traces: "
        f"{len(row.get('leaked') or [])} ({verdict_text(row.get('ok'))}).",
        "",
    ]


def fuzz_section(res: dict[str, Any]) -> list[str]:
    out = [
        "Contract: never a 5xx or an unhandled exception, every denial names its field, every patch applies and",
        "leaves no HAMi resource; the driver answers every claim, never fails a call as a whole, and never",
        "writes or removes anything but the claim's own files (an audit-hook sandbox refuses and records it).",
        "",
    ]
    rows = []
    for name, t in (res.get("targets") or {}).items():
        problems = ", ".join(f"{k}: {v}" for k, v in (t.get("problems") or {}).items()) or "none"
        rows.append([name, t.get("cases"), verdict_text(t.get("passed")), problems])
    out += _table(["target", "cases", "verdict", "broken contracts (cases)"], rows)
    examples = [(n, k, e) for n, t in (res.get("targets") or {}).items() for k, e in (t.get("examples") or {}).items()]
    if examples:
        out += ["First example of each broken contract:", ""]
        out += [f"- `{n}` / `{k}`: `{str(e)[:240].replace('`', chr(39))}`" for n, k, e in examples]
        out.append("")
    base = res.get("baseline") or {}
    if base:
        out += [
            f"Baseline: a well-formed Lab 20 pod through the same checks: "
            f"{'passes' if base.get('admission_ok') else 'FAILS'} them.",
            "",
        ]
    return out


def setup_section(res: dict[str, Any]) -> list[str]:
    cold, warm = res.get("cold") or {}, res.get("warm") or {}
    phases = cold.get("phases_s") or {}
    warm_phases = warm.get("phases_s") or {}
    out = [
        "A newcomer's first `make lab`: empty dralab, Go build and module caches, a new virtual environment",
        "and cluster home; then the same `make lab` warm (every cache full) as the baseline, in the same run.",
        "vcore builds into the checkout (`vcore/build`), which the run does not empty: its cold figure is a",
        "fresh clone's only where the checkout had not built it yet. The load average in the context line",
        "says what else ran on the two cores.",
        "",
    ]
    out += _table(["phase (make target)", "cold s", "warm s"],
                  [[k, _fmt(v), _fmt(warm_phases.get(k))] for k, v in phases.items()]
                  + [["total", _fmt(cold.get("total_s")), _fmt(warm.get("total_s"))]])
    builds = cold.get("builds") or []
    if builds:
        out += ["Go builds of the cold run, as the builder recorded them:", ""]
        out += _table(["wrapper", "binaries", "seconds"],
                      [[b.get("wrapper"), ", ".join(b.get("binaries") or []), _fmt(b.get("seconds"))] for b in builds])
    return out


def install_section(res: dict[str, Any]) -> list[str]:
    image, infra, pods = res.get("image") or {}, res.get("infra") or {}, res.get("pods") or {}
    out = [
        "dralab from its image and chart on the real node (`node-chart`; cert-manager as pods, kube-proxy) against",
        "the host-process `node` profile, in one run (`dralab bench install`). Pods in HAMi syntax, one 310P3",
        "share each, applied one at a time, the two clusters taking turns.",
        "",
    ]
    if image:
        venv = "host-process venv MiB (this checkout's, every extra)"
        out += _table(["image build", "cold s", "warm s", "archive MiB", venv],
                      [["dralab image build", _fmt(image.get("cold_s")), _fmt(image.get("warm_s")),
                        _fmt(image.get("archive_mib")), _fmt(image.get("host_process_venv_site_packages_mib"))]])
    out += _table(["dralab infra up --profile node", "seconds"],
                  [["cold (no cluster)", _fmt(infra.get("cold_up_s"))], ["warm (a second up)",
                   _fmt(infra.get("warm_up_s"))], ["destroy", _fmt(infra.get("destroy_s"))]])
    out += _table(["pod apply -> Running", "n", "p50 s", "p99 s", "max s"],
                  [[label, _fmt(s.get("n")), _fmt(s.get("p50")), _fmt(s.get("p99")), _fmt(s.get("max"))]
                   for label, s in pods.items()])
    out += [f"Chart over host processes, p50: {_fmt(res.get('chart_over_host_processes_p50'))}.", ""]
    return out


def janitor_section(res: dict[str, Any]) -> list[str]:
    rows = [[f"{row.get('claims'):,}", _fmt(row.get("incremental"), " ms"), _fmt(row.get("full"), " ms"),
             _fmt(row.get("plan"), " ms")] for row in res.get("sizes") or []]
    return [
        "CPU of one janitor pass in memory (`dralab bench admission --janitor-pass`): after one pod event the pass",
        "decides the claims that event touches; a full pass (start, relist, every resync) decides all of them;",
        "`plan()` over both caches is what every pass cost before the index (the baseline, same run).",
        "",
        *_table(["cached claims", "incremental pass", "full pass", "plan() alone (before)"], rows),
    ]


SECTIONS: dict[str, tuple[str, Section]] = {
    "setup": ("First contact: a cold `make lab`", setup_section),
    "install": ("Installed the way users install it: image, chart, cert-manager", install_section),
    "admission": ("Admission webhook: latency and throughput", admission_section),
    "driver": ("Node driver: NodePrepareResources and slice publication", driver_section),
    "vcore": ("vcore: cost per allocation and SM throttle accuracy", vcore_section),
    "cluster": ("Local cluster: bring-up, tear-down, memory, builds", cluster_section),
    "lab": ("Lab 20 replay on the local profile", lab_section),
    "concurrency": ("Concurrency: bursts of sharing pods on one node", concurrency_section),
    "prefer": ("Ordered fallbacks: 3-way firstAvailable claims against single-type claims", prefer_section),
    "taints": ("Device health: from an unhealthy device to its taint and to pods avoiding it", taints_section),
    "fleet": ("Fleet scale: simulated KWOK fleets against a plain DRA baseline", fleet_section),
    "faults": ("Faults: outages and churn, then a leak audit", faults_section),
    "fuzz": ("Bad input: fuzzing the admission endpoints and the driver's gRPC", fuzz_section),
    "pains": ("What DRA fixes: budgets, preemption of sharers, a failing claim", pains_section),
    "pains-node": ("What DRA fixes, on the node profile (a real kubelet)", pains_section),
    "node": ("The real node: kubelet + containerd (profile node)", node_section),
    "janitor": ("The janitor's pass: incremental against full", janitor_section),
    "caches": ("Watch caches: bytes per cached object, and the monitor's scrape", caches_section),
}


def render(results: dict[str, dict[str, Any]], plot: str | None = None, fleet_plot: str | None = None) -> str:
    """The whole report from the parsed result files (pure: the same files always give the same text)."""
    lines = [
        "# dralab benchmark report",
        "",
        "Rendered by `dralab bench report` from the JSON results in `bench/results/`; do not edit by hand.",
        "`dralab bench report --check` fails when this file differs from what those results render.",
        "Each section says when and where its figures were measured; this machine is shared, so read them",
        "with the load average and the run type (a quick run is the reduced `--quick` size).",
        "",
        "## Verdicts",
        "",
    ]
    rows = verdicts(results)
    if rows:
        lines += _table(["benchmark", "target", "figure", "target value", "verdict"], rows)
    else:
        lines += ["No benchmark result yet.", ""]
    lines += ["## Where and when", ""]
    where = []
    for name in [*ORDER, *sorted(set(results) - set(ORDER))]:
        if name not in results:
            where.append([name, "not measured", "", "", "", "", "", ""])
            continue
        ctx = _ctx(results[name])
        where.append(
            [
                name,
                ctx.get("run"),
                ctx.get("date"),
                (ctx.get("commit") or "-")[:10],
                ctx.get("cores"),
                _load(ctx),
                ctx.get("kernel") or "-",
                f"Python {ctx.get('python') or '?'}, {ctx.get('go') or 'no Go'}",
            ]
        )
    lines += _table(
        ["result", "run", "measured", "commit", "cores", "load avg start → end", "kernel", "toolchain"], where
    )
    for name in ORDER:
        title, section = SECTIONS[name]
        lines += [f"## {title}", ""]
        res = results.get(name)
        if res is None:
            lines += [f"Not measured: run `dralab bench {name}` and commit `bench/results/{name}.json`.", ""]
            continue
        lines += [context_line(res), ""]
        if name in ("concurrency", "fleet"):
            lines += section(res, plot if name == "concurrency" else fleet_plot)  # type: ignore[call-arg]
        else:
            lines += section(res)
    others = sorted(set(results) - set(ORDER))
    if others:
        lines += ["## Other results", ""]
        for name in others:
            lines += [
                f"### {name}",
                "",
                context_line(results[name]),
                "",
                f"Figures in `bench/results/{name}.json` (no section renders them yet).",
                "",
            ]
    return "\n".join(lines).rstrip() + "\n"


def render_files(results_dir: Path, out: Path) -> str:
    """The report text for ``out`` from the results in ``results_dir`` (the plot linked relative to ``out``)."""
    results = load_results(results_dir)
    def link(name: str) -> str | None:
        png = results_dir / name
        return Path(os.path.relpath(png, out.parent)).as_posix() if png.is_file() else None

    return render(results, link(PLOT), link(FLEET_PLOT))


@click.command()
@click.option("--results", "results_dir", default=DEFAULT_OUT, show_default=True, help="folder of JSON results")
@click.option("--out", default=DEFAULT_REPORT, show_default=True, help="the report file to write (or check)")
@click.option(
    "--check", is_flag=True, help="write nothing; exit 1 when the report differs from what the results render"
)
@click.option("--quick", is_flag=True, hidden=True, help="accepted for symmetry with the other benchmarks")
def report(results_dir: str, out: str, check: bool, quick: bool) -> None:
    """Render the benchmark report (Markdown) from the JSON results, or check that it is current.

    \b
    Example:
      dralab bench report
      dralab bench report --check
    """
    folder, target = Path(results_dir), Path(out)
    text = render_files(folder, target)
    if check:
        current = target.read_text() if target.is_file() else ""
        if current == text:
            click.echo(f"{target} is current with the {len(load_results(folder))} result file(s) in {folder}")
            return
        diff = list(difflib.unified_diff(current.splitlines(), text.splitlines(), str(target), "rendered", lineterm=""))
        click.echo("\n".join(diff[:60]) + ("\n..." if len(diff) > 60 else ""), err=True)
        click.echo(f"{target} differs from what {folder} renders: run `dralab bench report` and commit both", err=True)
        sys.exit(1)
    atomic_write(target, text)
    click.echo(f"wrote {target} from {len(load_results(folder))} result file(s) in {folder}")
