"""What every report section shares: verdict words, table cells, spreads and the context line."""

from __future__ import annotations

from typing import Any

from dralab_kit.bench.common import fmt
from dralab_kit.bench.models.base import BenchResult, Context


def verdict_text(met: Any, not_judged: str = "not judged") -> str:
    """``met`` / ``NOT met``, or why there is no verdict."""
    if met is None:
        return not_judged
    return "met" if met else "NOT met"


def cell(value: Any) -> str:
    """A value as one Markdown table cell (a ``|`` or a line break would split the row)."""
    return str(value).replace("|", "/").replace("\n", " ")


def table(header: list[str], rows: list[list[Any]], align: str = "") -> list[str]:
    """A Markdown table, then a blank line; ``align`` is the separator of every column but the first."""
    sep = [align or "---"] * len(header)
    sep[0] = "---"
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(sep) + "|"]
    out += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return [*out, ""]


def spread_text(pair: Any, unit: str = "") -> str:
    """`` (min-max)`` over a benchmark's repeats, or nothing for a single run."""
    if not isinstance(pair, list | tuple) or len(pair) != 2 or None in pair or pair[0] == pair[1]:
        return ""
    return f" ({fmt(pair[0])}-{fmt(pair[1], unit)})"


def load_text(ctx: Context) -> str:
    """The 1-minute load average at the start and the end of the run."""
    load = ctx.load_average
    start, end = (load.start, load.end) if load else (None, None)
    if not start and not end:
        return "not recorded"

    def first(v: list[Any] | None) -> str:
        return f"{v[0]:.1f}" if v else "?"

    return f"{first(start)} → {first(end)}"


def context_line(res: BenchResult) -> str:
    """One line saying when, where and how a result was measured."""
    ctx = res.run_context()
    commit = ctx.commit
    at = f" at commit `{commit[:10]}`{' (uncommitted changes)' if ctx.dirty else ''}" if commit else ""
    parts = [f"Linux {ctx.kernel}" if ctx.kernel else "", f"Python {ctx.python}" if ctx.python else "", ctx.go or ""]
    extra = ", ".join(p for p in parts if p)
    cores = "?" if ctx.cores is None else ctx.cores
    return (
        f"_Measured {ctx.date or '?'} ({ctx.run} run){at} on {cores} cores, "
        f"load average (1 min) {load_text(ctx)}{'; ' + extra if extra else ''}._"
    )
