"""Builders of the Kubernetes objects the integration tests create (pure dicts, no API calls).

Every test talks to the cluster through its own client (kubernetes, the webhook's or the
driver's), so these only shape objects and read fields out of them.
"""

from __future__ import annotations

from typing import Any

GROUP, VERSION = "resource.k8s.io", "v1"
API_VERSION = f"{GROUP}/{VERSION}"


def device_class(driver: str) -> dict[str, Any]:
    """A DeviceClass named after ``driver`` that selects every device of that driver."""
    return {
        "apiVersion": API_VERSION,
        "kind": "DeviceClass",
        "metadata": {"name": driver},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]},
    }


def node_slice(driver: str, node: str, devices: list[dict[str, Any]]) -> dict[str, Any]:
    """A one-slice pool named after ``node`` with ``devices``, bound to that node by nodeName."""
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceSlice",
        "metadata": {"name": f"{driver}-{node}"},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def shareable_slice(driver: str, node: str) -> dict[str, Any]:
    """A slice of ``driver`` with one multi-allocatable device of Lab 20's capacities (21525Mi, 100 cores)
    on ``node``, chosen by a node selector so the node's kubelet stand-in leaves it alone."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{driver}-slice"},
        "spec": {
            "driver": driver,
            # a node selector instead of nodeName: the node's kubelet stand-in leaves it alone
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}
                ]
            },
            "pool": {"name": f"{driver}-pool", "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": "npu-0-0",
                    "allowMultipleAllocations": True,
                    "attributes": {"type": {"string": "HAMivNPUCore"}, "uuid": {"string": "TEST-UUID-0"}},
                    "capacity": {
                        "cores": {
                            "value": "100",
                            "requestPolicy": {"default": "100", "validRange": {"min": "0", "max": "100", "step": "1"}},
                        },
                        "memory": {
                            "value": "21525Mi",
                            "requestPolicy": {
                                "default": "21525Mi",
                                "validRange": {"min": "1Mi", "max": "21525Mi", "step": "1Mi"},
                            },
                        },
                    },
                }
            ],
        },
    }


def claim_spec(
    device_class_name: str,
    request: str = "npu",
    *,
    count: int | None = None,
    capacity: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The spec of a claim with one request; ``count`` pins ExactCount, ``capacity`` asks for a share."""
    exactly: dict[str, Any] = {"deviceClassName": device_class_name}
    if count is not None:
        exactly.update(allocationMode="ExactCount", count=count)
    if capacity is not None:
        exactly["capacity"] = {"requests": capacity}
    return {"devices": {"requests": [{"name": request, "exactly": exactly}]}}


def resource_claim(name: str, device_class_name: str, request: str = "npu", **spec: Any) -> dict[str, Any]:
    """A ResourceClaim with one request (keywords as for ``claim_spec``)."""
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": claim_spec(device_class_name, request, **spec),
    }


def claim_pod(
    name: str,
    source: dict[str, str],
    claim_name: str = "npu",
    *,
    grace_period: int | None = 0,
    labels: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A busybox pod whose one container uses one pod claim.

    ``source`` says where the claim comes from: ``{"resourceClaimName": ...}`` or
    ``{"resourceClaimTemplateName": ...}``. Extra keywords go into the pod spec.
    """
    metadata: dict[str, Any] = {"name": name}
    if labels:
        metadata["labels"] = labels
    pod_spec: dict[str, Any] = {}
    if grace_period is not None:
        pod_spec["terminationGracePeriodSeconds"] = grace_period
    pod_spec.update(spec)
    pod_spec["containers"] = [{"name": "app", "image": "busybox", "resources": {"claims": [{"name": claim_name}]}}]
    pod_spec["resourceClaims"] = [{"name": claim_name, **source}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec}


def allocation(claim_obj: dict[str, Any] | None) -> dict[str, Any] | None:
    """The claim's allocation, or None while it is missing or not allocated yet."""
    if not claim_obj:
        return None
    return (claim_obj.get("status") or {}).get("allocation")
