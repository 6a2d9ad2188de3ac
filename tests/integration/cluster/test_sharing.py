"""The real kube-scheduler shares one multi-allocatable device by consumable capacity.

A hand-written ResourceSlice (its own driver name, so no node driver is involved) offers one
device with Lab 20's capacities; claims of 8Gi and 50 cores share it with distinct shareIDs
until the cores run out.
"""

from __future__ import annotations

import pytest
from kubernetes import client

from dralab.util import wait_for

from ..helpers import GROUP, VERSION, allocation, claim_pod, resource_claim

pytestmark = pytest.mark.integration


def _claim(name: str, device_class_name: str) -> dict:
    return resource_claim(name, device_class_name, count=1, capacity={"memory": "8Gi", "cores": "50"})


def _pod(name: str, claim_name: str) -> dict:
    return claim_pod(name, {"resourceClaimName": claim_name})


def _allocation(custom, namespace: str, claim_name: str) -> dict | None:
    return allocation(custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaims", claim_name))


def _scheduling_message(core, namespace: str, pod: str) -> str:
    events = core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={pod}").items
    return " | ".join(e.message or "" for e in events if e.reason == "FailedScheduling")


def test_two_claims_share_one_device_third_waits(cluster, k8s_client, namespace, shared_device):
    core = client.CoreV1Api(k8s_client)
    custom = client.CustomObjectsApi(k8s_client)
    for i in (1, 2, 3):
        custom.create_namespaced_custom_object(
            GROUP, VERSION, namespace, "resourceclaims", _claim(f"claim-{i}", shared_device)
        )
    for i in (1, 2):
        core.create_namespaced_pod(namespace, _pod(f"pod-{i}", f"claim-{i}"))
    allocs = [
        wait_for(lambda i=i: _allocation(custom, namespace, f"claim-{i}"), 60, f"claim-{i} allocated") for i in (1, 2)
    ]
    results = [a["devices"]["results"][0] for a in allocs]
    assert {r["device"] for r in results} == {"npu-0-0"}
    assert {r["driver"] for r in results} == {shared_device}
    share_ids = [r.get("shareID") for r in results]
    assert all(share_ids) and share_ids[0] != share_ids[1], share_ids
    for r in results:
        assert r["consumedCapacity"] == {"memory": "8Gi", "cores": "50"}

    core.create_namespaced_pod(namespace, _pod("pod-3", "claim-3"))
    message = wait_for(
        lambda: (
            "cannot allocate all claims" in _scheduling_message(core, namespace, "pod-3")
            and _scheduling_message(core, namespace, "pod-3")
        ),
        60,
        "pod-3 to fail scheduling with 'cannot allocate all claims'",
    )
    assert "cannot allocate all claims" in message
    assert core.read_namespaced_pod("pod-3", namespace).spec.node_name is None
    assert _allocation(custom, namespace, "claim-3") is None

    core.delete_namespaced_pod("pod-1", namespace, grace_period_seconds=0)
    third = wait_for(lambda: _allocation(custom, namespace, "claim-3"), 90, "claim-3 allocated after pod-1 is gone")
    result = third["devices"]["results"][0]
    assert result["device"] == "npu-0-0"
    assert result["shareID"] not in share_ids
    node = wait_for(lambda: core.read_namespaced_pod("pod-3", namespace).spec.node_name, 60, "pod-3 bound")
    assert node == cluster.nodes[0]
