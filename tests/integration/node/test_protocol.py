"""The DRA protocol as the real kubelet speaks it, seen through the tap's records.

dralab's driver serves plugin registration (GetInfo, NotifyRegistrationStatus) and the DRA
service in v1 and v1beta1 (NodePrepareResources, NodeUnprepareResources). The real kubelet 1.35.4:

- registers the driver (GetInfo, then NotifyRegistrationStatus with plugin_registered=true);
- picks v1 and never calls v1beta1;
- prepares a claim once: a second pod using a claim prepared already only adds a reference (as
  the stand-in does), and NodeUnprepareResources comes once, after the last pod is gone. Pods
  created together may each call NodePrepareResources for the same claim before the first call
  has returned (seen: two calls for two pods applied at once); the stand-in's single worker never
  does, the driver answers the repeat like the first call;
- sends nothing our schema does not know, and the requests name claims only (no pod).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import grpc
import pytest

from dralab.driver.proto import dra_v1_pb2 as pb
from dralab.kube import Kube
from dralab.util import wait_for
from dralab_kit.cluster.api import ClusterHandle

from .node_helpers import pod, wait_gone, wait_running

pytestmark = pytest.mark.integration

DRIVER = "ascend.project-hami.io"
V1 = "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/"


def _records(handle: ClusterHandle) -> list[dict]:
    path = Path(handle.records_path(str(handle.state["realNode"])))
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _claim_calls(handle: ClusterHandle, uid: str) -> list[str]:
    return [r["method"] for r in _records(handle) if any(c["uid"] == uid for c in r.get("claims") or [])]


def test_real_kubelet_calls_every_method_dralab_serves(node_cluster: ClusterHandle, kube: Kube, ns: str) -> None:
    claims = f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims"
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "shared"},
        "spec": {"devices": {"requests": [{"name": "npu", "exactly": {
            "deviceClassName": "hami-vnpu-core.project-hami.io", "allocationMode": "ExactCount", "count": 1,
            "capacity": {"requests": {"memory": "1Gi", "cores": "10"}}}}]}},
    }  # fmt: skip
    uid = kube.create(claims, claim)["metadata"]["uid"]
    for name in ("first", "second"):  # one after the other: the second finds the claim prepared
        spec = pod(name, "sleep 3600", resourceClaims=[{"name": "npu", "resourceClaimName": "shared"}])
        spec["spec"]["containers"][0]["resources"] = {"claims": [{"name": "npu"}]}
        kube.create(f"/api/v1/namespaces/{ns}/pods", spec)
        wait_running(kube, ns, name)

    registration = [r for r in _records(node_cluster) if r["driver"] == DRIVER and r["method"].startswith("/plugin")]
    assert {r["call"] for r in registration} == {"GetInfo", "NotifyRegistrationStatus"}
    assert all(
        r["request"] == {"pluginRegistered": True} for r in registration if r["call"] == "NotifyRegistrationStatus"
    )

    # one Prepare for the claim, on v1, answered with the claim's CDI device
    prepares = [
        r for r in _records(node_cluster) if r["call"] == "NodePrepareResources" and r["claims"][0]["uid"] == uid
    ]
    assert [r["method"] for r in prepares] == [V1 + "NodePrepareResources"]
    assert prepares[0]["cdiDeviceIDs"] == [f"k8s.ascend.project-hami.io/npu={uid}"]
    assert prepares[0]["claims"] == [{"namespace": ns, "name": "shared", "uid": uid}]

    kube.delete(f"/api/v1/namespaces/{ns}/pods/first", missing_ok=True)
    wait_gone(kube, f"/api/v1/namespaces/{ns}/pods/first")
    assert V1 + "NodeUnprepareResources" not in _claim_calls(node_cluster, uid), "still used by the second pod"
    kube.delete(f"/api/v1/namespaces/{ns}/pods/second", missing_ok=True)
    wait_for(
        lambda: V1 + "NodeUnprepareResources" in _claim_calls(node_cluster, uid), 60, "Unprepare after the last pod"
    )
    assert _claim_calls(node_cluster, uid).count(V1 + "NodeUnprepareResources") == 1

    everything = _records(node_cluster)
    assert not [r for r in everything if "v1beta1" in r["method"]], "the kubelet chose v1"
    assert not [r for r in everything if r.get("unknownFields")], "fields outside dralab's schema"
    assert not [r for r in everything if r.get("recordError")]


def test_driver_answers_a_request_with_fields_it_does_not_know(node_cluster: ClusterHandle) -> None:
    """A newer kubelet may send fields dralab's schema lacks: the driver still answers per claim."""
    socket = node_cluster.node_dir(str(node_cluster.state["realNode"])) / "plugins" / DRIVER / "dra.sock"
    missing = str(uuid.uuid4())
    request = pb.NodePrepareResourcesRequest(claims=[pb.Claim(namespace="nowhere", uid=missing, name="ghost")])
    raw = request.SerializeToString() + b"\xa2\x06\x03abc"  # field 100, length-delimited: unknown here
    with grpc.insecure_channel(f"unix://{socket}") as channel:
        answer = channel.unary_unary(V1 + "NodePrepareResources")(raw, timeout=30)
    response = pb.NodePrepareResourcesResponse.FromString(answer)
    assert set(response.claims) == {missing}
    assert "not found" in response.claims[missing].error  # a per-claim answer, not a failed call
