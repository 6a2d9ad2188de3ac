"""Where Prepare reads claims from: a small interface, the apiserver in production, memory in tests."""

from __future__ import annotations

import copy
import threading
from typing import Any, Protocol

from dralab.kube import Kube
from dralab.kube.paths import claim_path


class ClaimSource(Protocol):
    """GET a ResourceClaim as a plain dict; None when it does not exist."""

    def get_claim(self, namespace: str, name: str) -> dict[str, Any] | None: ...


class ClaimCache(Protocol):
    """A local copy of claims (an informer): the claim when it holds ``uid``, else None (then GET it)."""

    def lookup(self, namespace: str, name: str, uid: str) -> dict[str, Any] | None: ...


class KubeClaimSource:
    """Claims from the apiserver."""

    def __init__(self, client: Kube) -> None:
        self.client = client

    def get_claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.client.get(claim_path(namespace, name), missing_ok=True)


class InMemoryClaimSource:
    """Claims held in memory: for unit tests, offline previews and the benchmark without a cluster."""

    def __init__(self, claims: list[dict[str, Any]] | None = None) -> None:
        self._lock = threading.Lock()
        self._claims: dict[tuple[str, str], dict[str, Any]] = {}
        for claim in claims or []:
            self.put(claim)

    def put(self, claim: dict[str, Any]) -> None:
        meta = claim.get("metadata") or {}
        with self._lock:
            self._claims[(meta.get("namespace", "default"), meta["name"])] = copy.deepcopy(claim)

    def remove(self, namespace: str, name: str) -> None:
        with self._lock:
            self._claims.pop((namespace, name), None)

    def get_claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        with self._lock:
            claim = self._claims.get((namespace, name))
            return copy.deepcopy(claim) if claim is not None else None


def allocated_claim(
    namespace: str,
    name: str,
    uid: str,
    results: list[dict[str, Any]],
    node: str | None = None,
) -> dict[str, Any]:
    """A ResourceClaim with ``status.allocation`` set (tests, previews, benchmark)."""
    claim: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"namespace": namespace, "name": name, "uid": uid},
        "spec": {"devices": {"requests": []}},
        "status": {"allocation": {"devices": {"results": results}}},
    }
    if node:
        claim["status"]["allocation"]["nodeSelector"] = {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]
        }
    return claim
