"""The stand-in's pod sync against an in-memory API and a real test driver on unix sockets."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from dralab_kit.cluster.standin.plugins import PluginManager
from dralab_kit.cluster.standin.runner import FAILED_PREPARE, StandIn
from dralab_kit.cluster.standin.testdriver import TestDriver

DRIVER = "t.example.io"


class FakeKube:
    """Just enough of the REST client: objects by path, events created, patches applied."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []
        self.deleted: list[tuple[str, dict]] = []
        self.writes: list[tuple[str, str]] = []  # (path, patch kind) of every pod write

    def get(self, path: str, params=None, missing_ok: bool = False):
        obj = self.objects.get(path)
        assert obj or missing_ok
        return copy.deepcopy(obj) if obj else None

    def list(self, path: str, **kw):
        return {"items": [], "metadata": {"resourceVersion": "1"}}

    def list_all(self, path: str, **kw):
        return [], "1"

    def patch(self, path: str, body: dict, kind: str = "merge", **kw):
        if "/events/" in path:
            name = path.rsplit("/", 1)[1]
            event = next(e for e in self.events if e["metadata"]["name"] == name)
            event.update(body)
            return event
        self.writes.append((path, kind))
        if path.endswith("/status"):  # the status subresource: only the status changes
            obj = self.objects[path.removesuffix("/status")]
            obj.setdefault("status", {}).update(body["status"])
            return obj
        obj = self.objects[path]
        obj["metadata"].setdefault("annotations", {}).update(body["metadata"]["annotations"])
        return obj

    def create(self, path: str, body: dict, exist_ok: bool = False):
        assert path.endswith("/events")
        event = copy.deepcopy(body)
        event["metadata"]["name"] = f"ev-{len(self.events)}"
        self.events.append(event)
        return event

    def delete(self, path: str, params=None, **kw):
        self.deleted.append((path, params or {}))
        return True


def _claim(name: str, uid: str, pod_uids: list[str]) -> dict:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": uid},
        "status": {
            "allocation": {"devices": {"results": [{"driver": DRIVER, "pool": "n1", "device": "dev-0"}]}},
            "reservedFor": [{"resource": "pods", "uid": u} for u in pod_uids],
        },
    }


def _pod(name: str, uid: str, claim: str) -> dict:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": uid},
        "spec": {"nodeName": "n1", "resourceClaims": [{"name": "dev", "resourceClaimName": claim}]},
        "status": {"phase": "Pending"},
    }


@pytest.fixture
def env(tmp_path: Path):
    node_dir = tmp_path / "n1"
    kube = FakeKube()
    driver = TestDriver(DRIVER, node_dir / "registry", node_dir / "plugins").start()
    standin = StandIn("n1", kube, node_dir, slice_cleanup_seconds=0.0)
    assert standin.plugins.scan() == [DRIVER]
    assert driver.registered.wait(5)
    yield kube, driver, standin, node_dir
    driver.stop()


def _add_pod(kube: FakeKube, standin: StandIn, pod: dict) -> None:
    kube.objects[f"/api/v1/namespaces/ns/pods/{pod['metadata']['name']}"] = pod
    standin.pods[pod["metadata"]["uid"]] = pod


def _records(node_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (node_dir / "kubelet-records.jsonl").read_text().splitlines()]


def test_prepare_then_unprepare_when_the_pod_is_gone(env):
    kube, driver, standin, node_dir = env
    kube.objects["/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c"] = _claim("c", "cu", ["pu"])
    pod = _pod("p", "pu", "c")
    _add_pod(kube, standin, pod)

    standin.sync("pu")
    assert driver.methods() == ["NodePrepareResources"]
    assert driver.calls[0].claims == [{"namespace": "ns", "uid": "cu", "name": "c"}]
    # started like a kubelet starts it: one status write, after the prepare
    assert kube.writes == [("/api/v1/namespaces/ns/pods/p/status", "strategic")]
    assert pod["status"]["phase"] == "Running" and pod["status"]["podIP"].startswith("10.64.")
    ready = {"type": "Ready", "status": "True", "lastTransitionTime": pod["status"]["startTime"]}
    assert ready in pod["status"]["conditions"]
    assert standin.checkpoint.claims["cu"].pods == {"pu": "p"}

    standin.sync("pu")  # already prepared: no second call, no second write
    assert driver.methods() == ["NodePrepareResources"]
    assert len(kube.writes) == 1

    del standin.pods["pu"]
    standin.sync("pu")
    assert driver.methods() == ["NodePrepareResources", "NodeUnprepareResources"]
    assert standin.checkpoint.claims == {}
    records = _records(node_dir)
    assert [r["call"] for r in records] == ["NodePrepareResources", "NodeUnprepareResources"]
    assert records[0]["cdiDeviceIDs"] == ["test.dralab.io/dev=cu"]
    assert records[1]["pod"] == "p" and records[1]["podUID"] == "pu"


def test_checkpoint_survives_a_restart(env, tmp_path):
    kube, driver, standin, node_dir = env
    kube.objects["/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c"] = _claim("c", "cu", ["pu"])
    _add_pod(kube, standin, _pod("p", "pu", "c"))
    standin.sync("pu")
    restarted = StandIn("n1", kube, node_dir)
    restarted.plugins.scan()
    assert restarted.checkpoint.claims["cu"].pods == {"pu": "p"}
    restarted.sync("pu")  # the pod is unknown to the new process: it is gone
    assert driver.methods()[-1] == "NodeUnprepareResources"


def test_failure_is_an_event_with_backoff_then_success(env):
    kube, driver, standin, node_dir = env
    kube.objects["/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c"] = _claim("c", "cu", ["pu"])
    pod = _pod("p", "pu", "c")
    _add_pod(kube, standin, pod)
    driver.fail["c"] = "no such device"

    standin.sync("pu")
    standin.sync("pu")
    assert [e["reason"] for e in kube.events] == [FAILED_PREPARE]
    assert "no such device" in kube.events[0]["message"] and kube.events[0]["count"] == 2
    assert standin.failures["pu"] == 2
    assert pod["status"]["phase"] == "Pending" and kube.writes == []  # not started while prepare fails
    assert standin._queued["pu"] > 0, "a retry is scheduled"
    assert _records(node_dir)[0]["error"].endswith("no such device")

    driver.fail.clear()
    standin.sync("pu")
    assert pod["status"]["phase"] == "Running"
    assert "pu" not in standin.failures


def test_pod_not_reserved_is_refused(env):
    kube, driver, standin, _ = env
    kube.objects["/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c"] = _claim("c", "cu", ["someone-else"])
    _add_pod(kube, standin, _pod("p", "pu", "c"))
    standin.sync("pu")
    assert driver.methods() == []
    assert "not reserved" in kube.events[0]["message"]


def test_unregistered_driver_is_reported(env):
    kube, driver, standin, _ = env
    claim = _claim("c", "cu", ["pu"])
    claim["status"]["allocation"]["devices"]["results"][0]["driver"] = "other.example.io"
    kube.objects["/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c"] = claim
    _add_pod(kube, standin, _pod("p", "pu", "c"))
    standin.sync("pu")
    assert "other.example.io is not registered" in kube.events[0]["message"]
    assert driver.methods() == []


def test_shared_claim_unprepared_after_the_last_pod(env):
    kube, driver, standin, _ = env
    kube.objects["/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c"] = _claim("c", "cu", ["p1", "p2"])
    _add_pod(kube, standin, _pod("a", "p1", "c"))
    _add_pod(kube, standin, _pod("b", "p2", "c"))
    standin.sync("p1")
    standin.sync("p2")
    assert driver.methods() == ["NodePrepareResources"]
    del standin.pods["p1"]
    standin.sync("p1")
    assert driver.methods() == ["NodePrepareResources"]
    del standin.pods["p2"]
    standin.sync("p2")
    assert driver.methods() == ["NodePrepareResources", "NodeUnprepareResources"]


def test_slices_of_an_unreachable_driver_are_removed(env):
    kube, driver, standin, _ = env
    driver.stop()
    standin.plugins.check_reachability(now=100.0)
    standin._cleanup_slices(now=100.0)
    assert kube.deleted == [
        ("/apis/resource.k8s.io/v1/resourceslices", {"fieldSelector": f"spec.nodeName=n1,spec.driver={DRIVER}"})
    ]
    assert standin.plugins.get(DRIVER) is None, "a driver whose sockets are gone is forgotten"


def test_start_removes_the_node_slices_as_the_real_kubelet_does(env):
    kube, _driver, standin, _ = env
    standin._note_existing_slices()
    assert ("/apis/resource.k8s.io/v1/resourceslices", {"fieldSelector": "spec.nodeName=n1"}) in kube.deleted


def test_a_restarted_stand_in_leaves_a_started_pod_alone_and_keeps_its_address(env):
    kube, driver, standin, node_dir = env
    kube.objects["/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c"] = _claim("c", "cu", ["pu"])
    pod = _pod("p", "pu", "c")
    _add_pod(kube, standin, pod)
    standin.sync("pu")
    restarted = StandIn("n1", kube, node_dir)
    restarted.plugins.scan()
    restarted._listed([pod], "2")  # what the first list of the new process delivers
    restarted.sync("pu")
    assert driver.methods() == ["NodePrepareResources"] and len(kube.writes) == 1
    assert restarted.ips.get("another") != pod["status"]["podIP"]


def test_calls_reuse_one_connection_and_reach_a_restarted_driver(env):
    """The channel is kept across calls; after the driver restarts on the same socket the next prepare
    gets through (a broken channel is dropped after its error, the retry connects afresh)."""
    kube, driver, standin, node_dir = env
    for i in (1, 2):
        path = f"/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c{i}"
        kube.objects[path] = _claim(f"c{i}", f"cu{i}", [f"pu{i}"])
    _add_pod(kube, standin, _pod("p1", "pu1", "c1"))
    standin.sync("pu1")
    channel = standin.plugins.get(DRIVER).channel
    assert channel is not None
    driver.stop()
    again = TestDriver(DRIVER, node_dir / "registry", node_dir / "plugins").start()
    try:
        _add_pod(kube, standin, _pod("p2", "pu2", "c2"))
        standin.sync("pu2")
        if "pu2" in standin.failures:  # the old connection failed once: dropped, the retry reconnects
            assert standin.plugins.get(DRIVER).channel is None
            standin.sync("pu2")
        assert again.methods() == ["NodePrepareResources"] and "pu2" not in standin.failures
    finally:
        again.stop()


def test_a_driver_told_it_is_registered_can_be_called_at_once(tmp_path: Path) -> None:
    """As the kubelet: the plugin is recorded before NotifyRegistrationStatus (a fleet's pods came within
    that window and were told the driver was not registered)."""
    node_dir = tmp_path / "n1"
    manager = PluginManager(node_dir / "registry")
    callable_when_told: list[bool] = []
    driver = TestDriver(DRIVER, node_dir / "registry", node_dir / "plugins",
                        on_notify=lambda ok: callable_when_told.append(manager.get(DRIVER) is not None)).start()
    try:
        assert manager.scan() == [DRIVER]
        assert callable_when_told == [True]
    finally:
        driver.stop()


def test_a_driver_the_status_never_reached_is_not_registered(tmp_path: Path) -> None:
    node_dir = tmp_path / "n1"
    manager = PluginManager(node_dir / "registry")

    def refuse(ok: bool) -> None:
        raise RuntimeError("status not delivered")

    driver = TestDriver(DRIVER, node_dir / "registry", node_dir / "plugins", on_notify=refuse).start()
    try:
        assert manager.scan() == []
        assert manager.get(DRIVER) is None and not driver.registered.is_set()
    finally:
        driver.stop()
