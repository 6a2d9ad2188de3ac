"""``concurrency.json``: bursts of N sharing pods on one node, against plain pods in the same run."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from dralab_kit.bench.models.base import BenchResult, Model, Num


class Bursts(Model):
    """One column per figure, one entry per burst size ``n`` (None where a burst had no such figure)."""

    n: list[int] = Field(default_factory=list)
    p50_s: list[Num | None] | None = None
    p99_s: list[Num | None] | None = None
    admitted_p50_s: list[Num | None] | None = None
    completion_s: list[Num | None] | None = None
    pods_per_s: list[Num | None] | None = None
    running_p50_s: list[Num | None] | None = None
    failures: list[Num | None] | None = None


class ConcurrencyResult(BenchResult, Bursts):
    baseline: Bursts | None = None
    direct: Bursts | None = None
    default_qps: Bursts | None = None
    node: dict[str, Any] = Field(default_factory=dict)
    scheduler_qps: dict[str, list[Any]] = Field(default_factory=dict)
    # the judged verdicts and rounds, per-phase breakdown and CPU per pod (open shapes)
    verdict: dict[str, Any] = Field(default_factory=dict)
    judged: dict[str, Any] | None = None
    phases: dict[str, Any] = Field(default_factory=dict)
    cpu: dict[str, Any] = Field(default_factory=dict)
    first_errors: list[Any] = Field(default_factory=list)
