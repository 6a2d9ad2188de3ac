"""``faults.json``: outages and churn, each followed by a leak audit."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from dralab_kit.bench.models.base import BenchResult, Model, Num


class Scenario(Model):
    name: str
    passed: bool | None = None
    leaked_claims: int | None = None
    leaked_capacity: int | None = None
    # the scenario's own figures (open: each scenario records different ones)
    detail: dict[str, Any] = Field(default_factory=dict)


class Audit(Model):
    leaked_claims: int | None = None
    leaked_capacity: int | None = None


class FaultsResult(BenchResult):
    claim_grace_period_s: Num | None = None
    scenarios: list[Scenario] = Field(default_factory=list)
    baseline: Audit = Field(default_factory=Audit)
    passed: int | None = None
    duration_s: Num | None = None
