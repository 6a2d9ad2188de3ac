"""The allocation picture and its gauges, computed from slices and claims as the apiserver returns them."""

from __future__ import annotations

import urllib.request
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from dralab.driver import slices as driver_slices
from dralab.monitor.allocation import ENFORCEMENT_LABEL, compute, current_slices
from dralab.monitor.collector import families
from dralab.monitor.server import MonitorServer
from dralab.monitor.top import plain, rows

GI = 2**30
DRIVER = "ascend.project-hami.io"


def slice_(node: str, generation: int = 1, devices: tuple[str, ...] = ("npu-0-0", "npu-1-0"),
           enforcement: str | None = None) -> dict[str, Any]:
    """A slice as the driver publishes it; ``enforcement`` is its ``dralab.io/enforcement`` label."""
    labels = {} if enforcement is None else {ENFORCEMENT_LABEL: enforcement}
    return {"metadata": {"labels": labels}, "spec": {
        "driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
        "devices": [{"name": d, "capacity": {"memory": {"value": "21525Mi"}, "cores": {"value": "100"}}}
                    for d in devices],
    }}


def claim(ns: str, name: str, device: str, pods: list[str], memory: str | None = "8Gi", cores: str = "50",
          node: str = "n1") -> dict[str, Any]:
    result: dict[str, Any] = {"request": "npu", "driver": DRIVER, "pool": node, "device": device}
    if memory is not None:
        result["consumedCapacity"] = {"memory": memory, "cores": cores}
    return {
        "metadata": {"namespace": ns, "name": name},
        "status": {"allocation": {"devices": {"results": [result]}},
                   "reservedFor": [{"resource": "pods", "name": p, "uid": f"u-{p}"} for p in pods]},
    }


def _picture():
    claims = [claim("a", "c1", "npu-0-0", ["p1"]), claim("a", "c2", "npu-0-0", ["p2"], "4Gi", "25"),
              claim("b", "c3", "npu-1-0", ["p3", "p4"], "2Gi", "10"), {"metadata": {"namespace": "b", "name": "pend"}}]
    return compute([slice_("n1")], claims)


def test_per_device() -> None:
    alloc = _picture()
    d0 = alloc.devices[(DRIVER, "n1", "npu-0-0")]
    assert (d0.memory_used, d0.cores_used, d0.shares) == (12 * GI, 75, 2)
    assert d0.memory_total == 21525 * 2**20 and d0.memory_free == 21525 * 2**20 - 12 * GI
    assert d0.cores_free == 25 and d0.sharers == ["a/p1", "a/p2"]
    d1 = alloc.devices[(DRIVER, "n1", "npu-1-0")]
    assert (d1.shares, d1.sharers) == (1, ["b/p3", "b/p4"])


def test_per_pod_and_namespace() -> None:
    alloc = _picture()
    assert alloc.per_pod() == {("a", "p1"): (8 * GI, 50), ("a", "p2"): (4 * GI, 25),
                               ("b", "p3"): (2 * GI, 10), ("b", "p4"): (2 * GI, 10)}
    # a claim shared by two pods counts once for its namespace
    assert alloc.per_namespace() == {"a": (12 * GI, 75), "b": (2 * GI, 10)}


def test_namespace_filter() -> None:
    alloc = compute([slice_("n1")], [claim("a", "c1", "npu-0-0", ["p1"]), claim("b", "c3", "npu-0-0", ["p3"])], "b")
    assert alloc.devices[(DRIVER, "n1", "npu-0-0")].sharers == ["b/p3"]


def test_exclusive_allocation_takes_the_whole_device() -> None:
    alloc = compute([slice_("n1")], [claim("a", "c1", "npu-0-0", ["p1"], memory=None)])
    d0 = alloc.devices[(DRIVER, "n1", "npu-0-0")]
    assert (d0.memory_free, d0.cores_free) == (0, 0)


def test_only_the_newest_pool_generation_counts() -> None:
    assert len(current_slices([slice_("n1", 1), slice_("n1", 2, ("npu-9-0",))])) == 1
    alloc = compute([slice_("n1", 1), slice_("n1", 2, ("npu-9-0",))], [claim("a", "c", "npu-0-0", ["p"])])
    assert list(alloc.devices) == [(DRIVER, "n1", "npu-9-0")] and alloc.unknown_devices == 1


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def test_gauges() -> None:
    registry = CollectorRegistry()

    class Fixed:
        def collect(self):
            return families(_picture())

    registry.register(Fixed())
    got = _samples(generate_latest(registry).decode())
    dev = tuple(sorted({"device": "npu-0-0", "driver": DRIVER, "node": "n1", "pool": "n1"}.items()))
    assert got[("dralab_device_shares", dev)] == 2
    assert got[("dralab_device_cores_allocated", dev)] == 75
    assert got[("dralab_device_cores_free", dev)] == 25
    assert got[("dralab_device_memory_allocated_bytes", dev)] == 12 * GI
    assert got[("dralab_device_memory_free_bytes", dev)] == 21525 * 2**20 - 12 * GI
    assert got[("dralab_pod_cores_allocated", (("namespace", "a"), ("pod", "p2")))] == 25
    assert got[("dralab_namespace_memory_allocated_bytes", (("namespace", "b"),))] == 2 * GI


def test_top_rows_and_text() -> None:
    assert rows(_picture())[0] == ["npu-0-0", "n1", "unknown", "12288Mi/21525Mi", "75/100", "2", "a/p1, a/p2"]
    text = plain(_picture())
    assert text.splitlines()[0].split()[:2] == ["DEVICE", "NODE"]


def test_http_endpoints() -> None:
    registry = CollectorRegistry()
    ready = {"ok": False}
    server = MonitorServer(registry, lambda: ready["ok"], "127.0.0.1", 0)
    server.start_in_thread()
    try:
        base = f"http://127.0.0.1:{server.port}"
        assert urllib.request.urlopen(f"{base}/healthz").read() == b"ok"
        try:
            urllib.request.urlopen(f"{base}/readyz")
            raise AssertionError("readyz answered 200 before the caches synced")
        except urllib.error.HTTPError as exc:
            assert exc.code == 503
        ready["ok"] = True
        assert urllib.request.urlopen(f"{base}/readyz").status == 200
        assert urllib.request.urlopen(f"{base}/metrics").status == 200
    finally:
        server.close()


def test_live_table_renders_the_rows() -> None:
    from rich.console import Console

    from dralab.monitor.top import table

    console = Console(record=True, width=200)
    console.print(table(_picture(), "device shares (a)"))
    text = console.export_text()
    assert "device shares (a)" in text and "12288Mi/21525Mi" in text and "a/p1, a/p2" in text


def test_cli_options() -> None:
    from click.testing import CliRunner

    from dralab.cli import cli

    runner = CliRunner()
    assert "--hami-config" in runner.invoke(cli, ["webhook", "serve", "--help"]).output
    assert "--namespace" in runner.invoke(cli, ["top", "--help"]).output
    assert "--once" in runner.invoke(cli, ["monitor", "--help"]).output
    assert "--feature-gates" in runner.invoke(cli, ["cluster", "up", "--help"]).output


# -- the enforcement mode each node's driver publishes --------------------------------------------


def _modes() -> list[dict[str, Any]]:
    """Three nodes: enforced, opted out (enforcement: none), and a driver that labels nothing."""
    return [slice_("n1", enforcement="required"), slice_("n2", enforcement="none", devices=("npu-0-0",)),
            slice_("n3", devices=("npu-0-0",))]


def test_the_monitor_reads_the_label_the_driver_writes(tmp_path) -> None:
    from dralab.driver.devices import BackendOptions
    from dralab.driver.devices.fake import FakeBackend
    from dralab.model.vendors import load_vendor_table

    node = "aio-node74-arm"  # Lab 20's host, the fake backend's default inventory
    devices = FakeBackend.from_options(BackendOptions(node=node, state_dir=tmp_path, dry_run=True)).enumerate()
    for mode in ("required", "none"):
        published = driver_slices.build_slices(load_vendor_table().get("ascend"), node, devices, enforcement=mode)
        assert compute(published, []).enforcement == {(node, DRIVER): mode}


def test_enforcement_per_node_and_driver() -> None:
    alloc = compute(_modes(), [])
    assert alloc.enforcement == {("n1", DRIVER): "required", ("n2", DRIVER): "none", ("n3", DRIVER): "unknown"}
    assert alloc.unenforced() == [("n2", DRIVER)]
    # an older generation's label does not count, a newer slice's does
    assert compute([slice_("n1", 1, enforcement="none"), slice_("n1", 2, enforcement="required")],
                   []).enforcement == {("n1", DRIVER): "required"}


def test_node_enforcement_gauge() -> None:
    registry = CollectorRegistry()

    class Fixed:
        def collect(self):
            return families(compute(_modes(), []), hami=False)

    registry.register(Fixed())
    got = {labels: v for (name, labels), v in _samples(generate_latest(registry).decode()).items()
           if name == "dralab_node_enforcement"}
    assert got == {
        (("driver", DRIVER), ("mode", "required"), ("node", "n1")): 1,
        (("driver", DRIVER), ("mode", "none"), ("node", "n2")): 1,
        (("driver", DRIVER), ("mode", "unknown"), ("node", "n3")): 1,
    }


def test_top_shouts_an_unenforced_node() -> None:
    alloc = compute(_modes(), [claim("a", "c1", "npu-0-0", ["p1"], node="n2")])
    by_node = {r[1]: r[2] for r in rows(alloc)}
    assert by_node == {"n1": "required", "n2": "NONE", "n3": "unknown"}
    lines = plain(alloc).splitlines()
    assert lines[0].split()[:3] == ["DEVICE", "NODE", "ENFORCEMENT"]
    assert lines[-1].startswith(f"WARNING: node n2 ({DRIVER}) runs with enforcement: none")
    assert "NOT enforced" in lines[-1]
    assert not [line for line in plain(compute([slice_("n1", enforcement="required")], [])).splitlines()
                if line.startswith("WARNING")]


def test_live_table_and_json_show_the_mode() -> None:
    import json

    from rich.console import Console

    from dralab.monitor.top import as_json, table

    alloc = compute(_modes(), [])
    console = Console(record=True, width=220)
    console.print(table(alloc))
    text = console.export_text()
    assert "ENFORCEMENT" in text and "NONE" in text and "WARNING: node n2" in text
    doc = json.loads(as_json(alloc))
    assert {(n["node"], n["enforcement"]) for n in doc["nodes"]} == {("n1", "required"), ("n2", "none"),
                                                                       ("n3", "unknown")}
    assert {d["node"]: d["enforcement"] for d in doc["devices"]}["n2"] == "none"
