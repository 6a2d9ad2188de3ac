"""URL paths of the objects dralab reads and writes, with every name escaped as one path segment."""

from __future__ import annotations

from urllib.parse import quote

RESOURCE_GROUP = "/apis/resource.k8s.io/v1"
CLAIMS_PATH = f"{RESOURCE_GROUP}/resourceclaims"
SLICES_PATH = f"{RESOURCE_GROUP}/resourceslices"


def segment(value: str) -> str:
    """One URL path segment: every reserved character escaped (``/`` included), ``.`` and ``..`` refused.

    Namespaces and names reach here from admission requests and watch events; an unescaped
    ``x/../kube-system`` would be normalised into another namespace's path.
    """
    if value in ("", ".", ".."):
        raise ValueError(f"{value!r} is not a valid object or namespace name")
    return quote(value, safe="")


def _named(base: str, name: str | None) -> str:
    return f"{base}/{segment(name)}" if name else base


def claims_path(namespace: str, name: str | None = None) -> str:
    """ResourceClaims of ``namespace``, or one of them."""
    return _named(f"{RESOURCE_GROUP}/namespaces/{segment(namespace)}/resourceclaims", name)


def claim_path(namespace: str, name: str) -> str:
    """One ResourceClaim."""
    return claims_path(namespace, name)


def templates_path(namespace: str, name: str | None = None) -> str:
    """ResourceClaimTemplates of ``namespace``, or one of them."""
    return _named(f"{RESOURCE_GROUP}/namespaces/{segment(namespace)}/resourceclaimtemplates", name)


def slice_path(name: str) -> str:
    """One ResourceSlice (cluster-scoped)."""
    return _named(SLICES_PATH, name)


def pods_path(namespace: str | None = None, name: str | None = None) -> str:
    """Pods of every namespace (no ``namespace``), of one, or one pod."""
    if namespace is None:
        return "/api/v1/pods"
    return _named(f"/api/v1/namespaces/{segment(namespace)}/pods", name)


def node_path(name: str) -> str:
    """One Node."""
    return f"/api/v1/nodes/{segment(name)}"


def namespace_path(name: str | None = None) -> str:
    """Namespaces, or one of them."""
    return _named("/api/v1/namespaces", name)
