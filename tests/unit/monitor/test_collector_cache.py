"""The monitor's collector computes the picture again only after a watch event."""

from __future__ import annotations

from prometheus_client import generate_latest

from dralab.monitor.allocation import Allocation
from dralab.monitor.collector import AllocationCollector, registry_for


class _Watch:
    """What the collector reads of an AllocationWatch: the event count and the picture."""

    def __init__(self) -> None:
        self.version = 0
        self.pictures = 0

    def allocation(self, namespace: str | None = None) -> Allocation:
        self.pictures += 1
        return Allocation()


def test_unchanged_scrapes_answer_the_last_families_and_an_event_recomputes() -> None:
    watch = _Watch()
    registry = registry_for(watch, hami=False)  # type: ignore[arg-type]
    first = generate_latest(registry)
    assert generate_latest(registry) == first and watch.pictures == 1
    watch.version += 1  # an informer event
    assert generate_latest(registry) == first and watch.pictures == 2
    assert generate_latest(registry) == first and watch.pictures == 2


def test_counts_its_computations() -> None:
    watch = _Watch()
    collector = AllocationCollector(watch, hami=True)  # type: ignore[arg-type]
    names = [f.name for f in collector.collect()]
    assert "dralab_device_shares" in names and "hami_gpu_shared_count" in names
    list(collector.collect())
    assert collector.computed == 1
