"""REST paths of the API objects the local cluster creates (pure), from the one kind table."""

from __future__ import annotations

from typing import Any

from dralab.kube.kinds import collection_path
from dralab.kube.paths import segment

__all__ = ["collection_path", "object_path"]


def object_path(obj: dict[str, Any]) -> str:
    """The URL path of one object (from its apiVersion, kind, metadata.name/namespace)."""
    meta = obj.get("metadata") or {}
    base = collection_path(obj["apiVersion"], obj["kind"], meta.get("namespace"))
    return f"{base}/{segment(meta['name'])}"
