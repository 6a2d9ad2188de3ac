"""The report's section and verdicts for ``admission.json``: the webhook's latency and throughput.

The repeats' medians and where the CPU went are open shapes (per figure, handler and rate), kept as
the dicts the benchmark wrote in :class:`AdmissionResult`'s ``summary`` and ``handlers``.
"""

from __future__ import annotations

from typing import Any

from dralab_kit.bench.common import fmt as _fmt
from dralab_kit.bench.models.admission import AdmissionResult
from dralab_kit.bench.sections.format import spread_text as _spread_text
from dralab_kit.bench.sections.format import table as _table
from dralab_kit.bench.sections.format import verdict_text

TITLE = "Admission webhook: latency and throughput"


def verdicts(res: AdmissionResult) -> list[list[str]]:
    """Conversion against no-op, create latency, create against direct creates, and CPU per pod."""
    t = res.targets
    rows: list[list[str]] = []
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
    return rows


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


def section(res: AdmissionResult) -> list[str]:
    """Per handler: closed-loop throughput and open-loop latency per rate, then the repeats' medians."""
    out = [
        "The real `dralab webhook serve` over TLS; `noop` (parse and allow) is the baseline for `convert`",
        "(conversion, no API call) and `create` (conversion plus the ResourceClaim created in the apiserver).",
        "Open loop: requests start on a fixed schedule, latency counted from the scheduled start.",
        "",
    ]
    rows = []
    for name, h in res.handlers.items():
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
    rates = res.rates
    header = ["handler", "closed loop req/s", "server CPU ms/req", *[f"{r} req/s p50 / p99 ms" for r in rates]]
    rows = [r + [""] * (len(header) - len(r)) for r in rows]
    out += _table(header, rows)
    out += _admission_repeats(res)
    out += _prefer_vs_single(res)
    api = res.apiserver_create_sequential
    if api.p50_ms is not None:
        out += [
            f"apiserver alone, sequential claim creates: p50 {_fmt(api.p50_ms)} ms, p99 "
            f"{_fmt(api.p99_ms)} ms over {api.requests} requests.",
            "",
        ]
    return out


def _admission_repeats(res: AdmissionResult) -> list[str]:
    """The figures over the repeats: median (min-max) per handler, and where the CPU went."""
    summary = res.summary
    if not summary:
        return []
    out = [f"Over {res.repeats} rounds ({res.server_workers} server workers; `direct` is the same load "
           "generator creating the same claims in the apiserver, the create handler's baseline): median (min-max).", ""]
    rates = [str(r) for r in res.rates]
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
    loops = [h.get("closed_loop") or {} for h in res.handlers.values()]
    if any(loop.get("turns_with") == ["direct", "create"] for loop in loops):
        out += ["The closed loops of `noop` and `convert`, and of `direct` and `create`, take turns of about a second, "
                "so each pair sees the same load from other processes (`noop` and `convert` also on the same "
                "connections). The webhook's CPU per request is read around every turn.", ""]
    elif any(loop.get("shared_connections") for loop in loops):
        out += ["`noop` and `convert` closed loops run on the same connections, taking turns, so both see the same "
                "spread of connections over the server workers and the same load from other processes.", ""]
    out += apiserver_share(summary, rates)
    out += machine_share(summary.get("cpu_during_open_loop") or {}, rates)
    out += closed_loop_cpu(summary.get("closed_loop_cpu") or {})
    return out


def _prefer_vs_single(res: AdmissionResult) -> list[str]:
    """CPU per admission of `prefer-types` pods (3 types, firstAvailable) against one-type pods (older results:
    nothing)."""
    summary = res.summary
    rows = []
    for key, who in (("prefer_vs_single_cpu", "webhook"), ("prefer_vs_single_apiserver_cpu", "apiserver")):
        fig = summary.get(key)
        if fig:
            ratio, extra = fig.get("ratio") or {}, fig.get("extra_ms") or {}
            rows.append([who, f"{_fmt(ratio.get('median'))}{_spread_text([ratio.get('min'), ratio.get('max')])}",
                         f"{_fmt(extra.get('median'))}{_spread_text([extra.get('min'), extra.get('max')])}"])
    if not rows:
        return []
    typed = res.typed_pods
    return [f"`prefer` ({typed.get('prefer')}) against `single` ({typed.get('single')}), both on "
            f"`{typed.get('path')}`, closed loops taking turns: CPU per admission, ratio and extra ms taken inside "
            "each round.", "",
            *_table(["process", "prefer ÷ single", "extra ms per admission"], rows)]


MACHINE_COLUMNS = ("apiserver", "etcd", "bench webhook", "generator")


def machine_share(cpu: dict[str, Any], rates: list[str]) -> list[str]:
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


def closed_loop_cpu(cpu: dict[str, Any]) -> list[str]:
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


def apiserver_share(summary: dict[str, Any], rates: list[str]) -> list[str]:
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


