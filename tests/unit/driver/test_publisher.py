"""Slice publication against an in-memory API: generations, stale cleanup, owner, republish."""

from __future__ import annotations

import copy
import itertools
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from dralab.driver.devices import BackendOptions
from dralab.driver.devices.fake import FakeBackend
from dralab.driver.publisher import SlicePublisher, needs_publish, project
from dralab.kube import KubeError
from dralab.kube.paths import SLICES_PATH
from dralab.model.vendors import load_vendor_table
from dralab.util import wait_for

NODE = "aio-node74-arm"


class FakeApi:
    """Just enough of the apiserver for ResourceSlices and Nodes."""

    def __init__(self, nodes: dict[str, str]) -> None:
        self.nodes = nodes
        self.slices: dict[str, dict] = {}
        self.counter = itertools.count()
        self.deleted: list[str] = []
        self.lock = threading.Lock()

    def get(self, path: str, missing_ok: bool = False):
        assert path.startswith("/api/v1/nodes/") and missing_ok
        name = path.rsplit("/", 1)[1]
        return {"metadata": {"name": name, "uid": self.nodes[name]}} if name in self.nodes else None

    def list(self, path: str, field_selector: str):
        assert path == SLICES_PATH
        wanted = dict(kv.split("=") for kv in field_selector.split(","))
        with self.lock:
            items = [
                copy.deepcopy(s)
                for s in self.slices.values()
                if s["spec"]["nodeName"] == wanted["spec.nodeName"] and s["spec"]["driver"] == wanted["spec.driver"]
            ]
        return {"items": items}

    def create(self, path: str, body: dict) -> dict:
        obj = copy.deepcopy(body)
        name = obj["metadata"].pop("generateName") + f"x{next(self.counter)}"
        obj["metadata"]["name"] = name
        obj["spec"]["devices"] = [{**d, "serverDefault": True} for d in obj["spec"]["devices"]]  # server adds fields
        with self.lock:
            self.slices[name] = obj
        return copy.deepcopy(obj)

    def delete(self, path: str, missing_ok: bool = False) -> bool:
        name = path.rsplit("/", 1)[1]
        with self.lock:
            self.deleted.append(name)
            return self.slices.pop(name, None) is not None


@pytest.fixture
def setup(tmp_path: Path):
    table = load_vendor_table()
    backend = FakeBackend.from_options(BackendOptions(node=NODE, state_dir=tmp_path, dry_run=True))
    devices = backend.enumerate()
    api = FakeApi({NODE: "uid-node"})
    box = {"devices": devices}
    pub = SlicePublisher(api, table.get("ascend"), NODE, lambda: box["devices"], resync_seconds=0.05)
    return api, pub, box


def test_first_publish_creates_generation_1_owned_by_node(setup) -> None:
    api, pub, _ = setup
    result = pub.publish_once()
    assert result.changed and result.generation == 1
    [slc] = api.slices.values()
    assert slc["spec"]["pool"] == {"name": NODE, "generation": 1, "resourceSliceCount": 1}
    assert slc["metadata"]["ownerReferences"][0]["uid"] == "uid-node"
    assert slc["metadata"]["name"].startswith("aio-node74-arm-ascend.project-hami.io-")


def test_unchanged_devices_do_not_republish(setup) -> None:
    api, pub, _ = setup
    pub.publish_once()
    again = pub.publish_once()
    assert not again.changed and again.generation == 1
    assert len(api.slices) == 1 and api.deleted == []


def test_change_bumps_generation_and_deletes_stale(setup) -> None:
    api, pub, box = setup
    pub.publish_once()
    old = set(api.slices)
    box["devices"] = [replace(box["devices"][0], memory_bytes=1024 * 2**20)]
    result = pub.publish_once()
    assert result.changed and result.generation == 2
    [slc] = api.slices.values()
    assert slc["spec"]["pool"]["generation"] == 2
    assert [d["name"] for d in slc["spec"]["devices"]] == ["npu-0-0"]
    assert set(api.deleted) == old


def test_foreign_or_older_slices_are_cleaned_up(setup) -> None:
    api, pub, _ = setup
    pub.publish_once()
    [current] = api.slices.values()
    stale = copy.deepcopy(current)
    stale["metadata"]["name"] = "stale"
    stale["spec"]["pool"]["generation"] = 0
    api.slices["stale"] = stale
    result = pub.publish_once()
    assert result.changed and result.generation == 2
    assert "stale" not in api.slices and len(api.slices) == 1


def test_missing_node_is_an_error(setup) -> None:
    api, pub, _ = setup
    api.nodes.clear()
    with pytest.raises(KubeError, match="does not exist"):
        pub.publish_once()


def test_run_republishes_after_deletion(setup) -> None:
    api, pub, _ = setup
    stop = threading.Event()
    thread = threading.Thread(target=pub.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_for(lambda: len(api.slices) == 1, 5, "first publish")
        api.slices.clear()  # what the kubelet does at its start
        pub.trigger()
        wait_for(lambda: len(api.slices) == 1, 5, "republish")
        [slc] = api.slices.values()
        assert slc["spec"]["pool"]["generation"] == 1  # nothing left to be newer than
    finally:
        stop.set()
        thread.join(5)


def test_needs_publish_and_projection() -> None:
    desired = [{"metadata": {}, "spec": {"pool": {"name": "n", "generation": 1}, "devices": [{"name": "a"}]}}]
    current = [{"metadata": {}, "spec": {"pool": {"name": "n", "generation": 3}, "devices": [{"name": "a", "x": 1}]}}]
    assert needs_publish(current, desired, "n") == (False, 3)
    assert needs_publish([], desired, "n") == (True, 0)
    other_pool = [{"metadata": {}, "spec": {"pool": {"name": "old", "generation": 5}, "devices": []}}]
    assert needs_publish(current + other_pool, desired, "n") == (True, 3)
    assert project({"a": 1, "b": {"c": 2, "d": 3}}, {"b": {"c": 0}}) == {"b": {"c": 2}}
