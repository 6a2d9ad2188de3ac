"""``vcore.json``: cost per allocation pair with and without the library, and the SM throttle's accuracy."""

from __future__ import annotations

from pydantic import Field

from dralab_kit.bench.models.base import BenchResult, Model, Num


class PairCost(Model):
    """ns per alloc/free pair for ``processes`` processes, without and with vcore, wall clock and CPU."""

    processes: int | None = None
    baseline_ns_per_pair: Num | None = None
    vcore_ns_per_pair: Num | None = None
    overhead_ns_per_pair: Num | None = None
    baseline_cpu_ns_per_pair: Num | None = None
    vcore_cpu_ns_per_pair: Num | None = None
    overhead_cpu_ns_per_pair: Num | None = None
    best_overhead_cpu_ns_per_pair: Num | None = None


class OverheadVerdict(Model):
    processes: int | None = None
    ns_per_pair: Num | None = None
    target_ns: Num | None = None
    met: bool | None = None


class VcoreVerdicts(Model):
    single_process_cpu_overhead: OverheadVerdict | None = None
    contended_wall_overhead: OverheadVerdict | None = None


class ThrottleLimit(Model):
    limit_pct: Num
    busy_pct: Num
    error_pp: Num
    samples_pct: list[Num]
    met: bool


class Throttle(Model):
    kernels: int | None = None
    kernel_us: Num | None = None
    repeats: int | None = None
    tolerance_pp: Num | None = None
    limits: list[ThrottleLimit] = Field(default_factory=list)
    met: bool | None = None


class VcoreResult(BenchResult):
    iterations_per_process: int | None = None
    repeats: int | None = None
    target_overhead_ns_per_pair: Num | None = None
    meets_target: bool | None = None
    verdicts: VcoreVerdicts = Field(default_factory=VcoreVerdicts)
    single_process: PairCost = Field(default_factory=PairCost)
    contended_8: PairCost = Field(default_factory=PairCost)
    throttle: Throttle | None = None
