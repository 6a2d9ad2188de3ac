"""The allocation gauges: a Prometheus collector over watched ResourceSlices and ResourceClaims.

The watches (the janitor's :class:`Informer`, a cache fed by a :class:`dralab.kube.ListWatch`) keep
a cache; every scrape computes the gauges from it, so a device, pod or namespace that is gone
disappears from ``/metrics`` at once instead of leaving a stale series behind. Nothing polls the nodes.

Next to the ``dralab_*`` gauges, the same picture is exported under HAMi's metric and label names
(:mod:`dralab.monitor.hami`) unless ``hami=False`` (``dralab monitor --no-hami-metrics``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from dralab.kube import Kube
from dralab.kube.informer import Informer
from dralab.kube.paths import CLAIMS_PATH, SLICES_PATH
from dralab.monitor.allocation import Allocation, compute
from dralab.monitor.hami import hami_families

SLICES = SLICES_PATH
CLAIMS = CLAIMS_PATH
_DEVICE_LABELS = ["node", "driver", "pool", "device"]


def families(alloc: Allocation, hami: bool = True) -> list[GaugeMetricFamily]:
    """Every gauge of one allocation picture (pure: what a scrape returns); ``hami`` adds HAMi's names."""
    def gauge(name: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
        return GaugeMetricFamily(name, doc, labels=labels)

    dev = {
        "mem_alloc": gauge("dralab_device_memory_allocated_bytes", "Device memory allocated to claims", _DEVICE_LABELS),
        "mem_free": gauge("dralab_device_memory_free_bytes", "Device memory not allocated", _DEVICE_LABELS),
        "mem_total": gauge("dralab_device_memory_total_bytes", "Device memory published in the slice", _DEVICE_LABELS),
        "cores_alloc": gauge("dralab_device_cores_allocated", "Device cores (percent or units) allocated",
                             _DEVICE_LABELS),
        "cores_free": gauge("dralab_device_cores_free", "Device cores not allocated", _DEVICE_LABELS),
        "cores_total": gauge("dralab_device_cores_total", "Device cores published in the slice", _DEVICE_LABELS),
        "shares": gauge("dralab_device_shares", "Allocations currently on the device", _DEVICE_LABELS),
    }
    for d in alloc.devices.values():
        labels = [d.node, d.driver, d.pool, d.name]
        for key, value in (("mem_alloc", d.memory_used), ("mem_free", d.memory_free), ("mem_total", d.memory_total),
                           ("cores_alloc", d.cores_used), ("cores_free", d.cores_free),
                           ("cores_total", d.cores_total), ("shares", d.shares)):
            dev[key].add_metric(labels, value)
    pod_mem = gauge("dralab_pod_memory_allocated_bytes", "Device memory allocated to a pod's claims",
                    ["namespace", "pod"])
    pod_cores = gauge("dralab_pod_cores_allocated", "Device cores allocated to a pod's claims", ["namespace", "pod"])
    for (ns, pod), (mem, cores) in sorted(alloc.per_pod().items()):
        pod_mem.add_metric([ns, pod], mem)
        pod_cores.add_metric([ns, pod], cores)
    ns_mem = gauge("dralab_namespace_memory_allocated_bytes", "Device memory allocated to a namespace's claims",
                   ["namespace"])
    ns_cores = gauge("dralab_namespace_cores_allocated", "Device cores allocated to a namespace's claims",
                     ["namespace"])
    for ns, (mem, cores) in sorted(alloc.per_namespace().items()):
        ns_mem.add_metric([ns], mem)
        ns_cores.add_metric([ns], cores)
    unknown = gauge("dralab_allocations_on_unpublished_devices", "Allocation results naming no published device", [])
    unknown.add_metric([], alloc.unknown_devices)
    out = [*dev.values(), pod_mem, pod_cores, ns_mem, ns_cores, unknown, enforcement_family(alloc)]
    return [*out, *hami_families(alloc)] if hami else out


def enforcement_family(alloc: Allocation) -> GaugeMetricFamily:
    """1 per node and driver, labelled with the mode its slices publish: an alert on ``mode="none"``
    finds every node whose claims run without their quotas enforced."""
    family = GaugeMetricFamily(
        "dralab_node_enforcement",
        "Enforcement mode of a node's driver, from its slices' dralab.io/enforcement label: required, "
        "none (claims prepared without the enforcement library) or unknown (no label)",
        labels=["node", "driver", "mode"],
    )
    for (node, driver), mode in sorted(alloc.enforcement.items()):
        family.add_metric([node, driver, mode], 1)
    return family


class AllocationWatch:
    """Watches slices and claims; :meth:`allocation` is the picture now; ``changed`` fires on every event
    and ``version`` counts the events (a reader that remembers it knows whether anything changed since)."""

    def __init__(self, api: Kube) -> None:
        self.changed = threading.Event()
        self.version = 0
        self._bumping = threading.Lock()  # two informer threads: ``+=`` alone could lose one of two events
        self.slices = Informer(api, SLICES, "", self._bump, "monitor-slices")
        self.claims = Informer(api, CLAIMS, "", self._bump, "monitor-claims")

    def _bump(self) -> None:
        with self._bumping:  # a reader compares, never writes
            self.version += 1
        self.changed.set()

    def start(self) -> None:
        self.slices.start()
        self.claims.start()

    def stop(self) -> None:
        self.slices.stop()
        self.claims.stop()

    def ready(self) -> bool:
        return self.slices.synced.is_set() and self.claims.synced.is_set()

    def allocation(self, namespace: str | None = None) -> Allocation:
        return compute(self.slices.snapshot(), self.claims.snapshot(), namespace)


class AllocationCollector(Collector):
    """Computes the gauges at scrape time from an :class:`AllocationWatch`, again only after a change.

    A scrape walks every slice and claim (``dralab bench caches``: about 0.1 ms per claim with HAMi's
    names), so an unchanged picture answers the families of the last scrape; an event between two
    scrapes makes the next one compute afresh.
    """

    def __init__(self, watch: AllocationWatch, hami: bool = True) -> None:
        self.watch = watch
        self.hami = hami
        self.computed = 0  # scrapes that computed the picture (the others answered the last one)
        self._lock = threading.Lock()
        self._last: tuple[int, list[GaugeMetricFamily]] | None = None

    def collect(self) -> Iterator[Any]:
        with self._lock:  # concurrent scrapes wait for one computation instead of each doing it
            version = self.watch.version  # read before computing: an event during it makes the next scrape redo it
            if self._last is None or self._last[0] != version:
                self._last = (version, families(self.watch.allocation(), self.hami))
                self.computed += 1
            fams = self._last[1]
        yield from fams


def registry_for(watch: AllocationWatch, hami: bool = True) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(AllocationCollector(watch, hami))
    return registry
