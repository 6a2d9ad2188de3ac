"""The kubelet stand-in against a small test driver on the cluster's node.

Prepare happens before the pod runs (the driver sees the pod still Pending), a failed prepare
keeps the pod from running and is reported as FailedPrepareDynamicResources until it succeeds,
and unprepare happens only once the pod is gone.
"""

from __future__ import annotations

import ipaddress
import json
import time
import uuid

import pytest
from kubernetes import client

from dralab.util import WaitTimeout, wait_for
from dralab_kit.cluster.standin.status import POD_CIDR
from dralab_kit.cluster.standin.testdriver import TestDriver

from ..helpers import GROUP, VERSION, claim_pod, claim_spec, device_class, node_slice, resource_claim

pytestmark = pytest.mark.integration


@pytest.fixture
def test_driver(cluster, k8s_client):
    """A registered test driver with one device on the first node, its slice and DeviceClass."""
    node = cluster.nodes[0]
    name = f"st-{uuid.uuid4().hex[:6]}.test.dralab.io"
    core = client.CoreV1Api(k8s_client)
    custom = client.CustomObjectsApi(k8s_client)

    def observe(method, claims):
        """What the driver can see of the pods when it is called."""
        pods = core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items
        return {p.metadata.name: p.status.phase for p in pods}

    driver = TestDriver(name, cluster.node_dir(node) / "registry", cluster.node_dir(node) / "plugins", on_call=observe)
    driver.start()
    custom.create_cluster_custom_object(GROUP, VERSION, "deviceclasses", device_class(name))
    devices = [{"name": f"dev-{i}"} for i in range(4)]
    custom.create_cluster_custom_object(GROUP, VERSION, "resourceslices", node_slice(name, node, devices))
    assert driver.registered.wait(15), f"the stand-in did not register {name}: {driver.registration_errors}"
    yield driver
    driver.stop()
    custom.delete_cluster_custom_object(GROUP, VERSION, "resourceslices", f"{name}-{node}")
    custom.delete_cluster_custom_object(GROUP, VERSION, "deviceclasses", name)


def _claim_spec(device_class_name: str) -> dict:
    return claim_spec(device_class_name, "req")


def _pod(name: str, source: dict) -> dict:
    return claim_pod(name, source, "dev")


def _phase(core, namespace: str, pod: str) -> str | None:
    try:
        return core.read_namespaced_pod(pod, namespace).status.phase
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def _gone(core, namespace: str, pod: str) -> bool:
    return _phase(core, namespace, pod) is None


def _records(cluster, claim_uid: str) -> list[dict]:
    path = cluster.records_path(cluster.nodes[0])
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if any(c["uid"] == claim_uid for c in r["claims"])]


def test_template_claim_prepared_before_running_unprepared_after_gone(cluster, k8s_client, namespace, test_driver):
    core = client.CoreV1Api(k8s_client)
    custom = client.CustomObjectsApi(k8s_client)
    custom.create_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        "resourceclaimtemplates",
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "tpl"},
         "spec": {"spec": _claim_spec(test_driver.name)}},
    )  # fmt: skip
    core.create_namespaced_pod(namespace, _pod("app", {"resourceClaimTemplateName": "tpl"}))
    wait_for(lambda: _phase(core, namespace, "app") == "Running", 60, "pod Running")
    pod = core.read_namespaced_pod("app", namespace)
    # started by the stand-in (KWOK starts only pods without claims): its address, the scheduler's condition kept
    assert ipaddress.ip_address(pod.status.pod_ip) in ipaddress.ip_network(POD_CIDR)
    conditions = {c.type: c.status for c in pod.status.conditions}
    assert conditions["PodScheduled"] == "True" and conditions["Ready"] == "True"
    claim_name = pod.status.resource_claim_statuses[0].resource_claim_name
    claim = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaims", claim_name)
    claim_uid = claim["metadata"]["uid"]
    assert claim["metadata"]["ownerReferences"][0]["uid"] == pod.metadata.uid

    prepares = [c for c in test_driver.calls_for(claim_uid) if c.method == "NodePrepareResources"]
    assert len(prepares) == 1
    assert prepares[0].note["app"] == "Pending", "prepare must happen before the pod runs"
    assert prepares[0].claims == [{"namespace": namespace, "uid": claim_uid, "name": claim_name}]

    core.delete_namespaced_pod("app", namespace, grace_period_seconds=0)
    wait_for(
        lambda: [c.method for c in test_driver.calls_for(claim_uid)][-1:] == ["NodeUnprepareResources"],
        60,
        "NodeUnprepareResources after the pod is gone",
    )
    unprepare = test_driver.calls_for(claim_uid)[-1]
    assert "app" not in unprepare.note, "unprepare must wait until the pod is gone"
    assert [c.method for c in test_driver.calls_for(claim_uid)] == ["NodePrepareResources", "NodeUnprepareResources"]

    # the template claim is owned by the pod: the garbage collector deletes it
    def claim_deleted() -> bool:
        try:
            custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaims", claim_name)
            return False
        except client.ApiException as exc:
            return exc.status == 404

    wait_for(claim_deleted, 60, "generated claim garbage-collected")

    # the stand-in appends its record after the driver's answer arrives, so the driver may have seen
    # the call before the line is written: wait for the second line, then check both
    wait_for(lambda: len(_records(cluster, claim_uid)) >= 2, 30, "the unprepare record written")
    records = _records(cluster, claim_uid)
    assert [r["call"] for r in records] == ["NodePrepareResources", "NodeUnprepareResources"]
    assert records[0]["pod"] == "app" and records[0]["namespace"] == namespace
    assert records[0]["driver"] == test_driver.name
    assert records[0]["cdiDeviceIDs"] == [f"test.dralab.io/dev={claim_uid}"]
    assert records[0]["error"] is None and records[1]["error"] is None


def test_failed_prepare_is_reported_and_retried(cluster, k8s_client, namespace, test_driver):
    core = client.CoreV1Api(k8s_client)
    custom = client.CustomObjectsApi(k8s_client)
    test_driver.fail["shared"] = "device is on fire"
    custom.create_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        "resourceclaims",
        resource_claim("shared", test_driver.name, "req"),
    )
    core.create_namespaced_pod(namespace, _pod("first", {"resourceClaimName": "shared"}))

    def failure_event():
        events = core.list_namespaced_event(namespace, field_selector="involvedObject.name=first").items
        return [e for e in events if e.reason == "FailedPrepareDynamicResources"]

    events = wait_for(failure_event, 60, "FailedPrepareDynamicResources event")
    assert "device is on fire" in events[0].message
    assert events[0].type == "Warning"
    wait_for(lambda: len(test_driver.calls) >= 2, 30, "a retry of the failed prepare")
    assert _phase(core, namespace, "first") == "Pending"

    test_driver.fail.clear()
    wait_for(lambda: _phase(core, namespace, "first") == "Running", 60, "pod Running after the driver recovers")

    # a second pod sharing the same claim adds a reference: no second prepare
    claim = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaims", "shared")
    uid = claim["metadata"]["uid"]
    core.create_namespaced_pod(namespace, _pod("second", {"resourceClaimName": "shared"}))
    wait_for(lambda: _phase(core, namespace, "second") == "Running", 60, "second pod Running")
    ok_prepares = [c for c in test_driver.calls_for(uid) if c.method == "NodePrepareResources"]

    core.delete_namespaced_pod("first", namespace, grace_period_seconds=0)
    wait_for(lambda: _gone(core, namespace, "first"), 60, "first pod gone")
    assert "NodeUnprepareResources" not in test_driver.methods(), "claim still used by the second pod"
    core.delete_namespaced_pod("second", namespace, grace_period_seconds=0)
    wait_for(lambda: "NodeUnprepareResources" in test_driver.methods(), 60, "unprepare after the last pod")
    assert [c.method for c in test_driver.calls_for(uid)].count("NodeUnprepareResources") == 1
    assert len([c for c in test_driver.calls_for(uid) if c.method == "NodePrepareResources"]) == len(ok_prepares)


@pytest.mark.slow
def test_slices_of_a_driver_gone_for_30s_are_removed(cluster, k8s_client, test_driver):
    custom = client.CustomObjectsApi(k8s_client)
    node = cluster.nodes[0]
    slice_name = f"{test_driver.name}-{node}"
    stopped = time.monotonic()
    test_driver.stop()

    def slice_gone() -> bool:
        try:
            custom.get_cluster_custom_object(GROUP, VERSION, "resourceslices", slice_name)
            return False
        except client.ApiException as exc:
            return exc.status == 404

    assert not slice_gone(), "the slice must survive a short outage"
    try:
        wait_for(slice_gone, 90, "the stand-in to remove the slices of the unreachable driver")
    except WaitTimeout:
        log = cluster.log_path(f"kubelet/{node}")
        lines = [line for line in log.read_text().splitlines() if test_driver.name in line] if log.exists() else []
        pytest.fail(f"the slice of {test_driver.name} is still published after 90 s; the stand-in's log ({log}) "
                    "says of it:\n" + "\n".join(lines[-20:]))
    # a grace period, not a speed: a driver restart must not cost its slices
    assert time.monotonic() - stopped >= 20, "slices were removed before the ~30 s grace period"
    # recreate it so the fixture's cleanup finds it
    custom.create_cluster_custom_object(GROUP, VERSION, "resourceslices", node_slice(test_driver.name, node, []))
