"""``cluster.json``: the local cluster's bring-up and tear-down, memory, and the Go builds behind it."""

from __future__ import annotations

from pydantic import Field

from dralab_kit.bench.models.base import BenchResult, Model, Num


class RunTimes(Model):
    """Seconds of a command over ``runs`` runs."""

    median: Num | None = None
    min: Num | None = None
    max: Num | None = None
    runs: int | None = None


class RecordedBuild(Model):
    """One Go build as ``dralab_kit.gobuild`` recorded it."""

    binaries: list[str] = Field(default_factory=list)
    seconds: Num | None = None
    finished: str | None = None
    go: str | None = None
    modules: dict[str, str] = Field(default_factory=dict)
    go_cache_was_present: bool | None = None
    cpus: int | None = None


class RecordedBuilds(Model):
    # by wrapper; anything else (an error text) means none was recorded
    builds: dict[str, RecordedBuild] | str | None = None


class ClusterResult(BenchResult):
    up_s: RunTimes = Field(default_factory=RunTimes)
    down_s: RunTimes = Field(default_factory=RunTimes)
    baseline: RunTimes = Field(default_factory=RunTimes)
    up_target_s: Num | None = None
    up_within_target: bool | None = None
    build_check_s: Num | None = None
    control_plane_rss_mib: dict[str, Num | None] = Field(default_factory=dict)
    recorded_builds: RecordedBuilds = Field(default_factory=RecordedBuilds)
