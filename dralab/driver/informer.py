"""A watch-fed cache of the ResourceClaims allocated to this node, so Prepare reads a claim without a GET.

The list, the watch from the list's resourceVersion with bookmarks, the relist on ``410 Gone`` and
the jittered backoff after other failures are :class:`dralab.kube.ListWatch`'s. The apiserver selects
ResourceClaims by ``metadata.name``/``metadata.namespace`` only (asked for
``status.allocation...`` or ``spec.nodeName`` it answers 400 "not a known field selector"), so the
watch covers every claim and the cache keeps only those with an allocation result of one of this
node's drivers in this node's pool: memory follows the node's claims, not the cluster's.

The cache answers only when it is synced and holds the claim with the UID the kubelet names;
anything else (not seen yet, replaced, deallocated) is a miss and Prepare falls back to a GET.
Stored claims are shared, not copied: readers must not change them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from dralab.kube import Expired, Kube, ListWatch
from dralab.kube.informer import slim
from dralab.kube.paths import CLAIMS_PATH
from dralab.util import get_logger

log = get_logger("dralab.driver.informer")

PAGE = 500
WATCH_S = 300  # the server ends a watch after this; the informer resumes from the last version
BACKOFF_S = (0.5, 30.0)  # first and largest wait after a failure

__all__ = ["ClaimInformer", "Expired"]


def _results(claim: dict[str, Any]) -> list[dict[str, Any]]:
    alloc = (claim.get("status") or {}).get("allocation") or {}
    return list((alloc.get("devices") or {}).get("results") or [])


class ClaimInformer:
    """ResourceClaims allocated to ``node``'s pool for any of ``drivers``, kept current by a watch."""

    def __init__(self, client: Kube | None, node: str, drivers: Iterable[str], watch_seconds: int = WATCH_S) -> None:
        self.client = client
        self.watch_seconds = watch_seconds
        self.node = node
        self.drivers = frozenset(drivers)
        self._lock = threading.Lock()
        self._claims: dict[tuple[str, str], dict[str, Any]] = {}
        self.watch = ListWatch(
            client,
            CLAIMS_PATH,
            on_list=self._listed,
            on_event=self._changed,
            page=PAGE,
            watch_seconds=watch_seconds,
            backoff=BACKOFF_S,
            name=f"claims of {node}",
        )
        self.synced = self.watch.synced

    @property
    def resource_version(self) -> str:
        return self.watch.resource_version

    @resource_version.setter
    def resource_version(self, value: str) -> None:
        self.watch.resource_version = value

    # -- reading ----------------------------------------------------------------------------------

    def relevant(self, claim: dict[str, Any]) -> bool:
        """Whether ``claim`` has an allocation result of one of our drivers in our pool (pure)."""
        return any(r.get("driver") in self.drivers and r.get("pool") == self.node for r in _results(claim))

    def lookup(self, namespace: str, name: str, uid: str) -> dict[str, Any] | None:
        """The cached claim when synced and it has ``uid`` and an allocation; None means: GET it."""
        if not self.synced.is_set():
            return None
        with self._lock:
            claim = self._claims.get((namespace, name))
        if claim is None or (claim.get("metadata") or {}).get("uid") != uid:
            return None
        return claim

    def __len__(self) -> int:
        with self._lock:
            return len(self._claims)

    # -- feeding ----------------------------------------------------------------------------------

    def _key(self, claim: dict[str, Any]) -> tuple[str, str]:
        meta = claim.get("metadata") or {}
        return str(meta.get("namespace", "")), str(meta.get("name", ""))

    def _listed(self, items: list[dict[str, Any]], version: str) -> None:
        claims = {self._key(item): slim(item) for item in items if self.relevant(item)}
        with self._lock:
            self._claims = claims
        log.info("claim cache listed", extra={"fields": {"node": self.node, "claims": len(claims)}})

    def _changed(self, kind: str, claim: dict[str, Any]) -> None:
        key = self._key(claim)
        with self._lock:
            if kind != "DELETED" and self.relevant(claim):
                self._claims[key] = slim(claim)
            else:
                self._claims.pop(key, None)

    def apply(self, event: dict[str, Any]) -> None:
        """One watch event: keep, replace or drop the claim; bookmarks and errors move the version."""
        self.watch.handle(event)

    def relist(self) -> None:
        """Replace the cache with a full (paged) list and remember its resourceVersion."""
        self.watch.relist()

    def watch_once(self, stop: threading.Event) -> None:
        """One watch from the current version until the server ends it, ``stop`` or an error."""
        self.watch.watch_once(stop)

    def run(self, stop: threading.Event) -> None:
        """List and watch until ``stop``; never raises (a failure waits and resumes).

        Give the informer a client of its own (``Kube.clone``) that nothing else closes meanwhile.
        """
        self.watch.run(stop)
