"""HAMi-compatible allocation gauges: HAMi's metric and label names over dralab's own accounting.

A HAMi dashboard (Grafana, alert rules, recording rules) reads the names HAMi's scheduler and vGPU
monitor export. ``dralab monitor`` exports them as well (``--no-hami-metrics`` turns them off), from
the same :class:`~dralab.monitor.allocation.Allocation` the ``dralab_*`` gauges come from: nothing is
computed twice, and a series exists exactly when its ``dralab_*`` counterpart does. The shipped
dashboard (``charts/dralab/files/dashboards/dralab-allocation.json``) keeps the ``dralab_*`` names.

Names and labels, as HAMi writes them (Project-HAMi/HAMi ``cmd/scheduler/metrics.go`` and
``cmd/vGPUmonitor/metrics.go``); every series also carries ``zone="vGPU"``, the label HAMi's
registries add:

Scheduler, per device (one series per published device, like ``dralab_device_*``)
  ``hami_gpu_memory_limit_bytes``, ``hami_gpu_memory_allocated_bytes``, ``hami_gpu_core_limit_ratio``,
  ``hami_gpu_core_allocated_ratio``, ``hami_gpu_shared_count``, ``hami_node_gpu_overview``,
  ``hami_node_gpu_memory_allocated_ratio`` (HAMi 2.9 and later), and the names before 2.9 (still
  exported by HAMi with ``--legacy-metrics``): ``GPUDeviceMemoryLimit``, ``GPUDeviceMemoryAllocated``,
  ``GPUDeviceCoreLimit``, ``GPUDeviceCoreAllocated``, ``GPUDeviceSharedNum``, ``nodeGPUOverview``,
  ``nodeGPUMemoryPercentage``. Labels ``node``/``nodeid`` (the slice's node), ``device_uuid``/
  ``deviceuuid`` (the ``uuid`` attribute, else the DRA device name), ``device_index``/``deviceidx``
  (the ``index`` attribute), ``device_type``/``devicetype`` (``productName``, else ``type``),
  ``device_cores``/``devicecores`` (the device's total cores, as HAMi 2.10 writes it) and
  ``device_memory_limit``/``devicememorylimit`` (total memory in MiB, as HAMi writes it).
Scheduler, per container and device (one series per allocation and reserving pod)
  ``hami_vgpu_memory_allocated_bytes``, ``hami_vgpu_core_allocated_ratio`` (labels ``namespace``,
  ``node``, ``pod``, ``container_index``, ``device_uuid``) and before 2.9 ``vGPUMemoryAllocated``,
  ``vGPUCoreAllocated`` (``podnamespace``, ``nodename``, ``podname``, ``containeridx``, ``deviceuuid``).
vGPU monitor (HAMi's device-plugin DaemonSet), per container and device
  ``hami_vgpu_memory_limit_bytes`` (``namespace``, ``pod``, ``container``, ``vdevice_index``,
  ``device_uuid``) and before 2.9 ``vGPU_device_memory_limit_in_bytes`` (``podnamespace``,
  ``podname``, ``ctrname``, ``vdeviceid``, ``deviceuuid``): the memory the container may use.

Units are HAMi's: memory in bytes (the label ``device_memory_limit`` in MiB), cores as the slice
publishes them (percent of the card, 100 = whole card, HAMi's unit), ``*_shared_count`` the number of
allocations on the device (HAMi counts containers; one dralab claim serves one container), and
``*_memory_allocated_ratio``/``nodeGPUMemoryPercentage`` a fraction 0..1 (allocated / total, as HAMi
computes it; absent for a device publishing no memory). A ResourceClaim does not say which index a
container or a vGPU has in the pod, so ``container_index``/``containeridx`` and ``vdevice_index``/
``vdeviceid`` are empty; ``container``/``ctrname`` is the webhook's ``dralab.io/container`` annotation
(empty for claims from templates). Series whose labels coincide (two claims of one pod on one device)
are summed. Not exported: HAMi's usage metrics (measured on the node), MIG instances, quotas, and
``vGPUPodsDeviceAllocated``/``vGPUMemoryPercentage``/``vGPUCorePercentage`` (removed in HAMi 2.8).
HAMi-DRA exports no metrics of its own (its webhook serves controller-runtime's defaults only).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client.core import GaugeMetricFamily

from dralab.model.quantity import MIB
from dralab.monitor.allocation import Allocation, Device

ZONE = "vGPU"  # the zone label HAMi's scheduler and vGPU monitor register their collectors under


@dataclass(frozen=True)
class HamiMetric:
    """One HAMi name: its labels in HAMi's order, its unit, and the dralab gauge it mirrors."""

    name: str
    labels: tuple[str, ...]
    unit: str
    mirrors: str
    source: str  # "scheduler" or "vGPU monitor"
    value: str  # what it reads: a Device field / ratio, or a per-container sum ("memory", "cores")
    per: str  # "device" or "container"


_DEV = ("node", "device_uuid", "device_index", "device_type")
_DEV_CORES = ("node", "device_uuid", "device_index", "device_cores", "device_type")
_OVERVIEW = ("node", "device_uuid", "device_index", "device_cores", "device_memory_limit", "device_type")
_LDEV = ("nodeid", "deviceuuid", "deviceidx", "devicetype")
_LDEV_CORES = ("nodeid", "deviceuuid", "deviceidx", "devicecores", "devicetype")
_LOVERVIEW = ("nodeid", "deviceuuid", "deviceidx", "devicecores", "devicememorylimit", "devicetype")
_CTR = ("namespace", "node", "pod", "container_index", "device_uuid")
_LCTR = ("podnamespace", "nodename", "podname", "containeridx", "deviceuuid")
_MON = ("namespace", "pod", "container", "vdevice_index", "device_uuid")
_LMON = ("podnamespace", "podname", "ctrname", "vdeviceid", "deviceuuid")

BYTES = "bytes"
CORES = "cores (percent of the card)"
COUNT = "allocations"
RATIO = "fraction 0..1"


def _m(name: str, labels: tuple[str, ...], unit: str, mirrors: str, value: str, per: str = "device",
       source: str = "scheduler") -> HamiMetric:
    return HamiMetric(name, (*labels, "zone"), unit, mirrors, source, value, per)


HAMI_METRICS: tuple[HamiMetric, ...] = (
    # HAMi 2.9 and later
    _m("hami_gpu_memory_limit_bytes", _DEV, BYTES, "dralab_device_memory_total_bytes", "memory_total"),
    _m("hami_gpu_memory_allocated_bytes", _DEV_CORES, BYTES, "dralab_device_memory_allocated_bytes", "memory_used"),
    _m("hami_gpu_core_limit_ratio", _DEV, CORES, "dralab_device_cores_total", "cores_total"),
    _m("hami_gpu_core_allocated_ratio", _DEV, CORES, "dralab_device_cores_allocated", "cores_used"),
    _m("hami_gpu_shared_count", _DEV, COUNT, "dralab_device_shares", "shares"),
    _m("hami_node_gpu_overview", _OVERVIEW, BYTES, "dralab_device_memory_allocated_bytes", "memory_used"),
    _m("hami_node_gpu_memory_allocated_ratio", _DEV, RATIO,
       "dralab_device_memory_allocated_bytes / dralab_device_memory_total_bytes", "memory_ratio"),
    _m("hami_vgpu_memory_allocated_bytes", _CTR, BYTES, "dralab_pod_memory_allocated_bytes per device", "memory",
       "container"),
    _m("hami_vgpu_core_allocated_ratio", _CTR, CORES, "dralab_pod_cores_allocated per device", "cores",
       "container"),
    _m("hami_vgpu_memory_limit_bytes", _MON, BYTES, "dralab_pod_memory_allocated_bytes per device", "memory",
       "container", "vGPU monitor"),
    # before HAMi 2.9 (HAMi 2.9 and later with --legacy-metrics)
    _m("GPUDeviceMemoryLimit", _LDEV, BYTES, "dralab_device_memory_total_bytes", "memory_total"),
    _m("GPUDeviceMemoryAllocated", _LDEV_CORES, BYTES, "dralab_device_memory_allocated_bytes", "memory_used"),
    _m("GPUDeviceCoreLimit", _LDEV, CORES, "dralab_device_cores_total", "cores_total"),
    _m("GPUDeviceCoreAllocated", _LDEV, CORES, "dralab_device_cores_allocated", "cores_used"),
    _m("GPUDeviceSharedNum", _LDEV, COUNT, "dralab_device_shares", "shares"),
    _m("nodeGPUOverview", _LOVERVIEW, BYTES, "dralab_device_memory_allocated_bytes", "memory_used"),
    _m("nodeGPUMemoryPercentage", ("nodeid", "deviceuuid", "deviceidx"), RATIO,
       "dralab_device_memory_allocated_bytes / dralab_device_memory_total_bytes", "memory_ratio"),
    _m("vGPUMemoryAllocated", _LCTR, BYTES, "dralab_pod_memory_allocated_bytes per device", "memory", "container"),
    _m("vGPUCoreAllocated", _LCTR, CORES, "dralab_pod_cores_allocated per device", "cores", "container"),
    _m("vGPU_device_memory_limit_in_bytes", _LMON, BYTES, "dralab_pod_memory_allocated_bytes per device", "memory",
       "container", "vGPU monitor"),
)

HAMI_NAMES = tuple(m.name for m in HAMI_METRICS)

_DEVICE_VALUES: dict[str, Callable[[Device], float | None]] = {
    "memory_total": lambda d: d.memory_total,
    "memory_used": lambda d: d.memory_used,
    "cores_total": lambda d: d.cores_total,
    "cores_used": lambda d: d.cores_used,
    "shares": lambda d: d.shares,
    "memory_ratio": lambda d: d.memory_used / d.memory_total if d.memory_total > 0 else None,
}


def device_uuid(device: Device) -> str:
    """The device's ``uuid`` attribute, else its DRA name (unique on its node)."""
    return device.uuid or device.name


def _device_labels(d: Device) -> dict[str, str]:
    """Every per-device label value, under both HAMi spellings."""
    uuid, cores, limit_mib = device_uuid(d), str(d.cores_total), str(d.memory_total // MIB)
    return {
        "node": d.node, "nodeid": d.node, "device_uuid": uuid, "deviceuuid": uuid,
        "device_index": d.index, "deviceidx": d.index, "device_type": d.product, "devicetype": d.product,
        "device_cores": cores, "devicecores": cores, "device_memory_limit": limit_mib, "devicememorylimit": limit_mib,
        "zone": ZONE,
    }


def _container_labels(ns: str, pod: str, container: str, d: Device) -> dict[str, str]:
    """Every per-container label value, under both HAMi spellings (indexes are unknown: empty)."""
    uuid = device_uuid(d)
    return {
        "namespace": ns, "podnamespace": ns, "pod": pod, "podname": pod, "node": d.node, "nodename": d.node,
        "container": container, "ctrname": container, "container_index": "", "containeridx": "",
        "vdevice_index": "", "vdeviceid": "", "device_uuid": uuid, "deviceuuid": uuid, "zone": ZONE,
    }


def hami_families(alloc: Allocation) -> list[GaugeMetricFamily]:
    """The HAMi-named gauges of one allocation picture, in :data:`HAMI_METRICS` order (pure)."""
    sums: dict[str, dict[tuple[str, ...], float]] = {m.name: {} for m in HAMI_METRICS}
    device_metrics = [m for m in HAMI_METRICS if m.per == "device"]
    container_metrics = [m for m in HAMI_METRICS if m.per == "container"]
    for d in alloc.devices.values():
        labels = _device_labels(d)
        for m in device_metrics:
            value = _DEVICE_VALUES[m.value](d)
            if value is not None:
                sums[m.name][tuple(labels[name] for name in m.labels)] = value
    for share in alloc.shares:
        d = alloc.devices[share.device]
        for pod in share.pods:  # as dralab_pod_*: each reserving pod holds the whole share
            labels = _container_labels(share.namespace, pod, share.container, d)
            for m in container_metrics:
                key = tuple(labels[name] for name in m.labels)
                value = share.memory if m.value == "memory" else share.cores
                sums[m.name][key] = sums[m.name].get(key, 0) + value
    out = []
    for m in HAMI_METRICS:
        family = GaugeMetricFamily(m.name, f"HAMi-compatible ({m.source}): mirrors {m.mirrors}; unit {m.unit}",
                                   labels=list(m.labels))
        for key, value in sorted(sums[m.name].items()):
            family.add_metric(list(key), value)
        out.append(family)
    return out
