"""``fuzz.json``: malformed and hostile input against the admission endpoints and the driver."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from dralab_kit.bench.models.base import BenchResult, Model


class FuzzTarget(Model):
    cases: int | None = None
    passed: bool | None = None
    # broken contract -> cases that broke it, and the first such case
    problems: dict[str, int] = Field(default_factory=dict)
    examples: dict[str, Any] = Field(default_factory=dict)


class FuzzBaseline(Model):
    admission_ok: bool | None = None


class FuzzResult(BenchResult):
    targets: dict[str, FuzzTarget] = Field(default_factory=dict)
    baseline: FuzzBaseline | None = None
