"""``admission.json``: the webhook's latency and throughput per handler, over repeated rounds."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from dralab_kit.bench.models.base import BenchResult, Model, Num


class SequentialCreates(Model):
    """The apiserver alone creating claims one after another."""

    requests: int | None = None
    p50_ms: Num | None = None
    p99_ms: Num | None = None


class AdmissionResult(BenchResult):
    rates: list[Num | None] = Field(default_factory=list)
    repeats: int | None = None
    server_workers: int | None = None
    # handler -> closed_loop / open_loop figures, or ``skipped``
    handlers: dict[str, dict[str, Any]] = Field(default_factory=dict)
    # medians over the rounds, per figure, handler and rate
    summary: dict[str, Any] = Field(default_factory=dict)
    typed_pods: dict[str, str] = Field(default_factory=dict)
    apiserver_create_sequential: SequentialCreates = Field(default_factory=SequentialCreates)
    # target -> figure, target value and ``met`` (or ``skipped``)
    targets: dict[str, dict[str, Any]] = Field(default_factory=dict)
