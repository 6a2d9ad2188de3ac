"""The stand-in's pod sync against an in-memory API and a real test driver on unix sockets."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from dralab_kit.cluster.standin.plugins import PluginManager
from dralab_kit.cluster.standin.runner import FAILED_PREPARE, StandIn
from dralab_kit.cluster.standin.testdriver import TestDriver
from dralab_kit.fixtures.fakeapi import FakeKube

DRIVER = "t.example.io"


def _events(kube: FakeKube) -> list[dict[str, Any]]:
    return kube.list("/api/v1/namespaces/ns/events")["items"]


def _writes(kube: FakeKube) -> list[tuple[str, str]]:
    """(path, patch kind) of every pod write."""
    return [(c.path, c.patch) for c in kube.calls if c.verb == "patch" and "/pods/" in c.path]


def _stored_pod(kube: FakeKube, name: str) -> dict[str, Any]:
    return kube.objects[f"/api/v1/namespaces/ns/pods/{name}"]


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
    assert _writes(kube) == [("/api/v1/namespaces/ns/pods/p/status", "strategic")]
    written = _stored_pod(kube, "p")["status"]
    assert written["phase"] == "Running" and written["podIP"].startswith("10.64.")
    ready = {"type": "Ready", "status": "True", "lastTransitionTime": written["startTime"]}
    assert ready in written["conditions"]
    assert pod["spec"] == _stored_pod(kube, "p")["spec"]  # only the status subresource was written
    assert standin.checkpoint.claims["cu"].pods == {"pu": "p"}

    standin.sync("pu")  # already prepared: no second call, no second write
    assert driver.methods() == ["NodePrepareResources"]
    assert len(_writes(kube)) == 1

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
    events = _events(kube)
    assert [e["reason"] for e in events] == [FAILED_PREPARE]
    assert "no such device" in events[0]["message"] and events[0]["count"] == 2
    assert standin.failures["pu"] == 2
    assert _stored_pod(kube, "p")["status"]["phase"] == "Pending" and _writes(kube) == []  # not started
    assert standin._queued["pu"] > 0, "a retry is scheduled"
    assert _records(node_dir)[0]["error"].endswith("no such device")

    driver.fail.clear()
    standin.sync("pu")
    assert _stored_pod(kube, "p")["status"]["phase"] == "Running"
    assert "pu" not in standin.failures


def test_pod_not_reserved_is_refused(env):
    kube, driver, standin, _ = env
    kube.objects["/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c"] = _claim("c", "cu", ["someone-else"])
    _add_pod(kube, standin, _pod("p", "pu", "c"))
    standin.sync("pu")
    assert driver.methods() == []
    assert "not reserved" in _events(kube)[0]["message"]


def test_unregistered_driver_is_reported(env):
    kube, driver, standin, _ = env
    claim = _claim("c", "cu", ["pu"])
    claim["status"]["allocation"]["devices"]["results"][0]["driver"] = "other.example.io"
    kube.objects["/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c"] = claim
    _add_pod(kube, standin, _pod("p", "pu", "c"))
    standin.sync("pu")
    assert "other.example.io is not registered" in _events(kube)[0]["message"]
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


def test_a_pod_whose_claim_stays_unallocated_is_looked_at_less_often(env):
    """A pod stuck on a claim that is never allocated (kube-controller-manager's second claim) backs
    off; once the claim is allocated the pod is prepared and its count is gone."""
    kube, driver, standin, _ = env
    path = "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c"
    kube.objects[path] = {"metadata": {"name": "c", "namespace": "ns", "uid": "cu"}, "status": {}}
    _add_pod(kube, standin, _pod("p", "pu", "c"))
    delays = []
    for _ in range(7):
        before = time.monotonic()
        standin.sync("pu")
        delays.append(standin._queued.pop("pu") - before)  # taken off the queue, as the worker does
    assert standin.waits["pu"] == 7 and driver.methods() == []
    assert delays[0] < 1.0 and delays[-1] > 3.5, f"quick at first, then spread out: {delays}"
    kube.objects[path] = _claim("c", "cu", ["pu"])
    standin.sync("pu")
    assert driver.methods() == ["NodePrepareResources"] and "pu" not in standin.waits


def test_slices_of_an_unreachable_driver_are_removed(env):
    kube, driver, standin, _ = env
    driver.stop()
    standin.plugins.check_reachability(now=100.0)
    standin._cleanup_slices(now=100.0)
    assert [(c.path, c.params) for c in kube.calls if c.verb == "delete"] == [
        ("/apis/resource.k8s.io/v1/resourceslices", {"fieldSelector": f"spec.nodeName=n1,spec.driver={DRIVER}"})
    ]
    assert standin.plugins.get(DRIVER) is None, "a driver whose sockets are gone is forgotten"


def test_a_failed_slice_removal_is_tried_again_until_it_succeeds(env):
    """A DELETE refused once must not leave a gone driver's slices published for good."""
    kube, driver, standin, _ = env
    kube.fail("delete", path="/apis/resource.k8s.io/v1/resourceslices", nth=0)
    driver.stop()
    standin.plugins.check_reachability(now=100.0)

    def deletes() -> int:
        return len([c for c in kube.calls if c.verb == "delete"])

    standin._cleanup_slices(now=100.0)
    assert deletes() == 1 and standin.plugins.get(DRIVER) is not None, "kept until its slices are removed"
    standin._cleanup_slices(now=100.5)
    assert deletes() == 1, "a retry waits for its backoff (1 s after the first failure)"
    standin._cleanup_slices(now=101.0)
    assert deletes() == 2 and standin.plugins.get(DRIVER) is None


def test_start_removes_the_node_slices_as_the_real_kubelet_does(env):
    kube, _driver, standin, _ = env
    standin._note_existing_slices()
    deletes = [(c.path, c.params) for c in kube.calls if c.verb == "delete"]
    assert ("/apis/resource.k8s.io/v1/resourceslices", {"fieldSelector": "spec.nodeName=n1"}) in deletes


def test_a_restarted_stand_in_leaves_a_started_pod_alone_and_keeps_its_address(env):
    kube, driver, standin, node_dir = env
    kube.objects["/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c"] = _claim("c", "cu", ["pu"])
    pod = _pod("p", "pu", "c")
    _add_pod(kube, standin, pod)
    standin.sync("pu")
    restarted = StandIn("n1", kube, node_dir)
    restarted.plugins.scan()
    restarted._listed([_stored_pod(kube, "p")], "2")  # what the first list of the new process delivers
    restarted.sync("pu")
    assert driver.methods() == ["NodePrepareResources"] and len(_writes(kube)) == 1
    assert restarted.ips.get("another") != _stored_pod(kube, "p")["status"]["podIP"]


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


def test_a_driver_the_status_did_not_reach_stays_registered_as_the_kubelet_keeps_it(tmp_path: Path) -> None:
    """The kubelet keeps a plugin whose NotifyRegistrationStatus failed: the driver may have had it all the
    same (a late reply), and a driver the node forgot would keep its slices published after it stops."""
    node_dir = tmp_path / "n1"
    manager = PluginManager(node_dir / "registry")

    def refuse(ok: bool) -> None:
        raise RuntimeError("status not delivered")

    driver = TestDriver(DRIVER, node_dir / "registry", node_dir / "plugins", on_notify=refuse).start()
    try:
        assert manager.scan() == [DRIVER]
        assert manager.get(DRIVER) is not None and not driver.registered.is_set()
        assert manager.scan() == [], "registered once, not again on every scan"
    finally:
        driver.stop()


def test_an_idle_queue_waits_for_work_or_stop_without_polling(tmp_path: Path) -> None:
    """``_next`` sleeps until ``enqueue`` or ``stop`` wakes it (no timed polling: hundreds of idle
    nodes in one fleet process), and a due item is handed out in order."""
    import threading

    standin = StandIn("n1", FakeKube(), tmp_path / "n1")
    got: list[str | None] = []
    waiting = threading.Thread(target=lambda: got.append(standin._next()))
    waiting.start()
    standin.enqueue("uid-1")
    waiting.join(10)
    assert got == ["uid-1"]
    stopped = threading.Thread(target=lambda: got.append(standin._next()))
    stopped.start()
    standin.stop()
    stopped.join(10)
    assert got == ["uid-1", None] and not stopped.is_alive()


def test_stand_ins_started_together_resync_spread_over_the_period(tmp_path: Path, monkeypatch) -> None:
    """The first resync waits a random part of the period, the next ones the whole period."""
    import threading

    from dralab_kit.cluster.standin import runner

    standin = StandIn("n1", FakeKube(), tmp_path / "n1", resync_seconds=100.0)
    monkeypatch.setattr(runner, "spread_start", lambda period: period * 0.25)
    waits: list[float] = []

    def wait(seconds: float) -> bool:
        waits.append(seconds)
        return len(waits) > 2  # stop after three waits

    monkeypatch.setattr(standin.stopping, "wait", wait)
    listed = threading.Event()
    monkeypatch.setattr(standin, "_list_pods", listed.set)
    standin._resync_loop()
    assert waits == [25.0, 100.0, 100.0] and listed.is_set()
