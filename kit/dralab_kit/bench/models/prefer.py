"""``prefer.json``: 3-way firstAvailable claims against single-type claims, bursts taking turns."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from dralab_kit.bench.models.base import BenchResult, Model


class Card(Model):
    devices: int | None = None
    type: str | None = None
    pods: int | None = None


class PreferNode(Model):
    cards: list[Card] = Field(default_factory=list)


class PreferResult(BenchResult):
    n: int | None = None
    repeats: int | None = None
    prefer_types: str | None = None
    single_type: str | None = None
    node: PreferNode = Field(default_factory=PreferNode)
    # kind -> spreads over the rounds (open: the burst summaries of dralab_kit.bench.concurrency)
    judged: dict[str, Any] = Field(default_factory=dict)
    cold: dict[str, dict[str, Any]] = Field(default_factory=dict)
    rounds: list[dict[str, Any]] = Field(default_factory=list)
