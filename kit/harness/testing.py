"""An in-memory cluster with the runner's client protocol, for tests that need no cluster.

It stores unstructured objects, fills the metadata an API server would (uid, resourceVersion,
creationTimestamp), filters lists by label and field selectors (those of
:mod:`dralab_kit.fixtures.selectors`, which the unit tests' ``FakeKube`` uses too), and lets a test hook
in behaviour: ``on_apply`` reactors (a stand-in admission webhook that may mutate or reject)
and ``on_read`` reactors (stand-in controllers that move state forward when the runner polls).
The ``memory`` cluster profile uses it too, seeded from a YAML file of objects.
"""

from __future__ import annotations

import copy
import itertools
import time
import uuid
from collections.abc import Callable, Mapping
from http import HTTPStatus
from pathlib import Path
from typing import Any

from dralab import yamlio
from dralab.kube import KubeError
from dralab_kit.fixtures.selectors import matches
from harness.resources import CLUSTER_SCOPED, Ref, ref_of

ApplyReactor = Callable[["FakeCluster", dict[str, Any]], dict[str, Any] | None]
ReadReactor = Callable[["FakeCluster"], None]
DeleteReactor = Callable[["FakeCluster", dict[str, Any]], None]


def refusal(status: int, message: str) -> KubeError:
    """The error a refusing apiserver raises (its Status carries ``message``), for the fake and its reactors."""
    return KubeError(status, HTTPStatus(status).phrase, {"kind": "Status", "code": status, "message": message})


class FakeCluster:
    """Objects in a dict, keyed by (apiVersion, kind, namespace, name)."""

    def __init__(self, objects: list[dict[str, Any]] | None = None) -> None:
        self.objects: dict[tuple[str, str, str | None, str], dict[str, Any]] = {}
        self.on_apply: list[ApplyReactor] = []
        self.on_read: list[ReadReactor] = []
        self.on_delete: list[DeleteReactor] = []
        self.calls: list[tuple[str, str]] = []
        self._version = itertools.count(1)
        for obj in objects or []:
            self.apply(obj)

    @classmethod
    def from_file(cls, path: str | Path) -> FakeCluster:
        docs = [d for d in yamlio.load_all(Path(path).read_text(), str(path)) if d]
        return cls(docs)

    def namespaced(self, api_version: str, kind: str) -> bool:
        return kind not in CLUSTER_SCOPED

    @staticmethod
    def _key(ref: Ref) -> tuple[str, str, str | None, str]:
        return (ref.api_version, ref.kind, ref.namespace if ref.namespaced else None, ref.name or "")

    def _react(self) -> None:
        for reactor in list(self.on_read):
            reactor(self)

    def get(self, ref: Ref) -> dict[str, Any] | None:
        self.calls.append(("get", ref.describe()))
        self._react()
        obj = self.objects.get(self._key(ref))
        return copy.deepcopy(obj) if obj is not None else None

    def list(self, ref: Ref) -> list[dict[str, Any]]:
        self.calls.append(("list", ref.describe()))
        self._react()
        out = []
        for (api_version, kind, namespace, _), obj in sorted(self.objects.items(), key=lambda kv: str(kv[0])):
            if (api_version, kind) != (ref.api_version, ref.kind):
                continue
            if ref.namespaced and ref.namespace and namespace != ref.namespace:
                continue
            if matches(obj, ref.label_selector, ref.field_selector):
                out.append(copy.deepcopy(obj))
        return out

    def apply(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        new = copy.deepcopy(dict(obj))
        ref = ref_of(new)
        self.calls.append(("apply", ref.describe()))
        if not ref.name:
            raise refusal(422, f"{ref.kind}: metadata.name is required")
        if ref.namespaced and not ref.namespace:
            raise refusal(422, f"{ref.kind} {ref.name}: metadata.namespace is required")
        if ref.namespaced and ref.kind != "Namespace":
            ns = self.objects.get(("v1", "Namespace", None, ref.namespace or ""))
            if ns is None:
                raise refusal(404, f'namespaces "{ref.namespace}" not found')
        for reactor in list(self.on_apply):
            result = reactor(self, new)
            if result is not None:
                new = result
        key = self._key(ref)
        meta = new.setdefault("metadata", {})
        old = self.objects.get(key)
        meta["uid"] = (old or {}).get("metadata", {}).get("uid") or str(uuid.uuid4())
        meta.setdefault("creationTimestamp", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        meta["resourceVersion"] = str(next(self._version))
        if old is not None and "status" in old and "status" not in new:
            new["status"] = old["status"]
        self.objects[key] = new
        if ref.kind == "Namespace" and old is None:  # what the serviceaccount controller does
            self.apply({"apiVersion": "v1", "kind": "ServiceAccount",
                        "metadata": {"name": "default", "namespace": ref.name}})  # fmt: skip
        return copy.deepcopy(new)

    def set_status(self, ref: Ref, status: dict[str, Any]) -> None:
        """What a controller would write: replace an object's status."""
        self.objects[self._key(ref)]["status"] = copy.deepcopy(status)

    def delete(self, ref: Ref, grace_period_seconds: int | None = None) -> bool:
        self.calls.append(("delete", ref.describe()))
        obj = self.objects.pop(self._key(ref), None)
        if obj is None:
            return False
        if ref.kind == "Namespace":
            for key in [k for k in self.objects if k[2] == ref.name]:
                del self.objects[key]
        for reactor in list(self.on_delete):
            reactor(self, obj)
        return True

    def add_event(
        self, namespace: str, kind: str, name: str, reason: str, message: str, type_: str = "Warning"
    ) -> dict[str, Any]:
        """Record an event about an object, as a component would."""
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{name}.{uuid.uuid4().hex[:10]}", "namespace": namespace},
            "involvedObject": {"kind": kind, "name": name, "namespace": namespace},
            "reason": reason,
            "message": message,
            "type": type_,
            "count": 1,
        }
        return self.apply(event)
