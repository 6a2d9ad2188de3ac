"""The report's section for ``prefer.json``: 3-way firstAvailable claims against single-type claims."""

from __future__ import annotations

from typing import Any

from dralab_kit.bench.common import md_table
from dralab_kit.bench.models.prefer import PreferResult

TITLE = "Ordered fallbacks: 3-way firstAvailable claims against single-type claims"


def _g(value: Any) -> str:
    """A figure to 3 significant digits (``-`` for none)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return "-"
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _mid(s: dict[str, Any] | None) -> str:
    """``median (min-max)`` of a spread, or ``-``."""
    if not s or s.get("median") is None:
        return "-"
    return _g(s["median"]) + ("" if s["min"] == s["max"] else f" ({_g(s['min'])}-{_g(s['max'])})")


def section(res: PreferResult) -> list[str]:
    """Per kind: pods/s and latency over the rounds, the cold burst, and the last round's scheduler figures."""
    j = res.judged
    cards = ", ".join(f"{c.devices} {c.type} ({c.pods} pods)" for c in res.node.cards)
    last_round = res.rounds[-1] if res.rounds else {}
    rows = []
    for kind, what in (("prefer", f"prefer-types {res.prefer_types}"),
                       ("single", f"use-gputype {res.single_type} (baseline)")):
        k = j.get(kind) or {}
        cold = res.cold.get(kind) or {}
        last = last_round.get(kind) or {}
        phases = last.get("phases") or {}
        attempt = phases.get("scheduler: scheduling attempt") or {}
        webhook = phases.get("webhook: mutate (incl. claim create)") or {}
        rows.append([kind, what, _mid(k.get("pods_per_s")), _mid(k.get("p50_s")), _mid(k.get("p99_s")),
                     k.get("bursts_with_failures", "-"), _g(cold.get("pods_per_s")),
                     _g(attempt.get("calls_per_pod")), _g(attempt.get("ms_per_pod")), _g(webhook.get("ms_per_call")),
                     _g((last.get("cpu_ms_per_pod") or {}).get("scheduler")),
                     ", ".join(f"{r} {c}" for r, c in (last.get("allocated_as") or {}).items()) or "-"])
    ratio = j.get("prefer_to_single_pods_per_s") or {}
    return [
        f"Bursts of {res.n} pods created at once on one KWOK node ({cards}), real apiserver and scheduler; "
        f"rounds: {res.repeats}, each a burst of each kind taking turns in a fresh namespace. Times are create "
        "to scheduled (bound); a burst with failures (webhook timeouts on a loaded machine) is left out of the "
        "figures. The scheduler's attempts and their time, the webhook's time per admission (their own "
        "histograms) and the scheduler's CPU per pod are from the last round.",
        "",
        *md_table(["kind", "pods", "pods/s", "p50 s", "p99 s", "bursts with failures", "cold pods/s",
                   "scheduler attempts/pod", "attempt ms/pod", "webhook ms/admission", "scheduler CPU ms/pod",
                   "allocated as (last round)"], rows),
        f"firstAvailable pods/s ÷ single-type pods/s, inside each round: {_mid(ratio)} (no target set by the issue).",
        "",
    ]
