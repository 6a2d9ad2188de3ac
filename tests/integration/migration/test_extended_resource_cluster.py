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

from dralab.cluster.api import ClusterHandle, down, ensure_cluster
from dralab.cluster.components import EXTRA_GATES_ENV
from dralab.util import wait_for

pytestmark = pytest.mark.integration

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
def core(gated: ClusterHandle) -> Iterator[Any]:
    from kubernetes import config

    api_client = config.new_client_from_config(config_file=str(gated.kubeconfig))
    yield api_client
    api_client.close()


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


def test_both_paths(core: Any) -> None:
    from kubernetes import client

    v1 = client.CoreV1Api(core)
    custom = client.CustomObjectsApi(core)
    ns = "extres"
    try:
        v1.create_namespace({"metadata": {"name": ns}})
    except client.ApiException as exc:
        if exc.status != 409:
            raise
    dc = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": CLASS},
          "spec": {"extendedResourceName": RESOURCE, "selectors": [{"cel": {"expression": SELECTOR}}]}}
    try:
        custom.create_cluster_custom_object("resource.k8s.io", "v1", "deviceclasses", dc)
    except client.ApiException as exc:
        if exc.status != 409:
            raise
    stored = custom.get_cluster_custom_object("resource.k8s.io", "v1", "deviceclasses", CLASS)
    assert stored["spec"].get("extendedResourceName") == RESOURCE, "the apiserver dropped the field: gate off?"

    # 1. the claim path: dralab converts the pod and warns that the class exists
    def warned() -> list[str] | None:
        _, _, headers = v1.create_namespaced_pod_with_http_info(ns, _pod("converted", False), dry_run="All")
        text = headers.get("Warning") or ""
        return [text] if CLASS in text else None

    (warning,) = wait_for(warned, 60, "dralab's admission warning about the DeviceClass")
    assert "claim path" in warning and RESOURCE in warning
    created = v1.create_namespaced_pod(ns, _pod("converted", False))
    assert created.metadata.labels["hami.io/dra"] == "true"
    assert RESOURCE not in (created.spec.containers[0].resources.limits or {})
    assert created.spec.resource_claims[0].resource_claim_name.endswith("-app-ascend310p")

    # 2. the scheduler's path: an opted-out pod keeps huawei.com/Ascend310P and is served through the class
    plain = v1.create_namespaced_pod(ns, _pod("extended", True))
    assert plain.spec.containers[0].resources.limits[RESOURCE] == "1"
    assert not plain.spec.resource_claims
    pod = wait_for(lambda: (p := v1.read_namespaced_pod("extended", ns)).spec.node_name and p, 90,
                   "the opted-out pod scheduled through the DeviceClass")

    def scheduler_claim() -> dict[str, Any] | None:
        claims = custom.list_namespaced_custom_object("resource.k8s.io", "v1", ns, "resourceclaims")["items"]
        for c in claims:
            reserved = [r.get("name") for r in (c.get("status") or {}).get("reservedFor") or []]
            if "extended" in reserved and (c.get("status") or {}).get("allocation"):
                return c
        return None

    claim = wait_for(scheduler_claim, 60, "the scheduler's claim for the extended resource")
    labels = claim["metadata"].get("labels") or {}
    assert labels.get("app.kubernetes.io/managed-by") != "dralab"  # not dralab's: the scheduler made it
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    assert result["driver"] == "ascend.project-hami.io"
    assert pod.spec.node_name
