"""The report's section for ``janitor.json``: one janitor pass, incremental against full."""

from __future__ import annotations

from dralab_kit.bench.common import fmt
from dralab_kit.bench.models.janitor import JanitorResult
from dralab_kit.bench.sections.format import table

TITLE = "The janitor's pass: incremental against full"


def section(res: JanitorResult) -> list[str]:
    """Milliseconds of CPU per pass, per number of cached claims."""
    rows = [[f"{row.claims:,}", fmt(row.incremental, " ms"), fmt(row.full, " ms"), fmt(row.plan, " ms")]
            for row in res.sizes]
    return [
        "CPU of one janitor pass in memory (`dralab bench admission --janitor-pass`): after one pod event the pass",
        "decides the claims that event touches; a full pass (start, relist, every resync) decides all of them;",
        "`plan()` over both caches is what every pass cost before the index (the baseline, same run).",
        "",
        *table(["cached claims", "incremental pass", "full pass", "plan() alone (before)"], rows),
    ]
