"""``setup.json``: a cold ``make lab`` against a warm one in the same run."""

from __future__ import annotations

from pydantic import Field

from dralab_kit.bench.models.base import BenchResult, Model, Num


class SetupBuild(Model):
    """One Go build of the cold run, as the builder recorded it."""

    wrapper: str | None = None
    binaries: list[str] = Field(default_factory=list)
    seconds: Num | None = None


class SetupRun(Model):
    """One ``make lab``: seconds per phase (make target) and in all."""

    phases_s: dict[str, Num | None] = Field(default_factory=dict)
    total_s: Num | None = None
    builds: list[SetupBuild] = Field(default_factory=list)


class SetupResult(BenchResult):
    cold: SetupRun = Field(default_factory=SetupRun)
    warm: SetupRun = Field(default_factory=SetupRun)
