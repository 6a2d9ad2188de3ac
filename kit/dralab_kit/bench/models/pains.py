"""``pains.json`` and ``pains-node.json``: what DRA fixes, on the local and the node profile."""

from __future__ import annotations

from pydantic import Field

from dralab_kit.bench.models.base import BenchResult, Model, Num


class BudgetBurst(Model):
    """Pods admitted at once against a ShareBudget."""

    pods: int | None = None
    pod_memory_mib: int | None = None
    budget_mib: int | None = None
    admitted: int | None = None
    expected_admitted: int | None = None
    denied: int | None = None
    overshoot_bytes: int | None = None


class FailedPrepare(Model):
    """How long a failing claim held up its neighbours on the node."""

    extra_delay_seconds: Num | None = None
    extra_delay_median_seconds: Num | None = None
    neighbour_running_seconds: list[Num | None] = Field(default_factory=list)
    baseline_running_seconds: list[Num | None] = Field(default_factory=list)
    recovery_seconds: Num | None = None


class Preemption(Model):
    kube_scheduler_preempted: bool | None = None
    scheduler_reasons: dict[str, str] = Field(default_factory=dict)
    evict_to_running_seconds: Num | None = None
    evict_to_allocated_seconds: Num | None = None


class PainsResult(BenchResult):
    profile: str | None = None
    budget_burst: BudgetBurst = Field(default_factory=BudgetBurst)
    failed_prepare: FailedPrepare = Field(default_factory=FailedPrepare)
    preemption: Preemption = Field(default_factory=Preemption)
