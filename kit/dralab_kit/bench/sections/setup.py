"""The report's section for ``setup.json``: a newcomer's cold ``make lab`` against a warm one."""

from __future__ import annotations

from dralab_kit.bench.common import fmt
from dralab_kit.bench.models.setup import SetupResult
from dralab_kit.bench.sections.format import table

TITLE = "First contact: a cold `make lab`"


def section(res: SetupResult) -> list[str]:
    """Seconds per phase, cold and warm, and the cold run's Go builds."""
    cold, warm = res.cold, res.warm
    out = [
        "A newcomer's first `make lab`: empty dralab, Go build and module caches, a new virtual environment",
        "and cluster home; then the same `make lab` warm (every cache full) as the baseline, in the same run.",
        "vcore builds into the checkout (`vcore/build`), which the run does not empty: its cold figure is a",
        "fresh clone's only where the checkout had not built it yet. The load average in the context line",
        "says what else ran on the two cores.",
        "",
    ]
    out += table(["phase (make target)", "cold s", "warm s"],
                 [[k, fmt(v), fmt(warm.phases_s.get(k))] for k, v in cold.phases_s.items()]
                 + [["total", fmt(cold.total_s), fmt(warm.total_s)]])
    if cold.builds:
        out += ["Go builds of the cold run, as the builder recorded them:", ""]
        out += table(["wrapper", "binaries", "seconds"],
                     [[b.wrapper, ", ".join(b.binaries), fmt(b.seconds)] for b in cold.builds])
    return out
