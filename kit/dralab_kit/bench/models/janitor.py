"""``janitor.json``: CPU of one janitor pass, incremental against full, per cache size."""

from __future__ import annotations

from pydantic import Field

from dralab_kit.bench.models.base import BenchResult, Model, Num


class JanitorSize(Model):
    """Milliseconds of one pass at ``claims`` cached claims."""

    claims: int | None = None
    incremental: Num | None = None
    full: Num | None = None
    plan: Num | None = None


class JanitorResult(BenchResult):
    sizes: list[JanitorSize] = Field(default_factory=list)
