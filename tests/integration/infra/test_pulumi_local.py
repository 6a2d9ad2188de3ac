"""A real `pulumi preview / up / up / destroy` of infra/ (profile local) against a local cluster.

The shared cluster bootstraps the same RuntimeClass and DeviceClasses the program manages, and a
destroy would take them away from every other test; so this runs on a cluster of its own (same
binaries, brought up next to the shared one and taken down afterwards), from which those objects
are first removed: `up` must create them and `destroy` must leave none.

The Pulumi CLI and provider are built from their Go modules on first use (tens of minutes cold).
Durations are printed and attached to the JUnit report (record_property), never asserted.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import pytest

from dralab import infra_cli
from dralab.cluster.api import ClusterHandle, down, ensure_cluster
from dralab.cluster.objects import object_path
from dralab.config import load_config
from dralab.model.objects import device_classes
from dralab.util import wait_for

# A cold machine builds the Pulumi CLI and provider inside the first fixture: allow for it.
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(3600)]

INFRA_CLUSTER = os.environ.get("DRALAB_INFRA_TEST_CLUSTER", "infra-it")
STACK = "it-local"


@pytest.fixture(scope="module")
def pulumi_tools() -> None:
    """The built CLI and provider (built once per machine; concurrent builds wait on a lock)."""
    if infra_cli.missing_tools():
        infra_cli.build_tools(progress=False)


@pytest.fixture(scope="module")
def infra_cluster(cluster: ClusterHandle) -> Iterator[ClusterHandle]:
    """A local cluster of this module's own (the shared one guarantees the binaries are built)."""
    handle = ensure_cluster(INFRA_CLUSTER)
    yield handle
    down(INFRA_CLUSTER)


def _planned_objects(preview: dict[str, Any]) -> list[dict[str, Any]]:
    """Kubernetes objects (apiVersion, kind, metadata) that a preview plans to create."""
    objects = []
    for step in preview.get("steps") or []:
        state = step.get("newState") or {}
        if step.get("op") != "create" or not str(state.get("type", "")).startswith("kubernetes:"):
            continue
        if state.get("type") == "pulumi:providers:kubernetes":
            continue
        inputs = state.get("inputs") or {}
        meta = inputs.get("metadata") or {}
        if inputs.get("apiVersion") and inputs.get("kind") and meta.get("name"):
            objects.append({"apiVersion": inputs["apiVersion"], "kind": inputs["kind"], "metadata": meta})
    return objects


def _present(handle: ClusterHandle, objects: list[dict[str, Any]]) -> list[str]:
    kube = handle.kube()
    try:
        return [object_path(o) for o in objects if kube.get(object_path(o)) is not None]
    finally:
        kube.close()


def _remove(handle: ClusterHandle, objects: list[dict[str, Any]]) -> None:
    kube = handle.kube()
    try:
        for obj in objects:
            kube.delete(object_path(obj))
    finally:
        kube.close()
    wait_for(lambda: not _present(handle, objects), 120, "pre-existing objects to be deleted")


def test_preview_up_noop_destroy(pulumi_tools, infra_cluster: ClusterHandle, tmp_path, record_property) -> None:
    target = infra_cli.prepare_target(profile="local", stack=STACK, cluster=INFRA_CLUSTER, state=tmp_path / "pulumi")
    timings: dict[str, float] = {}

    preview = infra_cli.run_action("preview", target, capture=True)
    assert preview.returncode == 0, preview.output[-4000:]
    timings["preview"] = preview.seconds
    objects = _planned_objects(preview.preview or {})
    kinds = {(o["kind"], o["metadata"]["name"]) for o in objects}
    assert ("RuntimeClass", "ascend") in kinds, sorted(kinds)
    for dc in device_classes(load_config(None).vendors):
        assert ("DeviceClass", dc["metadata"]["name"]) in kinds, sorted(kinds)
    assert any(kind == "Namespace" for kind, _ in kinds), sorted(kinds)
    assert preview.changes.get("create", 0) >= len(objects)

    # The cluster bootstrapped some of these itself: take them away so `up` has to create them.
    _remove(infra_cluster, objects)

    first = infra_cli.run_action("up", target, capture=True)
    assert first.returncode == 0, first.output[-4000:]
    timings["up"] = first.seconds
    assert first.changes.get("create", 0) == preview.changes.get("create"), first.changes
    assert _present(infra_cluster, objects) == [object_path(o) for o in objects]
    kube = infra_cluster.kube()
    try:
        rc = kube.get("/apis/node.k8s.io/v1/runtimeclasses/ascend")
        assert rc["handler"] == "ascend"
        for obj in objects:
            live = kube.get(object_path(obj))
            for key, value in (obj["metadata"].get("labels") or {}).items():
                assert live["metadata"]["labels"].get(key) == value, (object_path(obj), key)
    finally:
        kube.close()

    second = infra_cli.run_action("up", target, capture=True)
    assert second.returncode == 0, second.output[-4000:]
    timings["up (no changes)"] = second.seconds
    assert not infra_cli.has_changes(second.changes), second.changes
    assert second.changes.get("same", 0) == first.changes.get("create"), second.changes

    gone = infra_cli.run_action("destroy", target, capture=True)
    assert gone.returncode == 0, gone.output[-4000:]
    timings["destroy"] = gone.seconds
    assert gone.changes.get("delete", 0) == first.changes.get("create"), gone.changes
    start = time.monotonic()
    wait_for(lambda: not _present(infra_cluster, objects), 120, "destroyed objects to disappear")
    timings["destroy settled"] = gone.seconds + time.monotonic() - start

    for name, seconds in timings.items():
        record_property(f"pulumi {name} seconds", round(seconds, 2))
    print("pulumi timings (s): " + ", ".join(f"{k} {v:.1f}" for k, v in timings.items()))
