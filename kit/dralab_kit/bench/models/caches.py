"""``caches.json``: bytes per cached object (whole against slim) and the monitor's scrape."""

from __future__ import annotations

from pydantic import Field

from dralab_kit.bench.models.base import BenchResult, Model, Num


class ObjectBytes(Model):
    json_bytes: Num | None = None
    whole: Num | None = None
    slim: Num | None = None
    saved: Num = 0


class Scrape(Model):
    """One scrape's thread CPU at ``claims`` claims on ``nodes`` nodes."""

    claims: int
    nodes: int
    picture_ms: Num | None = None
    gauges_ms: Num | None = None
    text_ms: Num | None = None
    scrape_ms: Num
    scrape_us_per_claim: Num
    series: int
    series_without_hami: int = 0
    text_bytes: Num = 0


class CachesResult(BenchResult):
    # objects per cache -> kind -> bytes
    per_object: dict[str, dict[str, ObjectBytes]] = Field(default_factory=dict)
    monitor_scrape: list[Scrape] = Field(default_factory=list)
