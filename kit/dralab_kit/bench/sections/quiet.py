"""The report's section and verdicts for ``fleet-quiet.json``: one pod at a time on filled fleets."""

from __future__ import annotations

from typing import Any

from dralab_kit.bench.common import fmt as _f
from dralab_kit.bench.common import fmt_beside, md_table
from dralab_kit.bench.fleet import phase_row
from dralab_kit.bench.models.quiet import FleetQuietResult
from dralab_kit.bench.quiet import ORDERS, QUIET_AGAIN, component_above_rest, verdict
from dralab_kit.bench.sections.fleet import growths
from dralab_kit.bench.sections.format import verdict_text

TITLE = "Fleet scale, one pod at a time: a lone pod's cost on filled KWOK fleets"


def verdicts(res: FleetQuietResult) -> list[list[str]]:
    """Rows of the report's verdict table."""
    v = verdict(res.sizes)  # recomputed from the raw fields
    large, small = v.get("largest_nodes"), v.get("smallest_nodes")
    limit = v.get("cpu_growth_target")
    target = f"<= {_f(limit)}"
    one = "not judged: one size only, or a figure missing"
    return [
        ["fleet-quiet", f"dralab CPU per lone pod on a filled fleet, counted where spent (the webhook above rest + "
         f"the node's driver's own CPU for Prepare, Unprepare, status), at {large} ÷ at {small} nodes",
         fmt_beside(v.get("pod_work_cpu_growth"), limit), target,
         verdict_text(v.get("meets_pod_work_cpu_growth"), one)],
        ["fleet-quiet", f"... dralab's processes (webhook + driver processes) above rest, {large} ÷ {small} nodes",
         fmt_beside(v.get("cpu_growth_above_rest"), limit), target,
         verdict_text(v.get("meets_cpu_growth_above_rest"), one)],
        ["fleet-quiet", f"... the node driver's own CPU for each lone pod (Prepare, Unprepare, status write), growth "
         f"at {large} ÷ {small} nodes, dralab's pods ÷ the baseline's ({growths(v.get('driver_pod_work_growth'))}: the "
         "same code for either kind's pods, so the baseline's growth is the machine's)",
         fmt_beside(v.get("driver_pod_work_growth_vs_baseline"), limit), target,
         verdict_text(v.get("meets_driver_pod_work_growth_vs_baseline"), one)],
        ["fleet-quiet", f"... the webhook's share alone, above rest, at {large} ÷ {small} nodes",
         fmt_beside(v.get("webhook_cpu_growth"), limit), target, verdict_text(v.get("meets_webhook_cpu_growth"), one)],
        ["fleet-quiet", "leaks after the lone pods and the fill (claims, capacity, prepared)",
         "none" if v.get("no_leaks") else "some", "none", verdict_text(v.get("no_leaks"), "not judged")],
    ]


def section(res: FleetQuietResult, plot: str | None = None) -> list[str]:
    """Per size and kind: a lone pod's latency, dralab's CPU per pod three ways, the control plane's."""
    out = [
        f"Each size is a throw-away `dralab cluster up --fleet NODESx{res.devices_per_node}` with the webhook's "
        f"template lifecycle, filled with {res.fill_per_node} dralab pods per node (half its capacity). On the "
        f"filled fleet, {res.quiet_pods} pods per kind ({res.pod.get('cores')} % cores each) are created one at "
        "a time, each once the one before it runs, and deleted once it runs, in windows of half as many that end "
        "when the window's last claim is unprepared; the kinds take turns (dralab, baseline, then *again* "
        "baseline, dralab), and a kind's figures in the verdicts are the mean of its two windows. Nothing else "
        "runs: this is a pod's cost without the contention of the fleet bench's thousands at once. *Above "
        "rest* takes out each process's CPU at rest on the filled fleet (the lower of a reading before and one "
        "after the lone pods) over the window; the driver's own work is its threads' CPU time "
        "(`dralab_driver_work_cpu_seconds`), which needs no rest taken out. Each lone pod's wait is a LIST and "
        "a watch of its namespace, the bench's own requests, the same for both kinds: they are in the "
        "apiserver's figures.",
        "",
    ]
    rows = []
    for size in res.sizes:
        rest = size.get("rest_cpu_ms_per_s") or {}
        for phase, kinds in ORDERS:
            for kind in kinds:
                r = phase_row(size, phase, kind)
                if r:
                    rows.append(_row(size.get("nodes"), phase, kind, r, rest, res.control_plane))
    header = ["nodes", "window", "kind", "pods", "create→Running p50 / p99 s", "dralab CPU ms/pod, counted where spent",
              "driver's own: Prepare / Unprepare / status ms", "webhook above rest ms",
              "dralab processes above rest ms",
              *(f"{c} above rest ms" for c in res.control_plane), "API requests/pod", "failures"]
    out += md_table(header, rows)
    for size in res.sizes:
        if size.get("rest_cpu_ms_per_s"):
            rest = ", ".join(f"{k} {_f(v)}" for k, v in sorted(size["rest_cpu_ms_per_s"].items()))
            out.append(f"- {size.get('nodes')} nodes, filled, at rest (CPU ms per second): {rest}")
        fill = size.get("fill") or {}
        if fill:
            stuck = (f"; {fill['not_running']} of them bound but never Running (kube-controller-manager's second "
                     "claim from the pod's template: Fleet scale, item 11 of README \"Scale\")"
                     if fill.get("not_running") else "")
            out.append(f"- {size.get('nodes')} nodes: filled with {fill.get('pods')} pods at "
                       f"{_f(fill.get('pods_per_s'))} bound/s (not a figure of this bench){stuck}")
        if size.get("failed"):
            out.append(f"- {size.get('nodes')} nodes **stopped** in {size['failed']}; its leaks were not measured")
    leaks = [f"{s.get('nodes')} nodes: {s.get('leaks')}" for s in res.sizes]
    out += ["", f"Leaks at the end of each size: {'; '.join(leaks) or '-'}.", ""]
    return out


def _row(nodes: Any, phase: str, kind: str, r: dict[str, Any], rest: dict[str, float],
         control_plane: list[str]) -> list[Any]:
    """One window's table row."""
    work = r.get("driver_work_cpu_ms_per_pod") or {}
    return [
        nodes, "again" if phase == QUIET_AGAIN else "first", kind, r.get("pods"),
        f"{_f(r.get('running_p50_s'))} / {_f(r.get('running_p99_s'))}",
        _f(r.get("dralab_work_cpu_ms_per_pod")),
        " / ".join(_f(work.get(k)) for k in ("prepare", "unprepare", "status")),
        _f(component_above_rest(r, "webhook", rest)), _f(r.get("dralab_cpu_ms_per_pod_above_rest")),
        *(_f(component_above_rest(r, c, rest)) for c in control_plane),
        _f((r.get("api_requests_per_pod") or {}).get("total")), r.get("failures"),
    ]
