"""Device health as DRA device taints: slice rendering, the health-to-taint decision, the gate, the backends."""

from __future__ import annotations

import json
import logging
import shutil
import types
from dataclasses import replace
from pathlib import Path

import pytest

from dralab.driver import health
from dralab.driver.devices import BackendOptions, Health
from dralab.driver.devices.ascend import AscendBackend, parse_health, recorded_runner
from dralab.driver.devices.fake import HEALTH_FILE, FakeBackend, read_health_file
from dralab.driver.health import (
    NO_EXECUTE,
    NO_SCHEDULE,
    TAINT_KEY,
    HealthMonitor,
    HealthTracker,
    Unhealthy,
    label_value,
    taints_decision,
    taints_for,
    timestamp,
)
from dralab.driver.publisher import SlicePublisher
from dralab.driver.slices import build_slices
from dralab.model.vendors import load_vendor_table
from dralab.versions import server_version
from dralab_kit.fixtures.fakeapi import FakeKube, Key
from dralab_kit.fixtures.logs import kept_records

from .conftest import node_api, published
from .test_nvidia import GPUS, fake_nvml

NODE = "aio-node74-arm"
FIXTURES = Path(__file__).parent / "fixtures" / "npu-smi"
T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z


class Clock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def records():
    """Log records of dralab.driver.* (dralab's loggers do not propagate to pytest's caplog)."""
    with kept_records("dralab.driver", logging.INFO) as got:
        yield got


def _fake(tmp_path: Path, node: str = NODE, devices: str | None = None) -> FakeBackend:
    return FakeBackend.from_options(BackendOptions(node=node, state_dir=tmp_path, devices_file=devices, dry_run=True))


# -- slices --------------------------------------------------------------------------------------


def test_a_tainted_device_carries_its_taints_and_the_others_none(tmp_path: Path) -> None:
    table = load_vendor_table()
    devices = _fake(tmp_path).enumerate()
    taint = {"key": TAINT_KEY, "value": "xid-79", "effect": NO_SCHEDULE, "timeAdded": "2026-01-01T00:00:00Z"}
    [slice_] = build_slices(table.get("ascend"), NODE, devices, taints={"npu-0-0": [taint], "npu-1-0": []})
    by_name = {d["name"]: d for d in slice_["spec"]["devices"]}
    assert by_name["npu-0-0"]["taints"] == [taint]
    assert "taints" not in by_name["npu-1-0"]
    [untainted] = build_slices(table.get("ascend"), NODE, devices)
    assert all("taints" not in d for d in untainted["spec"]["devices"])


def test_a_pool_with_taints_holds_at_most_64_devices_per_slice(tmp_path: Path) -> None:
    table = load_vendor_table()
    [one] = _fake(tmp_path).enumerate()[:1]
    many = [replace(one, name=f"npu-{i}-0", index=i) for i in range(100)]
    assert len(build_slices(table.get("ascend"), NODE, many)) == 1  # 128 per slice without taints
    taint = taints_for(Unhealthy(T0, "x"), T0, None)
    chunks = build_slices(table.get("ascend"), NODE, many, taints={"npu-3-0": taint})
    assert [len(s["spec"]["devices"]) for s in chunks] == [64, 36]
    assert {s["spec"]["pool"]["resourceSliceCount"] for s in chunks} == {2}


# -- health to taints ------------------------------------------------------------------------------


def test_unhealthy_is_noschedule_since_first_seen_and_recovery_clears_it() -> None:
    clock = Clock()
    tracker = HealthTracker(clock=clock)
    assert tracker.update({"gpu-0": Health(), "gpu-1": Health()}) == []
    assert tracker.taints() == {}
    changed = tracker.update({"gpu-0": Health(False, "xid-79"), "gpu-1": Health()})
    assert changed == [("gpu-0", Health(False, "xid-79"))]
    expected = [{"key": TAINT_KEY, "value": "xid-79", "effect": NO_SCHEDULE, "timeAdded": "2026-01-01T00:00:00Z"}]
    assert tracker.taints() == {"gpu-0": expected}
    clock.now += 3600  # without noexecute_after it stays NoSchedule, and its time does not move
    assert tracker.update({"gpu-0": Health(False, "xid-79")}) == []
    assert tracker.taints(["gpu-0", "gpu-1"]) == {"gpu-0": expected}
    assert tracker.update({}) == []  # a failed query says nothing: the device keeps its state
    assert tracker.taints() == {"gpu-0": expected}
    assert tracker.update({"gpu-0": Health()}) == [("gpu-0", Health())]
    assert tracker.taints() == {}


def test_noexecute_after_the_configured_time_with_an_injected_clock() -> None:
    clock = Clock()
    tracker = HealthTracker(noexecute_after=300, clock=clock)
    tracker.update({"gpu-0": Health(False, "gpu-lost")})
    assert tracker.taints()["gpu-0"][0]["effect"] == NO_SCHEDULE
    clock.now += 299
    assert tracker.taints()["gpu-0"][0]["effect"] == NO_SCHEDULE
    clock.now += 1
    [taint] = tracker.taints()["gpu-0"]
    assert taint == {"key": TAINT_KEY, "value": "gpu-lost", "effect": NO_EXECUTE, "timeAdded": timestamp(T0 + 300)}
    # a new reason keeps the device's first time: it has been unhealthy since then
    tracker.update({"gpu-0": Health(False, "xid-48")})
    assert tracker.unhealthy()["gpu-0"] == Unhealthy(T0, "xid-48")
    assert tracker.taints()["gpu-0"][0]["effect"] == NO_EXECUTE
    assert HealthTracker(noexecute_after=0).noexecute_after is None  # 0: off


def test_taint_values_are_label_values() -> None:
    assert label_value("Alarm 80E18005") == "Alarm-80E18005"
    assert label_value("  -x/y_z.  ") == "x-y_z"
    assert len(label_value("a" * 100)) == 63
    assert "value" not in taints_for(Unhealthy(T0, "!!!"), T0, None)[0]
    assert timestamp(T0 + 0.9) == "2026-01-01T00:00:00Z"  # whole seconds, as the apiserver keeps them


def test_the_monitor_republishes_on_changes_and_on_escalation_only() -> None:
    clock = Clock()
    report = {"gpu-0": Health(), "gpu-1": Health()}
    calls: list[int] = []
    seen: list[tuple[str, bool]] = []
    monitor = HealthMonitor(
        lambda: dict(report), HealthTracker(noexecute_after=60, clock=clock), lambda: calls.append(1),
        on_report=lambda name, h: seen.append((name, h.healthy)),
    )
    assert not monitor.poll()
    report["gpu-0"] = Health(False, "injected")
    assert monitor.poll() and len(calls) == 1 and seen == [("gpu-0", False)]
    assert not monitor.poll()
    clock.now += 60  # NoSchedule becomes NoExecute: the slice must change
    assert monitor.poll() and len(calls) == 2
    report["gpu-0"] = Health()
    assert monitor.poll() and len(calls) == 3 and seen[-1] == ("gpu-0", True)


# -- the gate --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "version", "enabled"),
    [
        ("auto", "v1.35.4", False),  # alpha, off by default
        ("auto", "v1.36.3", True),  # beta, on
        ("auto", "v1.37.2", True),  # GA
        ("auto", None, False),
        ("auto", "v1.30.0", False),  # older than dralab supports: no gate to trust
        ("on", "v1.35.4", True),  # the operator says the cluster enables it
        ("on", None, True),
        ("off", "v1.37.2", False),
    ],
)
def test_gate_decision_per_version(mode: str, version: str | None, enabled: bool) -> None:
    decision = taints_decision(mode, version)
    assert decision.enabled is enabled and decision.why


def test_the_1_35_decision_says_how_to_turn_it_on() -> None:
    assert "--device-taints on" in taints_decision("auto", "v1.35.4").why
    with pytest.raises(ValueError):
        taints_decision("sometimes", "v1.36.3")


def test_server_version_from_get_version() -> None:
    assert server_version({"gitVersion": "v1.35.4"}) == "v1.35.4"
    assert server_version({"gitVersion": "v1.36.3-rc.1+abc"}) == "v1.36.3"
    assert server_version({"gitVersion": "weird"}) is None
    assert server_version({}) is None


# -- publication -------------------------------------------------------------------------------------


def slice_api(version: str, drops_taints: bool = False) -> FakeKube:
    """The node's apiserver at ``version``; ``drops_taints``: one whose DRADeviceTaints gate is off."""
    api = node_api(NODE, version=version)

    def drop_taints(key: Key, obj: dict) -> None:
        for device in obj["spec"]["devices"] if key.resource == "resourceslices" else []:
            device.pop("taints", None)

    if drops_taints:
        api.on_store.append(drop_taints)
    return api


def _publisher(tmp_path: Path, api: FakeKube, tracker: HealthTracker, mode: str = "auto") -> SlicePublisher:
    devices = _fake(tmp_path).enumerate()
    return SlicePublisher(
        api, load_vendor_table().get("ascend"), NODE, lambda: devices, taints=tracker.taints, taint_mode=mode
    )


def _published_taints(api: FakeKube) -> dict[str, list]:
    return {d["name"]: d["taints"] for s in published(api).values() for d in s["spec"]["devices"] if d.get("taints")}


def test_publisher_taints_on_1_36_and_clears_on_recovery(tmp_path: Path) -> None:
    api, tracker = slice_api("v1.36.3"), HealthTracker(clock=Clock())
    pub = _publisher(tmp_path, api, tracker)
    assert pub.publish_once().generation == 1
    assert api.paths("get").count("/version") == 0  # no unhealthy device: no need to know the version
    tracker.update({"npu-0-0": Health(False, "injected")})
    result = pub.publish_once()
    assert result.changed and result.generation == 2
    assert _published_taints(api) == {"npu-0-0": tracker.taints()["npu-0-0"]}
    assert not pub.publish_once().changed  # stable: timeAdded does not move
    tracker.update({"npu-0-0": Health()})
    assert pub.publish_once().changed and _published_taints(api) == {}
    assert api.paths("get").count("/version") == 1


def test_publisher_on_1_35_keeps_the_device_and_says_so_once(tmp_path: Path, records) -> None:
    api, tracker = slice_api("v1.35.4"), HealthTracker(clock=Clock())
    pub = _publisher(tmp_path, api, tracker)
    tracker.update({"npu-0-0": Health(False, "injected")})
    pub.publish_once()
    pub.publish_once()
    assert _published_taints(api) == {}
    assert len([r for r in records if "taints unavailable" in r.getMessage()]) == 1
    on = _publisher(tmp_path, slice_api("v1.35.4"), tracker, mode="on")  # the cluster enables the gate
    on.publish_once()
    assert set(_published_taints(on.client)) == {"npu-0-0"}


def test_an_apiserver_that_drops_taints_causes_no_churn(tmp_path: Path, records) -> None:
    api, tracker = slice_api("v1.35.4", drops_taints=True), HealthTracker(clock=Clock())
    pub = _publisher(tmp_path, api, tracker, mode="on")
    tracker.update({"npu-0-0": Health(False, "injected")})
    assert pub.publish_once().generation == 1
    assert any("dropped the device taints" in r.getMessage() for r in records)
    assert not pub.publish_once().changed
    assert not pub.publish_once().changed


# -- backends ----------------------------------------------------------------------------------------


def test_fake_backend_reads_the_fault_file(tmp_path: Path) -> None:
    backend = _fake(tmp_path, node="gpu-node-0", devices="nvidia-gpus")
    assert backend.health() == {"gpu-0": Health(), "gpu-1": Health()}
    (tmp_path / HEALTH_FILE).write_text(json.dumps({"gpu-0": {"healthy": False, "reason": "xid-79"}}))
    assert backend.health() == {"gpu-0": Health(False, "xid-79"), "gpu-1": Health()}
    (tmp_path / HEALTH_FILE).write_text("{not json")
    assert backend.health() == {}  # unreadable: nothing changes
    assert read_health_file(tmp_path / "absent.json") == {}


def test_ascend_health_levels() -> None:
    ok = "        Health Status                  : OK\n        Error Code                     : NA\n"
    assert parse_health(ok) == Health()
    assert parse_health(ok.replace("OK", "Warning")) == Health()
    alarm = "        Health Status                  : Alarm\n        Error Code                     : 80E18005\n"
    assert parse_health(alarm) == Health(False, "npu-alarm-80E18005")
    assert parse_health("Health Status : Critical\nError Code : 80CB8009 80E01801 80A2800F\n") == Health(
        False, "npu-critical-80CB8009-80E01801"
    )
    assert parse_health("Health Status : Unknownish\n") is None
    assert parse_health("no such key\n") is None


def test_ascend_backend_queries_each_chip(tmp_path: Path) -> None:
    folder = tmp_path / "npu-smi"
    shutil.copytree(FIXTURES, folder)
    ok = "\tHealth Status                  : OK\n\tError Code                     : NA\n"
    (folder / "info_-t_health_-i_4_-c_0.txt").write_text(ok)
    (folder / "info_-t_health_-i_5_-c_0.txt").write_text(ok.replace("OK", "Alarm").replace("NA", "80E18005"))
    backend = AscendBackend(run=recorded_runner(folder), vendor=load_vendor_table().get("ascend"))
    names = [d.name for d in backend.enumerate()]
    report = backend.health()
    assert report == {names[0]: Health(), names[1]: Health(False, "npu-alarm-80E18005")}
    (folder / "info_-t_health_-i_5_-c_0.txt").unlink()  # the query fails: that chip says nothing
    assert backend.health() == {names[0]: Health()}


def _nvml_with_events(events: list, lost: set[int] | None = None) -> types.ModuleType:
    nvml = fake_nvml()
    lost = set() if lost is None else lost
    registered: list[int] = []

    class Lost(nvml.NVMLError):
        value = 15

    class Timeout(nvml.NVMLError):
        value = 10

    def by_uuid(uuid: str) -> int:
        index = [g[0] for g in GPUS].index(uuid)
        if index in lost:
            raise Lost("GPU is lost")
        return index

    def wait(event_set, timeout_ms: int):
        assert timeout_ms == 0
        if not events:
            raise Timeout("Timeout")
        handle, xid = events.pop(0)
        return types.SimpleNamespace(device=handle, eventType=0x8, eventData=xid)

    nvml.nvmlDeviceGetHandleByUUID = by_uuid
    nvml.nvmlEventSetCreate = lambda: "set"
    nvml.nvmlDeviceRegisterEvents = lambda handle, types_, event_set: registered.append(handle)
    nvml.nvmlEventSetWait = wait
    nvml.nvmlEventTypeXidCriticalError = 0x8
    nvml.NVML_ERROR_TIMEOUT = 10
    nvml.NVML_ERROR_GPU_IS_LOST = 15
    nvml.registered = registered
    return nvml


def test_nvidia_health_from_xid_events_and_lost_gpus(tmp_path: Path) -> None:
    from dralab.driver.devices.nvidia import NvidiaBackend

    events: list = []
    lost: set[int] = set()
    nvml = _nvml_with_events(events, lost)
    backend = NvidiaBackend(nvml=nvml, vendor=load_vendor_table().get("nvidia"), cdi_dirs=(str(tmp_path),))
    backend.enumerate()
    assert backend.health() == {"gpu-0": Health(), "gpu-1": Health()}
    assert nvml.registered == [0, 1]
    events += [(0, 13), (1, 43)]  # application XIDs: the GPUs are fine
    assert backend.health() == {"gpu-0": Health(), "gpu-1": Health()}
    events.append((1, 79))  # fallen off the bus
    assert backend.health() == {"gpu-0": Health(), "gpu-1": Health(False, "xid-79")}
    assert backend.health()["gpu-1"] == Health(False, "xid-79")  # sticky until the driver restarts
    lost.add(0)
    assert backend.health()["gpu-0"] == Health(False, "gpu-lost")
    assert nvml.state["init"] == 1  # the XID watch keeps NVML open; discovery's own init/shutdown balanced


def test_health_module_names_are_stable() -> None:
    assert health.TAINT_KEY == "dralab.io/unhealthy" and health.TAINT_MODES == ("auto", "on", "off")
