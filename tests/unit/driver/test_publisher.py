"""Slice publication against an in-memory API: generations, stale cleanup, owner, republish."""

from __future__ import annotations

import copy
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from dralab.driver.devices import BackendOptions
from dralab.driver.devices.fake import FakeBackend
from dralab.driver.publisher import SlicePublisher, needs_publish, project
from dralab.kube import KubeError
from dralab.kube.paths import node_path, slice_path
from dralab.model.vendors import load_vendor_table
from dralab.util import wait_for
from dralab_kit.fixtures.fakeapi import FakeKube, Key

from .conftest import node_api, published

NODE = "aio-node74-arm"


def server_defaults(key: Key, obj: dict) -> None:
    """What the apiserver adds to a slice's devices: fields the publisher never sent."""
    if key.resource == "resourceslices":
        obj["spec"]["devices"] = [{**d, "serverDefault": True} for d in obj["spec"]["devices"]]


def deleted(api: FakeKube) -> list[str]:
    return [p.rsplit("/", 1)[1] for p in api.paths("delete")]


@pytest.fixture
def setup(tmp_path: Path):
    table = load_vendor_table()
    backend = FakeBackend.from_options(BackendOptions(node=NODE, state_dir=tmp_path, dry_run=True))
    devices = backend.enumerate()
    api = node_api(NODE)
    api.on_store.append(server_defaults)
    box = {"devices": devices}
    pub = SlicePublisher(api, table.get("ascend"), NODE, lambda: box["devices"], resync_seconds=0.05)
    return api, pub, box


def test_first_publish_creates_generation_1_owned_by_node(setup) -> None:
    api, pub, _ = setup
    result = pub.publish_once()
    assert result.changed and result.generation == 1
    [slc] = published(api).values()
    assert slc["spec"]["pool"] == {"name": NODE, "generation": 1, "resourceSliceCount": 1}
    assert slc["metadata"]["ownerReferences"][0]["uid"] == "uid-node"
    assert slc["metadata"]["name"].startswith("aio-node74-arm-ascend.project-hami.io-")


def test_unchanged_devices_do_not_republish(setup) -> None:
    api, pub, _ = setup
    pub.publish_once()
    again = pub.publish_once()
    assert not again.changed and again.generation == 1
    assert len(published(api)) == 1 and deleted(api) == []


def test_change_bumps_generation_and_deletes_stale(setup) -> None:
    api, pub, box = setup
    pub.publish_once()
    old = set(published(api))
    box["devices"] = [replace(box["devices"][0], memory_bytes=1024 * 2**20)]
    result = pub.publish_once()
    assert result.changed and result.generation == 2
    [slc] = published(api).values()
    assert slc["spec"]["pool"]["generation"] == 2
    assert [d["name"] for d in slc["spec"]["devices"]] == ["npu-0-0"]
    assert set(deleted(api)) == old


def test_foreign_or_older_slices_are_cleaned_up(setup) -> None:
    api, pub, _ = setup
    pub.publish_once()
    [current] = published(api).values()
    stale = copy.deepcopy(current)
    stale["metadata"]["name"] = "stale"
    stale["spec"]["pool"]["generation"] = 0
    api.objects[slice_path("stale")] = stale
    result = pub.publish_once()
    assert result.changed and result.generation == 2
    slices = published(api)
    assert "stale" not in slices and len(slices) == 1


def test_missing_node_is_an_error(setup) -> None:
    api, pub, _ = setup
    del api.objects[node_path(NODE)]
    with pytest.raises(KubeError, match="does not exist"):
        pub.publish_once()


def test_run_republishes_after_deletion(setup) -> None:
    api, pub, _ = setup
    stop = threading.Event()
    thread = threading.Thread(target=pub.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_for(lambda: len(published(api)) == 1, 5, "first publish")
        for name in published(api):  # what the kubelet does at its start
            api.delete(slice_path(name))
        pub.trigger()
        wait_for(lambda: len(published(api)) == 1, 5, "republish")
        [slc] = published(api).values()
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
