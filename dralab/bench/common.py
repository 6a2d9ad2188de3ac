"""What every benchmark shares: percentiles and the JSON result file (written with its context)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def percentile(values: Sequence[float], pct: float) -> float:
    """The ``pct`` percentile (0..100) by the nearest-rank method; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


def write_result(out_dir: str | Path, name: str, result: dict[str, Any]) -> Path:
    """Write ``<out_dir>/<name>.json`` with the run's context (see :mod:`dralab.bench.results`)."""
    from dralab.bench.results import write_result as write

    return write(out_dir, name, result)
