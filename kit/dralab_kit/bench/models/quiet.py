"""``fleet-quiet.json``: one pod at a time on filled KWOK fleets of several sizes, dralab and plain DRA."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from dralab_kit.bench.models.base import BenchResult


class FleetQuietResult(BenchResult):
    devices_per_node: int | None = None
    quiet_pods: int | None = None  # pods per kind, one at a time
    fill_per_node: int | None = None
    pod: dict[str, Any] = Field(default_factory=dict)
    control_plane: list[str] = Field(default_factory=list)
    # per size: phases.quiet -> kind -> figures; kept as written, since the verdict is recomputed from them
    sizes: list[dict[str, Any]] = Field(default_factory=list)
    duration_s: float | None = None
