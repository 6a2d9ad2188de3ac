"""The HAMi-named gauges: HAMi's names, labels and units over the same allocation picture as ``dralab_*``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from dralab.monitor.allocation import CONTAINER_ANNOTATION, compute
from dralab.monitor.collector import families
from dralab.monitor.hami import HAMI_METRICS, HAMI_NAMES

GI = 2**30
MI = 2**20
DRIVER = "gpu.project-hami.io"
README = Path(__file__).resolve().parents[3] / "README.md"

# what the monitor exported before the HAMi names, in order: must not change
DRALAB_NAMES = [
    "dralab_device_memory_allocated_bytes", "dralab_device_memory_free_bytes", "dralab_device_memory_total_bytes",
    "dralab_device_cores_allocated", "dralab_device_cores_free", "dralab_device_cores_total", "dralab_device_shares",
    "dralab_pod_memory_allocated_bytes", "dralab_pod_cores_allocated", "dralab_namespace_memory_allocated_bytes",
    "dralab_namespace_cores_allocated", "dralab_allocations_on_unpublished_devices", "dralab_node_enforcement",
]


def _device(name: str, uuid: str | None, index: int, memory: str = "16Gi") -> dict[str, Any]:
    attributes: dict[str, Any] = {"index": {"int": index}, "productName": {"string": "NVIDIA-A100"},
                                  "type": {"string": "hami-gpu"}}
    if uuid is not None:
        attributes["uuid"] = {"string": uuid}
    return {"name": name, "attributes": attributes,
            "capacity": {"memory": {"value": memory}, "cores": {"value": "100"}}}


def _slice(devices: list[dict[str, Any]], node: str = "n1") -> dict[str, Any]:
    return {"spec": {"driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1},
                     "devices": devices}}


def _claim(ns: str, name: str, device: str, pods: list[str], memory: str | None, cores: str = "0",
           container: str | None = None) -> dict[str, Any]:
    result: dict[str, Any] = {"request": "gpu", "driver": DRIVER, "pool": "n1", "device": device}
    if memory is not None:
        result["consumedCapacity"] = {"memory": memory, "cores": cores}
    meta: dict[str, Any] = {"namespace": ns, "name": name}
    if container is not None:
        meta["annotations"] = {CONTAINER_ANNOTATION: container}
    return {"metadata": meta,
            "status": {"allocation": {"devices": {"results": [result]}},
                       "reservedFor": [{"resource": "pods", "name": p, "uid": f"u-{p}"} for p in pods]}}


def _fixture():
    """Two devices, three claims: two sharing gpu-0, one exclusive on gpu-1 (no consumedCapacity)."""
    slices = [_slice([_device("gpu-0", "GPU-aaaa", 0), _device("gpu-1", "GPU-bbbb", 1)])]
    claims = [
        _claim("a", "c1", "gpu-0", ["p1"], "8Gi", "50", container="main"),
        _claim("a", "c2", "gpu-0", ["p2"], "4Gi", "25"),  # a claim from a template: no container annotation
        _claim("b", "c3", "gpu-1", ["p3"], None, container="worker"),  # exclusive: the whole device
    ]
    return compute(slices, claims)


Samples = dict[str, dict[tuple[tuple[str, str], ...], float]]


def _scrape(alloc, hami: bool = True) -> Samples:
    registry = CollectorRegistry()

    class Fixed:
        def collect(self):
            return families(alloc, hami)

    registry.register(Fixed())
    out: Samples = {}
    for fam in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in fam.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def _key(**labels: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted({**labels, "zone": "vGPU"}.items()))


def _dev(uuid: str, index: str, legacy: bool = False, **extra: str) -> tuple[tuple[str, str], ...]:
    if legacy:
        return _key(nodeid="n1", deviceuuid=uuid, deviceidx=index, devicetype="NVIDIA-A100", **extra)
    return _key(node="n1", device_uuid=uuid, device_index=index, device_type="NVIDIA-A100", **extra)


D0, D1 = ("GPU-aaaa", "0"), ("GPU-bbbb", "1")


def test_per_device_series_current_names() -> None:
    got = _scrape(_fixture())
    assert got["hami_gpu_memory_limit_bytes"] == {_dev(*D0): 16 * GI, _dev(*D1): 16 * GI}
    assert got["hami_gpu_memory_allocated_bytes"] == {_dev(*D0, device_cores="100"): 12 * GI,
                                                      _dev(*D1, device_cores="100"): 16 * GI}
    assert got["hami_gpu_core_limit_ratio"] == {_dev(*D0): 100, _dev(*D1): 100}
    assert got["hami_gpu_core_allocated_ratio"] == {_dev(*D0): 75, _dev(*D1): 100}
    assert got["hami_gpu_shared_count"] == {_dev(*D0): 2, _dev(*D1): 1}
    overview = {"device_cores": "100", "device_memory_limit": "16384"}  # MiB, as HAMi writes the label
    assert got["hami_node_gpu_overview"] == {_dev(*D0, **overview): 12 * GI, _dev(*D1, **overview): 16 * GI}
    assert got["hami_node_gpu_memory_allocated_ratio"] == {_dev(*D0): 0.75, _dev(*D1): 1.0}


def test_per_device_series_legacy_names() -> None:
    got = _scrape(_fixture())
    assert got["GPUDeviceMemoryLimit"] == {_dev(*D0, True): 16 * GI, _dev(*D1, True): 16 * GI}
    assert got["GPUDeviceMemoryAllocated"] == {_dev(*D0, True, devicecores="100"): 12 * GI,
                                               _dev(*D1, True, devicecores="100"): 16 * GI}
    assert got["GPUDeviceCoreLimit"] == {_dev(*D0, True): 100, _dev(*D1, True): 100}
    assert got["GPUDeviceCoreAllocated"] == {_dev(*D0, True): 75, _dev(*D1, True): 100}
    assert got["GPUDeviceSharedNum"] == {_dev(*D0, True): 2, _dev(*D1, True): 1}
    overview = {"devicecores": "100", "devicememorylimit": "16384"}
    assert got["nodeGPUOverview"] == {_dev(*D0, True, **overview): 12 * GI, _dev(*D1, True, **overview): 16 * GI}
    # HAMi's nodeGPUMemoryPercentage has no devicetype label, and is a fraction despite its name
    assert got["nodeGPUMemoryPercentage"] == {_key(nodeid="n1", deviceuuid="GPU-aaaa", deviceidx="0"): 0.75,
                                              _key(nodeid="n1", deviceuuid="GPU-bbbb", deviceidx="1"): 1.0}


def test_per_container_series() -> None:
    got = _scrape(_fixture())

    def ctr(ns: str, pod: str, uuid: str, legacy: bool = False) -> tuple[tuple[str, str], ...]:
        if legacy:
            return _key(podnamespace=ns, nodename="n1", podname=pod, containeridx="", deviceuuid=uuid)
        return _key(namespace=ns, node="n1", pod=pod, container_index="", device_uuid=uuid)

    want_mem = {("a", "p1", "GPU-aaaa"): 8 * GI, ("a", "p2", "GPU-aaaa"): 4 * GI, ("b", "p3", "GPU-bbbb"): 16 * GI}
    want_cores = {("a", "p1", "GPU-aaaa"): 50, ("a", "p2", "GPU-aaaa"): 25, ("b", "p3", "GPU-bbbb"): 100}
    assert got["hami_vgpu_memory_allocated_bytes"] == {ctr(*k): v for k, v in want_mem.items()}
    assert got["hami_vgpu_core_allocated_ratio"] == {ctr(*k): v for k, v in want_cores.items()}
    assert got["vGPUMemoryAllocated"] == {ctr(*k, legacy=True): v for k, v in want_mem.items()}
    assert got["vGPUCoreAllocated"] == {ctr(*k, legacy=True): v for k, v in want_cores.items()}
    # the vGPU monitor's names carry the container name (the claim's annotation; empty from a template)
    containers = {"p1": "main", "p2": "", "p3": "worker"}
    assert got["hami_vgpu_memory_limit_bytes"] == {
        _key(namespace=ns, pod=pod, container=containers[pod], vdevice_index="", device_uuid=uuid): v
        for (ns, pod, uuid), v in want_mem.items()}
    assert got["vGPU_device_memory_limit_in_bytes"] == {
        _key(podnamespace=ns, podname=pod, ctrname=containers[pod], vdeviceid="", deviceuuid=uuid): v
        for (ns, pod, uuid), v in want_mem.items()}


def test_same_accounting_and_cardinality_as_the_dralab_gauges() -> None:
    alloc = _fixture()
    got = _scrape(alloc)
    per_device = len(got["dralab_device_shares"])
    pod_device_pairs = {(s.namespace, p, s.device) for s in alloc.shares for p in s.pods}
    for m in HAMI_METRICS:
        assert len(got[m.name]) == (per_device if m.per == "device" else len(pod_device_pairs)), m.name
    for uuid, dev in (("GPU-aaaa", "gpu-0"), ("GPU-bbbb", "gpu-1")):
        dralab = tuple(sorted({"node": "n1", "driver": DRIVER, "pool": "n1", "device": dev}.items()))
        hami = _dev(uuid, "0" if dev == "gpu-0" else "1")
        assert got["hami_gpu_memory_limit_bytes"][hami] == got["dralab_device_memory_total_bytes"][dralab]
        assert got["hami_gpu_core_allocated_ratio"][hami] == got["dralab_device_cores_allocated"][dralab]
        assert got["hami_gpu_shared_count"][hami] == got["dralab_device_shares"][dralab]
    # summed over devices, the per-container memory is the per-pod gauge
    for (ns, pod), value in {(dict(k)["namespace"], dict(k)["pod"]): v
                             for k, v in got["dralab_pod_memory_allocated_bytes"].items()}.items():
        assert value == sum(v for k, v in got["hami_vgpu_memory_allocated_bytes"].items()
                            if dict(k)["namespace"] == ns and dict(k)["pod"] == pod)


def test_coinciding_series_are_summed_and_fallbacks() -> None:
    slices = [_slice([_device("gpu-0", None, 0), _device("gpu-1", "GPU-bbbb", 1, memory="0")])]
    claims = [_claim("a", "c1", "gpu-0", ["p1"], "1Gi", "10"), _claim("a", "c2", "gpu-0", ["p1"], "2Gi", "20")]
    got = _scrape(compute(slices, claims))
    # no uuid attribute: the DRA device name stands in; two claims of one pod on one device add up
    assert got["hami_vgpu_memory_allocated_bytes"] == {
        _key(namespace="a", node="n1", pod="p1", container_index="", device_uuid="gpu-0"): 3 * GI}
    assert got["vGPUCoreAllocated"] == {
        _key(podnamespace="a", nodename="n1", podname="p1", containeridx="", deviceuuid="gpu-0"): 30}
    # a device publishing no memory has no memory ratio (HAMi skips it too), but its other series
    assert set(got["hami_node_gpu_memory_allocated_ratio"]) == {_dev("gpu-0", "0")}
    assert len(got["hami_gpu_memory_limit_bytes"]) == 2


def test_dralab_names_are_unchanged() -> None:
    alloc = _fixture()
    on = [f.name for f in families(alloc)]
    assert on[:len(DRALAB_NAMES)] == DRALAB_NAMES and on[len(DRALAB_NAMES):] == list(HAMI_NAMES)
    assert [f.name for f in families(alloc, hami=False)] == DRALAB_NAMES
    with_hami, without = _scrape(alloc), _scrape(alloc, hami=False)
    assert {k: v for k, v in with_hami.items() if k.startswith("dralab_")} == without
    assert not set(without) & set(HAMI_NAMES)


def _readme_table() -> list[list[str]]:
    text = README.read_text()
    section = text[text.index("### HAMi metric names"):]
    rows = []
    for line in section.splitlines()[1:]:
        if line.startswith("#"):
            break
        if line.startswith("| `"):
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


def test_readme_lists_every_exported_name_with_its_labels_unit_and_mirror() -> None:
    rows = _readme_table()
    ticked = lambda cell: re.findall(r"`([^`]+)`", cell)  # noqa: E731
    readme = {ticked(r[0])[0]: (r[1], tuple(ticked(r[2])), r[3], ticked(r[4])) for r in rows}
    assert len(readme) == len(rows)
    got = _scrape(_fixture())
    exported = [f.name for f in families(_fixture())][len(DRALAB_NAMES):]
    assert list(readme) == exported
    for m in HAMI_METRICS:
        source, labels, unit, mirrors = readme[m.name]
        assert (source, labels, unit) == (m.source, m.labels, m.unit), m.name
        assert mirrors == re.findall(r"dralab_\w+", m.mirrors) and all(n in DRALAB_NAMES for n in mirrors)
        assert {tuple(sorted(name for name, _ in key)) for key in got[m.name]} == {tuple(sorted(labels))}, m.name


def test_container_annotation_is_the_webhooks() -> None:
    from dralab.model.convert import ANN_CONTAINER

    assert CONTAINER_ANNOTATION == ANN_CONTAINER


def test_cli_flag() -> None:
    from click.testing import CliRunner

    from dralab.cli import cli

    assert "--no-hami-metrics" in CliRunner().invoke(cli, ["monitor", "--help"]).output
