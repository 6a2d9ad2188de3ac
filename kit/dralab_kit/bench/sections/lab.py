"""The report's section and verdict for ``lab.json``: Lab 20 replayed on the local profile."""

from __future__ import annotations

from dralab_kit.bench.common import fmt
from dralab_kit.bench.models.lab import LabResult, Quantiles
from dralab_kit.bench.sections.format import table, verdict_text

TITLE = "Lab 20 replay on the local profile"


def verdicts(res: LabResult) -> list[list[str]]:
    """The slowest replay and the worst release to reallocation, the cold first replay included."""
    worst = res.release_to_reallocate_worst_seconds
    if worst is None:  # results written before the cold first replay was recorded
        worst = res.release_to_reallocate_seconds.max
    tg = res.targets
    return [["lab", "Lab 20 replay wall time (max) / release to reallocation (worst, first replay included)",
             f"{fmt(res.replay_wall_seconds.max, ' s')} / {fmt(worst, ' s')}",
             f"<= {fmt(tg.replay_wall_seconds_max, ' s')} / <= {fmt(tg.release_to_reallocate_seconds_max, ' s')}",
             verdict_text(res.meets_targets)]]


def _row(label: str, q: Quantiles) -> list[str]:
    return [label, fmt(q.p50), fmt(q.min), fmt(q.max)]


def section(res: LabResult) -> list[str]:
    """Replay and reallocation times against the first allocation, and the cold first replay."""
    out = [
        f"`dralab lab run {res.lab}` on the `local` profile, {res.runs} replay(s); the first",
        "allocation (apply to allocated) is the baseline for release to reallocation.",
        "",
    ]
    out += table(["measure", "p50 s", "min s", "max s"], [
        _row("replay, wall clock", res.replay_wall_seconds),
        _row("release to reallocation", res.release_to_reallocate_seconds),
        _row("first allocation (baseline)", res.baseline.first_allocation_seconds),
    ])
    cold = res.first_replay
    if cold:
        out += [
            "The first replay, on a cluster that was down (the replay brings it up, as `make lab` does): "
            f"release to reallocation {fmt(cold.metrics.get('release_to_reallocate_seconds'), ' s')}, "
            f"wall clock {fmt(cold.wall_seconds, ' s')}.",
            "",
        ]
    out += [
        f"Cold bring-up of the lab's cluster: {fmt(res.bring_up_cold_seconds, ' s')}; CLI start-up "
        f"{fmt(res.baseline.cli_startup_seconds, ' s')}.",
        "",
    ]
    return out
