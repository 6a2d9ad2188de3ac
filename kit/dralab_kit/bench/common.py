"""What every benchmark shares: percentiles, a figure's formatting, ``--sizes`` and the JSON result file."""

from __future__ import annotations

import math
import os
import signal
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click


def stop_on_terminate() -> None:
    """Take a SIGTERM as Ctrl-C: raise KeyboardInterrupt once, then ignore further SIGTERMs.

    Several benchmarks bring up throw-away clusters (a 500-node fleet is a dozen processes) and take
    them down in ``finally``, and the fleet benches keep the phases measured so far on Ctrl-C. A
    SIGTERM (``timeout``, a CI job's cancel, ``kill``) ended the process without either, leaving every
    component running. The second SIGTERM is ignored so that it cannot cut the clean-up short; SIGKILL
    still stops the process at once.
    """

    def interrupt(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")

    signal.signal(signal.SIGTERM, interrupt)


def percentile(values: Sequence[float], pct: float) -> float:
    """The ``pct`` percentile (0..100) by the nearest-rank method; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


def write_result(out_dir: str | Path, name: str, result: dict[str, Any]) -> Path:
    """Write ``<out_dir>/<name>.json`` with the run's context (see :mod:`dralab_kit.bench.results`)."""
    from dralab_kit.bench.results import write_result as write

    return write(out_dir, name, result)


def fmt(value: Any, unit: str = "") -> str:
    """A figure for a report table: "-" for none, three significant digits below 100, else whole."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3g}{unit}" if abs(value) < 100 else f"{value:.0f}{unit}"
    return f"{value}{unit}"


def fmt_beside(value: Any, target: Any) -> str:
    """A verdict's figure printed beside its target: as :func:`fmt`, with as many more digits as it takes
    to differ from the target's own figure (1.196 or 1.204 against a target of 1.2 would both print "1.2",
    and one of them is not met)."""
    text = fmt(value)
    if not isinstance(value, float) or not isinstance(target, (int, float)) or value == target:
        return text
    shown = fmt(float(target))
    digits = 4
    while text == shown and digits <= 12:
        text, digits = f"{value:.{digits}g}", digits + 1
    return text


def md_table(header: list[str], rows: list[list[Any]]) -> list[str]:
    """A Markdown table for a report section, then a blank line (a ``|`` inside a cell becomes ``/``)."""
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c).replace("|", "/") for c in row) + " |" for row in rows]
    return [*out, ""]


def parse_sizes(text: str, what: str = "sizes") -> tuple[int, ...]:
    """``"200,10"`` -> ``(10, 200)`` for a ``--sizes`` option; anything else is a usage error naming the bad part."""
    try:
        got = tuple(sorted({int(part) for part in text.split(",") if part.strip()}))
    except ValueError:
        raise click.BadParameter(f"{text!r}: expected {what} as integers separated by commas, e.g. 10,200",
                                 param_hint="--sizes") from None
    if not got or got[0] < 1:
        raise click.BadParameter(f"{text!r}: {what} must be 1 or more, e.g. 10,200", param_hint="--sizes")
    return got


def save_figure(fig: Any, path: Path) -> None:
    """Write a matplotlib figure as PNG atomically (a reader never sees half a plot) and close it."""
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, path)
