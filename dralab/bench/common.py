"""What every benchmark shares: the output folder, percentiles and the JSON result file."""

from __future__ import annotations

import json
import math
import platform
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dralab.util import atomic_write


def percentile(values: Sequence[float], pct: float) -> float:
    """The ``pct`` percentile (0..100) by the nearest-rank method; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


def write_result(out_dir: str | Path, name: str, result: dict[str, Any]) -> Path:
    """Write ``<out_dir>/<name>.json`` with the machine and time recorded next to the figures."""
    payload = {
        "benchmark": name,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"cpus": _cpus(), "python": platform.python_version(), "platform": platform.platform()},
        **result,
    }
    path = Path(out_dir) / f"{name}.json"
    atomic_write(path, json.dumps(payload, indent=2, sort_keys=False) + "\n")
    return path


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0))
