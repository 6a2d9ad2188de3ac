"""REST paths of the API objects the local cluster creates (pure)."""

from __future__ import annotations

from typing import Any

# (apiVersion, kind) -> (collection path, namespaced)
_KINDS: dict[tuple[str, str], tuple[str, bool]] = {
    ("v1", "Node"): ("/api/v1/nodes", False),
    ("v1", "Namespace"): ("/api/v1/namespaces", False),
    ("v1", "Pod"): ("/api/v1/namespaces/{ns}/pods", True),
    ("v1", "Event"): ("/api/v1/namespaces/{ns}/events", True),
    ("resource.k8s.io/v1", "DeviceClass"): ("/apis/resource.k8s.io/v1/deviceclasses", False),
    ("resource.k8s.io/v1", "ResourceSlice"): ("/apis/resource.k8s.io/v1/resourceslices", False),
    ("resource.k8s.io/v1", "ResourceClaim"): ("/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims", True),
    ("node.k8s.io/v1", "RuntimeClass"): ("/apis/node.k8s.io/v1/runtimeclasses", False),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): (
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        False,
    ),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"): (
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        False,
    ),
    ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"): (
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
        False,
    ),
    ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"): (
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
        False,
    ),
}


def collection_path(api_version: str, kind: str, namespace: str | None = None) -> str:
    """The collection URL path of a kind (``namespace`` required for namespaced kinds)."""
    try:
        template, namespaced = _KINDS[(api_version, kind)]
    except KeyError:
        raise ValueError(f"no REST path known for {api_version} {kind}") from None
    if namespaced:
        if not namespace:
            raise ValueError(f"{kind} is namespaced: a namespace is required")
        return template.format(ns=namespace)
    return template


def object_path(obj: dict[str, Any]) -> str:
    """The URL path of one object (from its apiVersion, kind, metadata.name/namespace)."""
    meta = obj.get("metadata") or {}
    base = collection_path(obj["apiVersion"], obj["kind"], meta.get("namespace"))
    return f"{base}/{meta['name']}"
