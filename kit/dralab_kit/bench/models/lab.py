"""``lab.json``: Lab 20 replayed on the local profile."""

from __future__ import annotations

from pydantic import Field

from dralab_kit.bench.models.base import BenchResult, Model, Num


class Quantiles(Model):
    p50: Num | None = None
    min: Num | None = None
    max: Num | None = None


class LabBaseline(Model):
    cli_startup_seconds: Num | None = None
    first_allocation_seconds: Quantiles = Field(default_factory=Quantiles)


class FirstReplay(Model):
    """The replay that brought the cluster up (a cold start)."""

    wall_seconds: Num | None = None
    metrics: dict[str, Num | None] = Field(default_factory=dict)


class LabTargets(Model):
    replay_wall_seconds_max: Num | None = None
    release_to_reallocate_seconds_max: Num | None = None


class LabResult(BenchResult):
    lab: str | None = None
    runs: int | None = None
    replay_wall_seconds: Quantiles = Field(default_factory=Quantiles)
    release_to_reallocate_seconds: Quantiles = Field(default_factory=Quantiles)
    # absent in results written before the cold first replay was recorded
    release_to_reallocate_worst_seconds: Num | None = None
    baseline: LabBaseline = Field(default_factory=LabBaseline)
    first_replay: FirstReplay | None = None
    bring_up_cold_seconds: Num | None = None
    targets: LabTargets = Field(default_factory=LabTargets)
    meets_targets: bool | None = None
