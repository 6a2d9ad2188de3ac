"""Device taints and claim device status against the local cluster's real kube-apiserver.

- slice taints: a private driver (``--device-taints on``) whose fake device is marked unhealthy
  through its health file; where the apiserver has DRADeviceTaints on (1.36+, or 1.35 brought up
  with ``DRALAB_FEATURE_GATES=DRADeviceTaints=true``) it keeps the taint exactly as sent and drops
  it on recovery; where the gate is off it drops the taint and the driver publishes no new
  generations over it;
- claim status: after Prepare the claim's ``status.devices`` holds this driver's entry (server-side
  apply of the status subresource), another driver's entry stays, and a replaced claim refuses it.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from dralab.driver.cdi import ClaimRef
from dralab.driver.devices.fake import HEALTH_FILE
from dralab.driver.library import stub_library
from dralab.driver.proto import dra_v1_pb2, dra_v1_pb2_grpc
from dralab.driver.runner import DriverProcess, RunOptions
from dralab.driver.status import StatusUpdate, StatusWriter
from dralab.kube import Kube
from dralab.kube.paths import SLICES_PATH, claim_path
from dralab.util import wait_for
from dralab_kit.fixtures.driver_claims import lab20_claim

from ..helpers import resource_claim
from .test_driver_cluster import DEVICE_CLASS, DRIVER, _inventory, _slices

pytestmark = pytest.mark.integration

OTHER = "other.example.com"


@pytest.fixture
def kube(cluster) -> Iterator[Kube]:
    client = Kube.from_kubeconfig(cluster.kubeconfig)
    yield client
    client.close()


def _gate_on(kube: Kube, gate: str) -> bool:
    text = kube.text("/metrics")
    match = re.search(rf'kubernetes_feature_enabled\{{[^}}]*name="{gate}"[^}}]*\}} (\d)', text)
    assert match, f"the apiserver's /metrics has no kubernetes_feature_enabled for {gate}"
    return match[1] == "1"


class Driver:
    """A driver process of this test for a private Node object (nothing schedules onto it)."""

    def __init__(self, cluster, kube: Kube, noexecute_after: float | None = None) -> None:
        self.cluster, self.kube = cluster, kube
        self.node = f"it-hs-{uuid.uuid4().hex[:6]}"
        self.root = Path(tempfile.mkdtemp(prefix="ith", dir="/tmp"))
        kube.create("/api/v1/nodes", {"metadata": {"name": self.node, "labels": {"dralab.io/test": "driver"}}})
        lib = self.root / "lib" / "libvcore.so"
        lib.parent.mkdir()
        lib.write_bytes(stub_library())
        self.proc = DriverProcess(
            RunOptions(
                node=self.node,
                backend="fake",
                devices_file=str(_inventory(self.root, self.node)),
                kubeconfig=str(cluster.kubeconfig),
                plugin_dir=str(self.root / "p"),
                registry_dir=str(self.root / "r"),
                cdi_dir=str(self.root / "cdi"),
                state_dir=str(self.root / "s"),
                enforcement_library=str(lib),
                resync_seconds=1.0,
                device_taints="on",
                health_seconds=0.2,
                unhealthy_noexecute_after=noexecute_after,
            )
        ).start()

    def set_health(self, device: str, healthy: bool, reason: str = "xid-79") -> None:
        entries = {} if healthy else {device: {"healthy": False, "reason": reason}}
        (self.root / "s" / HEALTH_FILE).write_text(json.dumps(entries))

    def close(self) -> None:
        self.proc.stop()
        for item in _slices(self.kube, self.node):
            self.kube.delete(f"{SLICES_PATH}/{item['metadata']['name']}", missing_ok=True)
        self.kube.delete(f"/api/v1/nodes/{self.node}", missing_ok=True)
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def driver(cluster, kube) -> Iterator[Driver]:
    drv = Driver(cluster, kube)
    yield drv
    drv.close()


def _devices(kube: Kube, node: str) -> dict[str, dict] | None:
    items = _slices(kube, node)
    if len(items) != 1:
        return None
    return {d["name"]: d for d in items[0]["spec"]["devices"]}


def _single_generation(kube: Kube, node: str) -> int | None:
    """The pool's generation once it is one slice (no publish half done), else None."""
    items = _slices(kube, node)
    return int(items[0]["spec"]["pool"]["generation"]) if len(items) == 1 else None


def test_the_apiserver_takes_the_slice_taint_where_the_gate_is_on(driver: Driver, kube: Kube) -> None:
    wait_for(lambda: _devices(kube, driver.node), 30, "the driver's slice")
    driver.set_health("npu-0-0", healthy=False)
    if _gate_on(kube, "DRADeviceTaints"):
        devices = wait_for(
            lambda: (d := _devices(kube, driver.node)) and d["npu-0-0"].get("taints") and d, 30, "the taint"
        )
        [taint] = devices["npu-0-0"]["taints"]
        assert set(taint) == {"key", "value", "effect", "timeAdded"}
        assert (taint["key"], taint["value"], taint["effect"]) == ("dralab.io/unhealthy", "xid-79", "NoSchedule")
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", taint["timeAdded"])
        assert "taints" not in devices["npu-1-0"]
        generation = _single_generation(kube, driver.node)
        driver.set_health("npu-0-0", healthy=True)
        wait_for(
            lambda: (d := _devices(kube, driver.node)) and not any(x.get("taints") for x in d.values()),
            30,
            "the taint cleared",
        )
        assert generation is not None and _single_generation(kube, driver.node) == generation + 1
    else:
        # the gate is off: the apiserver drops the field, and the driver must not republish over it
        [publisher] = [s.publisher for s in driver.proc.served]
        wait_for(lambda: publisher.taint_decision().enabled is False, 30, "the driver noticing the dropped taints")
        # the decision flips mid-publish (after the create, before the older generation is deleted):
        # the pool is settled once it is one slice again, of the generation whose taints were dropped
        generation = wait_for(lambda: _single_generation(kube, driver.node), 30, "the tainted publish to finish")
        assert generation == 2  # 1: the first publish; 2: the one the apiserver stripped of its taint
        publisher.trigger()
        wait_for(lambda: not publisher._trigger.is_set(), 10, "a republish check")
        assert publisher.publish_once().changed is False
        assert _single_generation(kube, driver.node) == generation


def test_noexecute_after_the_configured_time(cluster, kube: Kube) -> None:
    if not _gate_on(kube, "DRADeviceTaints"):
        pytest.skip("DRADeviceTaints is off in this apiserver")
    drv = Driver(cluster, kube, noexecute_after=1.0)
    try:
        wait_for(lambda: _devices(kube, drv.node), 30, "the driver's slice")
        drv.set_health("npu-1-0", healthy=False, reason="gpu-lost")
        devices = wait_for(
            lambda: (d := _devices(kube, drv.node)) and d["npu-1-0"].get("taints", [{}])[0].get("effect") == "NoExecute"
            and d,
            30,
            "the NoExecute taint",
        )
        [taint] = devices["npu-1-0"]["taints"]
        assert (taint["key"], taint["value"]) == ("dralab.io/unhealthy", "gpu-lost")
    finally:
        drv.close()


def _allocated(kube: Kube, namespace: str, name: str, node: str) -> dict:
    """A claim allocated npu-0-0 of ``node`` for this driver and a device of another driver, with that
    driver's own status entry (written by another field manager)."""
    base = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims"
    made = kube.create(base, resource_claim(name, DEVICE_CLASS))
    status = lab20_claim(uid=made["metadata"]["uid"], name=name, namespace=namespace, node=node)["status"]
    status["allocation"]["devices"]["results"].append(
        {"request": "npu", "driver": OTHER, "pool": "other-pool", "device": "dev-0"}
    )
    made["status"] = status
    made = kube.request("PUT", f"{base}/{name}/status", body=made)
    made["status"]["devices"] = [{"driver": OTHER, "pool": "other-pool", "device": "dev-0", "data": {"mine": True}}]
    return kube.request("PUT", f"{base}/{name}/status", body=made, params={"fieldManager": "other-driver"})


def test_prepare_writes_this_drivers_status_entry_only(driver: Driver, kube: Kube, namespace: str) -> None:
    claim = _allocated(kube, namespace, "claim-s", driver.node)
    uid = claim["metadata"]["uid"]
    share = claim["status"]["allocation"]["devices"]["results"][0]["shareID"]
    with grpc.insecure_channel(f"unix://{driver.proc.served[0].server.paths.dra}") as ch:
        stub = dra_v1_pb2_grpc.DRAPluginStub(ch)
        ref = dra_v1_pb2.Claim(namespace=namespace, name="claim-s", uid=uid)
        resp = stub.NodePrepareResources(dra_v1_pb2.NodePrepareResourcesRequest(claims=[ref]), timeout=45)
        assert resp.claims[uid].error == ""

    def entries():
        got = (kube.get(claim_path(namespace, "claim-s")).get("status") or {}).get("devices") or []
        return got if any(e["driver"] == DRIVER for e in got) else None

    got = {e["driver"]: e for e in wait_for(entries, 30, "the driver's status.devices entry")}
    assert got[OTHER]["data"] == {"mine": True}  # the other driver's entry is untouched
    mine = got[DRIVER]
    assert (mine["pool"], mine["device"], mine["shareID"]) == (driver.node, "npu-0-0", share)
    assert mine["data"] == {"memoryMiB": 8192, "cores": 50, "profile": "hami-vnpu-core", "enforcement": "required"}
    [ready] = mine["conditions"]
    assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "True", "Prepared")
    managers = {m["manager"] for m in kube.get(claim_path(namespace, "claim-s"))["metadata"]["managedFields"]}
    assert f"dralab-{DRIVER}" in managers


def test_a_replaced_claim_refuses_the_old_uids_status(kube: Kube, namespace: str, cluster) -> None:
    node = "it-hs-none"
    claim = _allocated(kube, namespace, "claim-r", node)
    writer = StatusWriter(kube, backoff=0)
    entry = {"driver": DRIVER, "pool": node, "device": "npu-0-0",
             "shareID": claim["status"]["allocation"]["devices"]["results"][0]["shareID"], "data": {"x": 1}}
    stale = ClaimRef(namespace, "claim-r", "00000000-0000-4000-8000-000000000000")
    assert writer.write(StatusUpdate(DRIVER, stale, (entry,))) == "error"  # 422: metadata.uid is immutable
    assert all(e["driver"] != DRIVER for e in kube.get(claim_path(namespace, "claim-r"))["status"]["devices"])
    fresh = ClaimRef(namespace, "claim-r", claim["metadata"]["uid"])
    assert writer.write(StatusUpdate(DRIVER, fresh, (entry,))) == "ok"
    wrong = {**entry, "device": "npu-7-7"}  # not an allocated device: the apiserver refuses it
    assert writer.write(StatusUpdate(DRIVER, fresh, (wrong,))) == "error"
