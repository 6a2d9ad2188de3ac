"""Webhook unit fixtures: an in-memory stand-in for the apiserver calls the webhook makes."""

from __future__ import annotations

import copy
import itertools
from typing import Any

import pytest

from dralab.kube import KubeError


def _merge(target: dict[str, Any], patch: dict[str, Any]) -> None:
    """JSON merge patch (RFC 7386) onto ``target`` in place."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


class FakeApi:
    """Objects by path, called as :class:`dralab.kube.Kube` is; the n-th create in ``fail_creates`` answers 500."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, str]] = []
        self.fail_creates: set[int] = set()
        self.delete_uids: list[str | None] = []  # the uid precondition of each delete
        self._creates = 0
        self._uids = itertools.count(1)

    def create(self, path: str, body: dict[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        self.calls.append(("create", path))
        n = self._creates
        self._creates += 1
        if n in self.fail_creates:
            raise KubeError(500, "InternalError", {"message": "etcdserver: request timed out"}, what=f"POST {path}")
        full = f"{path}/{body['metadata']['name']}"
        if full in self.objects:
            raise KubeError(409, "AlreadyExists", {"message": "already exists"}, what=f"POST {path}")
        obj = copy.deepcopy(body)
        obj["metadata"]["uid"] = f"uid-{next(self._uids)}"
        obj["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
        if not dry_run:
            self.objects[full] = obj
        return copy.deepcopy(obj)

    def get(self, path: str, params: dict[str, str] | None = None) -> dict[str, Any]:
        self.calls.append(("get", path))
        if path not in self.objects:
            raise KubeError(404, "NotFound", what=f"GET {path}")
        return copy.deepcopy(self.objects[path])

    def delete(self, path: str, *, uid: str | None = None) -> bool:
        self.calls.append(("delete", path))
        self.delete_uids.append(uid)
        if path not in self.objects:
            raise KubeError(404, "NotFound", what=f"DELETE {path}")
        if uid and self.objects[path]["metadata"].get("uid") != uid:
            raise KubeError(409, "Conflict", {"message": "precondition failed"}, what=f"DELETE {path}")
        del self.objects[path]
        return True

    def patch(self, path: str, patch: dict[str, Any], *, kind: str = "merge") -> dict[str, Any]:
        assert kind == "merge", kind
        self.calls.append(("patch", path))
        if path not in self.objects:
            raise KubeError(404, "NotFound", what=f"PATCH {path}")
        meta = dict(patch.get("metadata") or {})
        meta.pop("resourceVersion", None)
        _merge(self.objects[path]["metadata"], meta)
        return copy.deepcopy(self.objects[path])

    def list(self, path: str, *, label_selector: str | None = None) -> dict[str, Any]:
        self.calls.append(("list", path))
        items = [copy.deepcopy(o) for p, o in self.objects.items() if p.rsplit("/", 1)[0] == path]
        return {"metadata": {"resourceVersion": "1"}, "items": items}

    def names(self, path: str) -> list[str]:
        return sorted(p.rsplit("/", 1)[1] for p in self.objects if p.rsplit("/", 1)[0] == path)


@pytest.fixture
def fake_api() -> FakeApi:
    return FakeApi()
