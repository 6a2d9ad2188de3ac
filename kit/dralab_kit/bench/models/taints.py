"""``taints.json``: from an unhealthy device to its taint and to pods avoiding it."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from dralab_kit.bench.models.base import BenchResult, Model, Num


class TaintsSummary(Model):
    # figure -> seconds of the first (cold) fault; figure -> {p50, max} over the warm repeats
    cold: dict[str, Num | None] = Field(default_factory=dict)
    warm: dict[str, dict[str, Num | None]] = Field(default_factory=dict)
    avoided: int | None = None
    repeats: int | None = None
    sick_allocations_after_fault: int | None = None
    sick_allocations_after_taint: int | None = None


class TaintsResult(BenchResult):
    kubernetes: str | None = None
    interval_s: Num | None = None
    poll_s: Num | None = None
    driver_health_seconds: Num | None = None
    repeats: list[dict[str, Any]] = Field(default_factory=list)
    summary: TaintsSummary = Field(default_factory=TaintsSummary)
