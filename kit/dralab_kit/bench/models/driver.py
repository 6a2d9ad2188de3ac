"""``driver.json``: NodePrepareResources and slice publication over the driver's gRPC socket."""

from __future__ import annotations

from pydantic import Field

from dralab_kit.bench.models.base import BenchResult, Model, Num


class CallStats(Model):
    """Latency of one kind of call over ``n`` calls."""

    n: int | None = None
    p50_ms: Num | None = None
    p99_ms: Num | None = None
    p99_per_claim_ms: Num | None = None


class DriverResult(BenchResult):
    claim_source: str | None = "?"
    claim_source_note: str | None = ""
    baseline_empty_prepare: CallStats = Field(default_factory=CallStats)
    prepare_1_claim: CallStats = Field(default_factory=CallStats)
    prepare_16_claims: CallStats = Field(default_factory=CallStats)
    publish_8_devices: CallStats = Field(default_factory=CallStats)
    target_p99_per_claim_ms: Num | None = None
    meets_target: bool | None = None
