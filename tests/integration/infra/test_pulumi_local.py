"""A real `pulumi preview / up / up / destroy` of infra/ (profile local) against a local cluster.

The runs go through the Pulumi Automation API (dralab_kit.pulumi.runner) with the CLI dralab builds;
the same CLI also runs the program the way a normal Pulumi install does (`pulumi preview` in a
copy of infra/, then `pulumi up` and `destroy` there), and both must plan the same resources.

The shared cluster bootstraps the same RuntimeClass and DeviceClasses the program manages, and a
destroy would take them away from every other test; so this runs on a cluster of its own (same
binaries, brought up next to the shared one and taken down afterwards), from which those objects
are first removed: `up` must create them and `destroy` must leave none.

The Pulumi CLI and provider are built from their Go modules on first use (tens of minutes cold).
Durations are printed and attached to the JUnit report (record_property), never asserted.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dralab.config import load_config
from dralab.model.objects import device_classes
from dralab.util import wait_for
from dralab_kit.cluster.api import ClusterHandle, down, ensure_cluster
from dralab_kit.cluster.objects import object_path
from dralab_kit.pulumi import runner, toolchain

# A cold machine builds the Pulumi CLI and provider inside the first fixture: allow for it.
pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.timeout(3600),
    pytest.mark.xdist_group("infra-cluster"),  # one cluster per module, taken down at its end: one worker
]

INFRA_CLUSTER = os.environ.get("DRALAB_INFRA_TEST_CLUSTER", "infra-it")
STACK = "it-local"


@pytest.fixture(scope="module")
def pulumi_tools() -> None:
    """The built CLI and provider (built once per machine; concurrent builds wait on a lock)."""
    if toolchain.missing_tools():
        toolchain.build_tools(progress=False)


@pytest.fixture(scope="module")
def infra_cluster(cluster: ClusterHandle) -> Iterator[ClusterHandle]:
    """A local cluster of this module's own (the shared one guarantees the binaries are built)."""
    handle = ensure_cluster(INFRA_CLUSTER)
    yield handle
    down(INFRA_CLUSTER)


def _planned_objects(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Kubernetes objects (apiVersion, kind, metadata) that a preview plans to create."""
    objects = []
    for step in steps:
        if step.get("op") != "create" or not str(step.get("type", "")).startswith("kubernetes:"):
            continue
        inputs = step.get("inputs") or {}
        meta = inputs.get("metadata") or {}
        if inputs.get("apiVersion") and inputs.get("kind") and meta.get("name"):
            objects.append({"apiVersion": inputs["apiVersion"], "kind": inputs["kind"], "metadata": meta})
    return objects


def _present(handle: ClusterHandle, objects: list[dict[str, Any]]) -> list[str]:
    kube = handle.kube()
    try:
        return [object_path(o) for o in objects if kube.get(object_path(o), missing_ok=True) is not None]
    finally:
        kube.close()


def _remove(handle: ClusterHandle, objects: list[dict[str, Any]]) -> None:
    kube = handle.kube()
    try:
        for obj in objects:
            kube.delete(object_path(obj), missing_ok=True)
    finally:
        kube.close()
    wait_for(lambda: not _present(handle, objects), 120, "pre-existing objects to be deleted")


def _tree_digest(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` (caches aside): a run must leave infra/ as it found it."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def _resource_ids(urns: list[str]) -> set[str]:
    """URNs without their stack and project (``type$type::name``), comparable across stacks."""
    return {urn.split("::", 2)[2] for urn in urns if "pulumi:pulumi:Stack::" not in urn}


def test_preview_up_noop_destroy(pulumi_tools, infra_cluster: ClusterHandle, tmp_path, record_property) -> None:
    infra_before = _tree_digest(runner.default_infra_dir())
    target = runner.prepare_target(profile="local", stack=STACK, cluster=INFRA_CLUSTER, state=tmp_path / "pulumi")
    timings: dict[str, float] = {}

    preview = runner.run_action("preview", target, capture=True)
    assert preview.returncode == 0, preview.output[-4000:]
    timings["preview"] = preview.seconds
    components = [s for s in preview.steps if s["type"] == "dralab:profiles:Local"]
    assert [s["op"] for s in components] == ["create"], preview.steps
    objects = _planned_objects(preview.steps)
    kinds = {(o["kind"], o["metadata"]["name"]) for o in objects}
    assert ("RuntimeClass", "ascend") in kinds, sorted(kinds)
    for dc in device_classes(load_config(None).vendors):
        assert ("DeviceClass", dc["metadata"]["name"]) in kinds, sorted(kinds)
    assert any(kind == "Namespace" for kind, _ in kinds), sorted(kinds)
    assert preview.changes.get("create", 0) >= len(objects)

    # The cluster bootstrapped some of these itself: take them away so `up` has to create them.
    _remove(infra_cluster, objects)

    first = runner.run_action("up", target, capture=True)
    assert first.returncode == 0, first.output[-4000:]
    timings["up"] = first.seconds
    assert first.changes.get("create", 0) == preview.changes.get("create"), first.changes
    assert first.outputs["runtimeClass"] == "ascend", first.outputs
    assert _present(infra_cluster, objects) == [object_path(o) for o in objects]
    kube = infra_cluster.kube()
    try:
        rc = kube.get("/apis/node.k8s.io/v1/runtimeclasses/ascend", missing_ok=True)
        assert rc["handler"] == "ascend"
        for obj in objects:
            live = kube.get(object_path(obj), missing_ok=True)
            for key, value in (obj["metadata"].get("labels") or {}).items():
                assert live["metadata"]["labels"].get(key) == value, (object_path(obj), key)
    finally:
        kube.close()

    second = runner.run_action("up", target, capture=True)
    assert second.returncode == 0, second.output[-4000:]
    timings["up (no changes)"] = second.seconds
    assert not runner.has_changes(second.changes), second.changes
    assert second.changes.get("same", 0) == first.changes.get("create"), second.changes

    gone = runner.run_action("destroy", target, capture=True)
    assert gone.returncode == 0, gone.output[-4000:]
    timings["destroy"] = gone.seconds
    assert gone.changes.get("delete", 0) == first.changes.get("create"), gone.changes
    start = time.monotonic()
    wait_for(lambda: not _present(infra_cluster, objects), 120, "destroyed objects to disappear")
    timings["destroy settled"] = gone.seconds + time.monotonic() - start

    for name, seconds in timings.items():
        record_property(f"pulumi {name} seconds", round(seconds, 2))
    print("pulumi timings (s): " + ", ".join(f"{k} {v:.1f}" for k, v in timings.items()))
    assert _tree_digest(runner.default_infra_dir()) == infra_before  # no stack file or salt written there


def test_plain_pulumi_runs_the_same_program(pulumi_tools, infra_cluster: ClusterHandle, tmp_path) -> None:
    """`pulumi preview` and `pulumi up` in infra/ as with a normal install (the CLI's own project and
    stack files): the preview plans what the Automation API run plans, with the same CLI."""
    target = runner.prepare_target(profile="local", stack="it-auto", cluster=INFRA_CLUSTER, state=tmp_path / "pulumi")
    automated = runner.run_action("preview", target, capture=True)
    assert automated.returncode == 0, automated.output[-4000:]

    copy = tmp_path / "infra"  # the CLI writes the stack file (salt) into the project: a copy takes it
    shutil.copytree(runner.default_infra_dir(), copy, ignore=shutil.ignore_patterns("__pycache__"))
    env = {**target.env, "PULUMI_CONFIG_PASSPHRASE": runner.DEFAULT_PASSPHRASE}

    def pulumi(*args: str) -> subprocess.CompletedProcess:
        cmd = [str(toolchain.pulumi_path()), *args, "--non-interactive"]
        return subprocess.run(cmd, cwd=copy, env=env, capture_output=True, text=True, timeout=600, check=False)

    init = pulumi("stack", "init", "it-plain", "--secrets-provider", "passphrase")
    assert init.returncode == 0, init.stderr
    plain = pulumi("preview", "--json", "--stack", "it-plain")
    assert plain.returncode == 0, (plain.stdout + plain.stderr)[-4000:]
    steps = json.loads(plain.stdout)["steps"]
    assert _resource_ids([s["urn"] for s in steps]) == _resource_ids([s["urn"] for s in automated.steps])
    assert (copy / "Pulumi.it-plain.yaml").is_file()  # the plain CLI keeps its stack file beside the program
    up = pulumi("up", "--yes", "--stack", "it-plain")
    try:
        assert up.returncode == 0, (up.stdout + up.stderr)[-4000:]
        assert "runtimeClass" in up.stdout and "error:" not in up.stdout, up.stdout[-4000:]
    finally:
        gone = pulumi("destroy", "--yes", "--stack", "it-plain")
        assert gone.returncode == 0, (gone.stdout + gone.stderr)[-4000:]


def test_stacks_from_before_the_components_are_adopted_in_place(
    pulumi_tools, infra_cluster: ClusterHandle, tmp_path
) -> None:
    """A stack whose resources sit at its root (as before the per-profile components) is taken over by
    today's program without a create, delete or replace: the children's aliases match the old URNs."""
    flat = tmp_path / "flat-infra"
    shutil.copytree(runner.default_infra_dir(), flat, ignore=shutil.ignore_patterns("__pycache__"))
    component = flat / "dralab_infra" / "component.py"
    owned = '{"parent": self, "aliases": list(FORMER_PLACE), **options}'
    assert owned in component.read_text()
    component.write_text(component.read_text().replace(owned, "dict(options)"))  # children at the root
    state = tmp_path / "pulumi"
    old = runner.prepare_target(profile="local", stack="it-adopt", cluster=INFRA_CLUSTER, infra_dir=flat, state=state)
    before = runner.run_action("up", old, capture=True)
    assert before.returncode == 0, before.output[-4000:]
    assert before.changes.get("create", 0) > 1, before.changes
    new = runner.prepare_target(profile="local", stack="it-adopt", cluster=INFRA_CLUSTER, state=state)
    try:
        after = runner.run_action("up", new, capture=True)
        assert after.returncode == 0, after.output[-4000:]
        assert set(after.changes) == {"same"}, after.changes
        assert after.changes["same"] == before.changes["create"], (before.changes, after.changes)
    finally:
        gone = runner.run_action("destroy", new, capture=True)
        assert gone.returncode == 0, gone.output[-4000:]
