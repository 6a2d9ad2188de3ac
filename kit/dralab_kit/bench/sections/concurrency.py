"""The report's section and verdicts for ``concurrency.json``: bursts of sharing pods on one node.

The judged rounds, the per-phase breakdown and the CPU per pod are open shapes (per kind, phase and
component), kept as the dicts the benchmark wrote in :class:`ConcurrencyResult`.
"""

from __future__ import annotations

from typing import Any

from dralab_kit.bench.common import fmt as _fmt
from dralab_kit.bench.models.concurrency import Bursts, ConcurrencyResult
from dralab_kit.bench.sections.format import table as _table
from dralab_kit.bench.sections.format import verdict_text

TITLE = "Concurrency: bursts of sharing pods on one node"


def verdicts(res: ConcurrencyResult) -> list[list[str]]:
    """DRA against plain pods at the judged N, flatness, and the rate at the largest N."""
    rows: list[list[str]] = []
    v = res.verdict
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
    rate_by_n: dict[Any, Any] = dict(zip(res.n, res.pods_per_s or [], strict=False))
    rows.append(
        [
            "concurrency",
            f"DRA pods bound per second at N={v.get('largest_n')}",
            _fmt(rate_by_n.get(v.get("largest_n"))),
            f">= {_fmt(v.get('rate_target_pods_per_s'))}",
            verdict_text(v.get("meets_rate")),
        ]
    )
    return rows


def section(res: ConcurrencyResult, plot: str | None = None) -> list[str]:
    """Per kind of pod: latency and throughput per burst size, the judged ratios, where the time and CPU go."""
    out = [
        "N pods created at once through the webhook and the real kube-scheduler against one KWOK node",
        f"with {res.node.get('devices', '?')} shared fake devices; latency from the create to the "
        'pod\'s binding (watch), throughput = pods bound / burst completion time; "admitted" is the create call',
        "itself (admission, including the webhook creating the claim). Plain pods (no claim) in the same run are",
        "the baseline.",
        "",
    ]

    def table(cols: Bursts, title: str) -> list[str]:
        n = cols.n

        def get(k: str, i: int) -> Any:
            return (getattr(cols, k) or [None] * len(n))[i]

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

    qps = res.scheduler_qps.get("local", ["?", "?"])
    out += table(res, f"DRA sharing pods, scheduler client QPS {qps[0]} / burst {qps[1]}")
    if res.baseline:
        out += table(res.baseline, "Baseline: plain pods (no claim), same run")
    if res.direct:
        out += table(res.direct, "Baseline: DRA pods without dralab (claims created before the burst, "
                                    "no webhook conversion, no janitor), same run")
    v = res.verdict
    if v.get("dra_to_plain_by_n"):
        ratios = v["dra_to_plain_by_n"]
        out += [
            "**DRA pods/s ÷ plain pods/s, same run**",
            "",
            *_table(["N", *ratios], [["ratio", *(_fmt(r) for r in ratios.values())]]),
        ]
    out += _judged_and_phases(res)
    if res.default_qps:
        out += table(res.default_qps, "DRA sharing pods, scheduler at its default client QPS 50 / burst 100")
    if res.first_errors:
        out += [f"First errors: {'; '.join(str(e)[:160] for e in res.first_errors)}", ""]
    if plot:
        out += [f"![concurrency]({plot})", ""]
    return out


def _judged_and_phases(res: ConcurrencyResult) -> list[str]:
    """The judged ratios over alternating repeats, and where a DRA pod's extra time goes, per component."""
    out: list[str] = []
    j = res.judged
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
    b = res.phases.get("breakdown")
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
    out += _cpu_table(res.cpu)
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


