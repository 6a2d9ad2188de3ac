"""The report's section and verdicts for ``fleet.json``: simulated KWOK fleets against a plain DRA baseline."""

from __future__ import annotations

import re
from typing import Any

from dralab_kit.bench.common import fmt as _f
from dralab_kit.bench.common import fmt_beside, md_table
from dralab_kit.bench.fleet import (
    BURST_AGAIN,
    DRALAB_COMPONENTS,
    FILL_AGAIN,
    FIRST_KUBERNETES,
    ORDER,
    kib_per_claim,
    phase_row,
)
from dralab_kit.bench.models.fleet import FleetPods, FleetResult
from dralab_kit.bench.phases import COUNTERS
from dralab_kit.bench.sections.format import verdict_text

TITLE = "Fleet scale: simulated KWOK fleets against a plain DRA baseline"

PHASES = ("fill", "churn", "burst")
ROWS = ("fill", FILL_AGAIN, "churn", "burst", BURST_AGAIN)  # the table's phases: each run again after its first
POD_CREATE = "apiserver: create pod"  # the apiserver's create, admission (the webhook) included
WEBHOOK_CONNECTIONS = COUNTERS["dralab_webhook_connections"]  # the apiserver's new connections to the webhook
DRIVER_HANDSHAKES = COUNTERS["dralab_driver_apiserver_handshakes"]  # the nodes' drivers' new connections
DRIVER_RESUMED = COUNTERS["dralab_driver_apiserver_resumed_handshakes"]  # ... of which resumed a session
SCHEDULER_PARTS = ("scheduler: scheduling attempt", "scheduler: PreFilter", "scheduler: Filter", "scheduler: PreBind")


def from_several_runs(res: FleetResult) -> bool:
    """Whether ``--add`` kept sizes of an earlier run: a size stamped with another commit, or measured
    before this file's run began (its end, ``measured_at``, less its ``duration_s``). Every size of one
    run has its own date, the time it finished."""
    from datetime import datetime, timedelta

    stamps = [m for s in res.sizes if (m := s.get("measured"))]
    if len({m.get("commit") for m in stamps}) > 1:
        return True
    if not (res.measured_at and res.duration_s is not None):
        return False
    began = datetime.fromisoformat(res.measured_at) - timedelta(seconds=res.duration_s)
    return any(datetime.fromisoformat(str(m.get("date"))) < began for m in stamps if m.get("date"))


def verdicts(res: FleetResult) -> list[list[str]]:
    """Rows of the report's verdict table."""
    from dralab_kit.bench.fleet import verdict

    v = verdict(res.sizes)  # recomputed from the raw fields, so old results get new rows
    ratios = v.get("ratio_by_phase") or {}
    large, small = v.get("largest_nodes"), v.get("smallest_nodes")
    apart = {p: why for p, why in (v.get("ratio_not_comparable") or {}).items() if p in ("fill", "burst")}
    unjudged = "not judged" + "".join(f"; {p}: {why}" for p, why in apart.items())
    means = [f"{phase}: the geometric mean of dralab first {_f(orders.get('dralab_first'))} and baseline first "
             f"{_f(orders.get('baseline_first'))}" for phase in ("fill", "burst")
             if None not in (orders := v.get(f"{phase}_ratio_by_order") or {}).values() and orders]
    both = f" ({'; '.join(means)})" if means else ""
    limit = v.get("cpu_growth_target")
    target = f"<= {_f(limit)}"
    return [
        ["fleet", f"dralab ÷ DRA without dralab, pods bound/s, same run, fill / burst at {large} nodes{both}",
         f"{_f(ratios.get('fill'))} / {_f(ratios.get('burst'))}", f">= {_f(v.get('ratio_target'))}",
         verdict_text(v.get("meets_ratio"), unjudged)],
        ["fleet", f"dralab CPU per pod at {large} nodes ÷ at {small} nodes",
         fmt_beside(v.get("cpu_growth"), limit), target,
         verdict_text(v.get("meets_cpu_growth"), "not judged: one size only")],
        ["fleet", f"... less each size's CPU at rest (the work pods cause), at {large} ÷ at {small} nodes",
         fmt_beside(v.get("cpu_growth_above_rest"), limit), target,
         verdict_text(v.get("meets_cpu_growth_above_rest"),
                      "not judged: no rest measured, a rest reading above a phase's, or one size only")],
        ["fleet", f"... counted where it is spent: the webhook above rest + the node's driver's own CPU for the pod "
         f"(Prepare, Unprepare, status write), at {large} ÷ at {small} nodes",
         fmt_beside(v.get("pod_work_cpu_growth"), limit), target,
         verdict_text(v.get("meets_pod_work_cpu_growth"),
                      "not judged: a run before the driver counted its work, or one size only")],
        ["fleet", f"... the node driver's own CPU for each pod (Prepare, Unprepare, status write), growth at {large} "
         f"÷ at {small} nodes, dralab's pods ÷ the baseline's ({growths(v.get('driver_pod_work_growth'))}; the "
         "same code on the same machine: the baseline's growth is the contention of one 2-core machine)",
         fmt_beside(v.get("driver_pod_work_growth_vs_baseline"), limit), target,
         verdict_text(v.get("meets_driver_pod_work_growth_vs_baseline"),
                      "not judged: a run before the driver counted its work, or one size only")],
        ["fleet", f"... the webhook's share alone (admission and janitor), at {large} ÷ at {small} nodes",
         fmt_beside(v.get("webhook_cpu_growth"), limit), target,
         verdict_text(None if v.get("webhook_cpu_growth") is None
                      else v["webhook_cpu_growth"] <= v["cpu_growth_target"], "not judged: one size only")],
        ["fleet", f"churn at {large} nodes: a replacement pod's create to Running, p99 (dralab; {_churn(res.pods)}, "
         "on the half-full fleet)", _f(v.get("churn_p99_s")),
         f"<= {_f(v.get('churn_p99_target_s'))} s", verdict_text(v.get("meets_churn_p99"), "not judged")],
        ["fleet", f"the webhook's memory per claim at {large} nodes, fill, above its rest (the drivers' is in "
         "the section: each holds its own node's claims)",
         f"{_f(v.get('memory_kib_per_claim'))} KiB", f"<= {_f(v.get('memory_kib_per_claim_target'))} KiB",
         verdict_text(v.get("meets_memory_per_claim"), "not judged: no rest memory read (older run)")],
        ["fleet", "leaks after fill, churn and burst (claims, capacity, prepared)",
         "none" if v.get("no_leaks") else "some", "none", verdict_text(v.get("no_leaks"), "not judged")],
    ]


def growths(by_kind: dict[str, float | None] | None) -> str:
    """``dralab 1.5, baseline 1.82`` from a growth per kind."""
    return ", ".join(f"{kind} {_f(g)}" for kind, g in (by_kind or {}).items())


def _templates(res: FleetResult) -> bool:
    """Whether the baseline named a ResourceClaimTemplate (runs since the retries were recorded) or used
    claims the bench made before the clock (earlier runs)."""
    return any("retries" in (r or {}) for s in res.sizes for ph in (s.get("phases") or {}).values()
               for r in ph.values())


def _churn(pods: FleetPods) -> str:
    if pods.churn_pods_per_s is None:  # runs before churn was a steady rate
        return f"{pods.churn_rounds} rounds deleting and creating one pod per node at once"
    return (f"{_f(pods.churn_pods_per_s)} pods replaced a second for {_f(pods.churn_s)} s, the same at every size "
            "(the oldest deleted, its claim released, and a new one created)")


def _lifecycle(res: FleetResult) -> str:
    """How the webhook made the dralab kind's claims, how often the nodes' drivers reconciled and on which
    Kubernetes (rows from before these were recorded ran the claim lifecycle, a 60 s reconcile, v1.35.4)."""
    lifecycles = sorted({s.get("webhook_lifecycle", "claim") for s in res.sizes})
    made = {"claim": "`webhook.lifecycle: claim`: it creates each pod's claim in admission",
            "template": "`webhook.lifecycle: template`: it makes one ResourceClaimTemplate per pod shape and "
                        "kube-controller-manager each claim"}
    reconcile = ", ".join(f"{s.get('nodes')} nodes {_f(s.get('driver_reconcile_s', 60.0))} s" for s in res.sizes)
    versions = ", ".join(sorted({str(s.get("kubernetes", FIRST_KUBERNETES)) for s in res.sizes}))
    return (f" ({'; '.join(made[lc] for lc in lifecycles)}; the nodes' drivers reconcile every: {reconcile}; "
            f"Kubernetes {versions})")


def _scheduler_lines(res: FleetResult) -> list[str]:
    """Per size and fill, each kind's time from the components' own histograms: the scheduler's attempts per
    pod and milliseconds per pod in the attempt and its DRA extension points, and the apiserver's pod create
    (the webhook's admission inside it); runs that scraped them. Latencies summed, not CPU."""
    out = []
    for size in res.sizes:
        for phase in ("fill", FILL_AGAIN):
            parts = []
            for kind in ("dralab", "baseline"):
                spent = phase_row(size, phase, kind).get("spent_per_pod") or {}
                attempt = spent.get(SCHEDULER_PARTS[0]) or {}
                if not attempt:
                    continue
                points = ", ".join(f"{k.split(': ')[1]} {_f((spent.get(k) or {}).get('ms_per_pod'))}"
                                   for k in SCHEDULER_PARTS[1:] if k in spent)
                create = (spent.get(POD_CREATE) or {}).get("ms_per_pod")
                connections = _calls_per_pod(spent, WEBHOOK_CONNECTIONS)
                parts.append(f"{kind} {_f(attempt.get('calls_per_pod'))} attempts, "
                             f"{_f(attempt.get('ms_per_pod'))} ms" + (f" ({points})" if points else "")
                             + (f", pod create {_f(create)} ms" if create is not None else "")
                             + (f" with {_f(connections)} new webhook connections (TLS handshakes)"
                                if connections is not None and kind == "dralab" else ""))
            if parts:
                out.append(f"- {size.get('nodes')} nodes, {phase.replace('_', ' ')}, the components' own histograms "
                           f"per pod (wall time, not CPU): {'; '.join(parts)}")
    return out


def _calls_per_pod(spent: dict[str, Any], counter: str, size: dict[str, Any] | None = None) -> float | None:
    """A counter's count per pod in a phase's ``spent_per_pod``; None where it was not counted.

    Runs before the bench kept a counter that did not move left it out of that phase; where ``size`` is
    given and another of its phases has the counter, the run did count it, so its absence reads 0."""
    got = (spent.get(counter) or {}).get("calls_per_pod")
    if got is None and size is not None and any(
            counter in (phase_row(size, phase, kind).get("spent_per_pod") or {})
            for phase in ROWS for kind in ("dralab", "baseline")):
        return 0.0
    return got


def _driver_work_lines(res: FleetResult) -> list[str]:
    """Per size and phase, dralab's kind: the driver's own CPU per pod by work (its threads' CPU time) and
    what its processes spent above rest besides (runs since the driver counts its work)."""
    out = []
    for size in res.sizes:
        for phase in ROWS:
            r = phase_row(size, phase, "dralab")
            work = r.get("driver_work_cpu_ms_per_pod") or {}
            if not work:
                continue
            parts = ", ".join(f"{k} {_f(v)}" for k, v in sorted(work.items(), key=lambda kv: -kv[1]))
            spent = r.get("spent_per_pod") or {}
            handshakes = _calls_per_pod(spent, DRIVER_HANDSHAKES, size)
            resumed = _calls_per_pod(spent, DRIVER_RESUMED, size)
            out.append(f"- {size.get('nodes')} nodes, {phase.replace('_', ' ')}, dralab: the driver's own CPU per "
                       f"pod by work, ms: {parts}; its processes' other CPU above rest "
                       f"{_f(r.get('driver_unattributed_cpu_ms_per_pod'))}; counted where spent (webhook above "
                       f"rest + Prepare, Unprepare, status) {_f(r.get('dralab_work_cpu_ms_per_pod'))}"
                       + (f"; new apiserver connections (TLS handshakes) per pod {_f(handshakes)}"
                          if handshakes is not None else "")
                       + (f", {_f(resumed)} of them resumed" if handshakes is not None and resumed is not None
                          else ""))
    return out


def sizes_not_measured(res: FleetResult) -> list[int]:
    """Node counts the command asked for (``--sizes``) that have no results: a size that failed or was stopped."""
    command = res.context.command if res.context is not None else ""
    match = re.search(r"--sizes[ =]([\d,]+)", command or "")
    asked = [int(n) for n in match.group(1).split(",") if n] if match else []
    done = {s.get("nodes") for s in res.sizes}
    return [n for n in asked if n not in done]


def _at_rest(res: FleetResult) -> float | None:
    """The rest window of a run that measured one (runs since the node layer was sharded), else None."""
    return next((s["idle_window_s"] for s in res.sizes if s.get("idle_window_s")), None)


def _rest_after(res: FleetResult) -> bool:
    """Whether the run read the rest again after the phases (runs since the fill ran again)."""
    return any(s.get("idle_after_cpu_ms_per_s") for s in res.sizes)


def section(res: FleetResult, plot: str | None = None) -> list[str]:
    """Per size and phase: pods/s of both kinds, latencies, dralab's CPU and memory, API requests per pod."""
    pods = res.pods
    out = [
        f"Each size is a throw-away `dralab cluster up --fleet NODESx{res.devices_per_node}` ("
        + ("the nodes' drivers and kubelet stand-ins hosted 50 nodes to a process" if _at_rest(res) else
           "every node's driver in one process, every node's kubelet stand-in in another")
        + "). *dralab*: HAMi pods through the webhook" + _lifecycle(res) + "; *baseline*: the same pods as DRA pods"
        + (" naming one ResourceClaimTemplate (kube-controller-manager makes each claim, in the clock). "
           if _templates(res) else " with claims the bench made first, before the clock. ")
        + "A create refused with an overload answer (429, 500, 503, 504) is sent again after a backoff, as "
        "a controller would (*retries*); failures are pods never created or never bound. "
        f"Fill: {pods.fill_per_node} pods per node ({pods.fill_pod.get('cores')} % "
        f"cores each); churn: {_churn(pods)}; "
        f"burst: up to {pods.burst_max} pods of {pods.burst_pod.get('cores')} % at once. "
        "dralab CPU = webhook (servers and janitor) + driver; the simulated layer (stand-in, KWOK) is apart."
        + (" *Above rest*: the same less what dralab's processes burn at rest (measured for "
           f"{_at_rest(res)} s before the phases" + (" and again after them, the lower reading per process"
                                                     if _rest_after(res) else "")
           + ") over the phase's window, per pod." if _at_rest(res) else "")
        + (" *Fill again*: the fill once more with the baseline first, so each kind has run first once."
           if any(s.get("phases", {}).get(FILL_AGAIN) for s in res.sizes) else "")
        + (" *Burst again*: the burst once more with dralab first (the burst runs the baseline first)."
           if any(s.get("phases", {}).get(BURST_AGAIN) for s in res.sizes) else ""),
        "",
    ]
    rows = []
    for size in res.sizes:
        for phase in ROWS:
            for kind in ORDER[phase]:
                r = phase_row(size, phase, kind)
                if not r:
                    continue  # a size stopped before this phase (its ``failed`` names where), or older runs
                rows.append([
                    size.get("nodes"), phase.replace("_", " "), kind, r.get("pods"), _f(r.get("pods_per_s")),
                    f"{_f(r.get('running_p50_s'))} / {_f(r.get('running_p99_s'))}",
                    _f(r.get("dralab_cpu_ms_per_pod")), _f(r.get("dralab_cpu_ms_per_pod_above_rest")),
                    _f(r.get("simulated_cpu_ms_per_pod")),
                    _f((r.get("cpu_ms_per_pod") or {}).get("apiserver")),
                    _f(r.get("dralab_rss_mib")), r.get("claims"),
                    _f((r.get("api_requests_per_pod") or {}).get("total")), r.get("retries", "-"),
                    r.get("failures"),
                ])
    header = ["nodes", "phase", "kind", "pods", "bound/s", "create→Running p50 / p99 s", "dralab CPU ms/pod",
              "... above rest", "simulated CPU ms/pod", "apiserver CPU ms/pod", "dralab RSS MiB", "claims",
              "API requests/pod", "retries", "failures"]
    out += md_table(header, rows)
    rows_raw = [r for s in res.sizes for ph in (s.get("phases") or {}).values() for r in ph.values()]
    if any(r.get("failures") and "created" not in r for r in rows_raw):
        out += ["Per-pod CPU and requests of this result are divided by the pods *requested*; in rows with "
                "failures (creates the webhook did not answer in time) they are per created pod only after "
                "multiplying by pods ÷ (pods - failures). Later runs divide by created pods (`created`).", ""]
    for size in res.sizes:
        for field, when in (("idle_cpu_ms_per_s", "before the phases"), ("idle_after_cpu_ms_per_s", "after them")):
            if size.get(field):
                rest = ", ".join(f"{k} {_f(v)}" for k, v in sorted(size[field].items()))
                out.append(f"- {size.get('nodes')} nodes at rest {when}, CPU ms per second: {rest}")
    out += _scheduler_lines(res)
    out += _driver_work_lines(res)
    for size in res.sizes:
        fill = phase_row(size, "fill", "dralab")
        if size.get("idle_rss_mib") and fill.get("claims"):
            per = {c: kib_per_claim(fill.get("rss_mib") or {}, size["idle_rss_mib"], fill["claims"], (c,))
                   for c in DRALAB_COMPONENTS}
            out.append(f"- {size.get('nodes')} nodes, fill, dralab: resident memory per claim above rest, "
                       + ", ".join(f"{c} {_f(v)} KiB" for c, v in per.items()) + f" ({fill['claims']} claims)")
    for size in res.sizes:
        for phase in ROWS:
            for kind in ("dralab", "baseline"):
                r = phase_row(size, phase, kind)
                where = f"- {size.get('nodes')} nodes, {phase.replace('_', ' ')}, {kind}:"
                if r.get("not_running") or r.get("duplicate_claims"):
                    out.append(f"{where} {r.get('not_running', 0)} pod(s) "
                               f"bound but never Running; {r.get('duplicate_claims', 0)} pod(s) owning more than "
                               "one claim (kube-controller-manager's second claim from the pod's template)")
                if r.get("webhook_call_failures"):
                    why = "; ".join(f"{reason} ({n})" for reason, n in (r.get("webhook_call_errors") or {}).items())
                    out.append(f"{where} {r['webhook_call_failures']} admission call(s) to the webhook failed in "
                               "transport (EOF, refused, timed out: the apiserver's count); each create was "
                               "refused and resent" + (f"; the apiserver's log: {why}" if why else ""))
                if r.get("nodes_not_ready_events"):
                    out.append(f"{where} {r['nodes_not_ready_events']} NodeNotReady event(s): simulated nodes "
                               "whose Leases reached kube-controller-manager late, tainted in the phase (the node "
                               "layer starved of CPU; the phase's rates are suspect)")
    counts = [r["webhook_call_failures"] for size in res.sizes for phase in ROWS for kind in ORDER[phase]
              if (r := phase_row(size, phase, kind)) and r.get("webhook_call_failures") is not None]
    if counts and not any(counts):
        out.append(f"- No admission call to the webhook failed in transport in any of the {len(counts)} phase runs "
                   "that read the apiserver's count (EOF, refused, timed out).")
    out.append("")
    stopped = [f"- {s.get('nodes')} nodes **stopped** in {s['failed']}; the phases measured before it are kept, "
               "and its leaks were not measured." for s in res.sizes if s.get("failed")]
    out += [*stopped, ""] if stopped else []
    missing = sizes_not_measured(res)
    if missing:
        out += [f"Sizes the run was asked for but did not finish: {', '.join(map(str, missing))} nodes "
                "(README, \"Scale\", says why).", ""]
    if from_several_runs(res):  # `--add` kept sizes of an earlier run: each says which; ratios stay same-run
        out += ["Sizes measured in separate runs (`dralab bench fleet --add`); dralab and its baseline always "
                "share a run, so the ratios of a size hold, while comparisons across sizes cross runs:", ""]
        out += [f"- {s.get('nodes')} nodes: {s['measured'].get('date')}, commit "
                f"{str(s['measured'].get('commit'))[:7]}{' (dirty tree)' if s['measured'].get('dirty') else ''}"
                for s in res.sizes if s.get("measured")]
        out.append("")
    leaks = [f"{s.get('nodes')} nodes: {s.get('leaks')}" for s in res.sizes]
    out += [f"Leaks at the end of each size: {'; '.join(leaks) or '-'}.", ""]
    for size in res.sizes:
        burst = ((size.get("phases") or {}).get("burst") or {})
        for kind in ("dralab", "baseline"):
            reqs = (burst.get(kind) or {}).get("api_requests_per_pod") or {}
            top = ", ".join(f"{k} {_f(v)}" for k, v in list(reqs.items())[1:9])
            out.append(f"- {size.get('nodes')} nodes, burst, {kind}: apiserver requests per pod: {top or '-'}")
    out.append("")
    if plot:
        out += [f"![fleet]({plot})", ""]
    return out
