"""Informer caches keep objects without ``managedFields``: every list item and every watch event."""

from __future__ import annotations

from typing import Any

from dralab.kube.informer import Informer, slim

MANAGED = [{"manager": "kube-scheduler", "operation": "Apply", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:status": {"f:allocation": {}}}}]


def _obj(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}", "managedFields": list(MANAGED)},
            "spec": {"devices": {}}, "status": {"reservedFor": [{"name": "p"}]}}


def test_slim_drops_only_managed_fields() -> None:
    obj = _obj("a")
    assert slim(obj) is obj  # in place: the object was decoded for the cache alone
    assert obj == {"metadata": {"name": "a", "namespace": "ns", "uid": "u-a"},
                   "spec": {"devices": {}}, "status": {"reservedFor": [{"name": "p"}]}}
    assert slim({"kind": "Status"}) == {"kind": "Status"}  # nothing to drop, nothing broken
    assert slim({"metadata": None}) == {"metadata": None}


def test_listed_and_changed_objects_are_cached_slim() -> None:
    changes: list[int] = []
    informer = Informer(None, "/x", "", lambda: changes.append(1), "t")  # type: ignore[arg-type]
    informer._listed([_obj("a"), _obj("b")], "1")
    informer._changed("MODIFIED", _obj("b"))
    informer._changed("ADDED", _obj("c"))
    cached = {o["metadata"]["name"]: o for o in informer.snapshot()}
    assert sorted(cached) == ["a", "b", "c"]
    assert not any("managedFields" in o["metadata"] for o in cached.values())
    assert len(changes) == 3
