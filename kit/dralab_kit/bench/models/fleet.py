"""``fleet.json``: simulated KWOK fleets of several sizes, dralab against plain DRA."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from dralab_kit.bench.models.base import BenchResult, Model


class FleetPods(Model):
    fill_per_node: int | None = None
    fill_pod: dict[str, Any] = Field(default_factory=dict)
    burst_pod: dict[str, Any] = Field(default_factory=dict)
    burst_max: int | None = None
    churn_rounds: int | None = None  # runs before churn was a steady rate: rounds of one pod per node at once
    churn_pods_per_s: float | None = None
    churn_s: float | None = None


class FleetResult(BenchResult):
    devices_per_node: int | None = None
    pods: FleetPods = Field(default_factory=FleetPods)
    # per size: phases -> kind -> figures; kept as written, since the fleet's verdict is recomputed from them
    sizes: list[dict[str, Any]] = Field(default_factory=list)
    duration_s: float | None = None  # the whole run's length (the sizes measured by this run, not those kept)
