"""DRAExtendedResource next to dralab: a DeviceClass serving huawei.com/Ascend310P, both paths on one cluster.

Runs on a private cluster started with the gate (the shared one runs without it): a pod dralab
converts takes the claim path and its admission carries dralab's warning; an opted-out pod asking
for the same extended resource is served by kube-scheduler through the DeviceClass.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from dralab.kube import Kube
from dralab.kube.paths import claims_path, namespace_path, pods_path
from dralab.util import wait_for
from dralab.webhook.extended import DEVICE_CLASSES
from dralab_kit.cluster.api import ClusterHandle, down, ensure_cluster
from dralab_kit.cluster.components import EXTRA_GATES_ENV

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("extended-resource")]  # own cluster, one worker

CLUSTER = "dralab-extres"
CLASS = "ascend-extended"
RESOURCE = "huawei.com/Ascend310P"
SELECTOR = (
    'device.driver == "ascend.project-hami.io" && device.attributes["ascend.project-hami.io"].type == "HAMivNPUCore"'
)


@pytest.fixture(scope="module")
def gated(cluster) -> Iterator[ClusterHandle]:  # `cluster`: the binaries are built
    previous = os.environ.get(EXTRA_GATES_ENV)
    os.environ[EXTRA_GATES_ENV] = "DRAExtendedResource=true"
    try:
        handle = ensure_cluster(CLUSTER)
    finally:
        if previous is None:
            os.environ.pop(EXTRA_GATES_ENV, None)
        else:
            os.environ[EXTRA_GATES_ENV] = previous
    yield handle
    down(CLUSTER, keep_logs=True)


@pytest.fixture(scope="module")
def core(gated: ClusterHandle) -> Iterator[Kube]:
    with Kube.from_kubeconfig(gated.kubeconfig) as kube:
        yield kube


def _pod(name: str, opted_out: bool) -> dict[str, Any]:
    limits: dict[str, str] = {RESOURCE: "1"}
    if not opted_out:
        limits[f"{RESOURCE}-memory"] = "1024"
    meta: dict[str, Any] = {"name": name}
    if opted_out:
        meta["labels"] = {"dralab.io/convert": "false"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {
        "terminationGracePeriodSeconds": 0, "runtimeClassName": "ascend",
        "containers": [{"name": "app", "image": "busybox", "resources": {"limits": limits}}]}}


def dry_run_warning(kube: Kube, namespace: str, pod: dict[str, Any]) -> str:
    """The ``Warning`` header of a dry-run pod create (admission warnings travel only there)."""
    resp = kube.open("POST", pods_path(namespace), params={"dryRun": "All"}, body=pod)
    try:
        data = resp.data
    finally:
        resp.release_conn()
    assert resp.status == 201, (resp.status, data[:500])
    return str(resp.headers.get("Warning") or "")


def test_both_paths(core: Kube) -> None:
    ns = "extres"
    core.create(namespace_path(), {"metadata": {"name": ns}}, exist_ok=True)
    dc = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": CLASS},
          "spec": {"extendedResourceName": RESOURCE, "selectors": [{"cel": {"expression": SELECTOR}}]}}
    core.create(DEVICE_CLASSES, dc, exist_ok=True)
    stored = core.get(f"{DEVICE_CLASSES}/{CLASS}")
    assert stored["spec"].get("extendedResourceName") == RESOURCE, "the apiserver dropped the field: gate off?"

    # 1. the claim path: dralab converts the pod and warns that the class exists
    def warned() -> list[str] | None:
        text = dry_run_warning(core, ns, _pod("converted", False))
        return [text] if CLASS in text else None

    (warning,) = wait_for(warned, 60, "dralab's admission warning about the DeviceClass")
    assert "claim path" in warning and RESOURCE in warning
    created = core.create(pods_path(ns), _pod("converted", False))
    assert created["metadata"]["labels"]["hami.io/dra"] == "true"
    assert RESOURCE not in (created["spec"]["containers"][0]["resources"].get("limits") or {})
    assert created["spec"]["resourceClaims"][0]["resourceClaimName"].endswith("-app-ascend310p")

    # 2. the scheduler's path: an opted-out pod keeps huawei.com/Ascend310P and is served through the class
    plain = core.create(pods_path(ns), _pod("extended", True))
    assert plain["spec"]["containers"][0]["resources"]["limits"][RESOURCE] == "1"
    assert not plain["spec"].get("resourceClaims")
    pod = wait_for(lambda: (p := core.get(pods_path(ns, "extended")))["spec"].get("nodeName") and p, 90,
                   "the opted-out pod scheduled through the DeviceClass")

    def scheduler_claim() -> dict[str, Any] | None:
        for c in core.list(claims_path(ns))["items"]:
            reserved = [r.get("name") for r in (c.get("status") or {}).get("reservedFor") or []]
            if "extended" in reserved and (c.get("status") or {}).get("allocation"):
                return c
        return None

    claim = wait_for(scheduler_claim, 60, "the scheduler's claim for the extended resource")
    labels = claim["metadata"].get("labels") or {}
    assert labels.get("app.kubernetes.io/managed-by") != "dralab"  # not dralab's: the scheduler made it
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    assert result["driver"] == "ascend.project-hami.io"
    assert pod["spec"]["nodeName"]
