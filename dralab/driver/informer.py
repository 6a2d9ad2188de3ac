"""A watch-fed cache of the ResourceClaims allocated to this node, so Prepare reads a claim without a GET.

List, then watch from the list's resourceVersion with bookmarks; on ``410 Gone`` (the version
expired from the apiserver's window) list again; on any other failure wait with jittered
exponential backoff and resume the watch from the last version seen. The apiserver selects
ResourceClaims by ``metadata.name``/``metadata.namespace`` only (asked for
``status.allocation...`` or ``spec.nodeName`` it answers 400 "not a known field selector"), so the
watch covers every claim and the cache keeps only those with an allocation result of one of this
node's drivers in this node's pool: memory follows the node's claims, not the cluster's.

The cache answers only when it is synced and holds the claim with the UID the kubelet names;
anything else (not seen yet, replaced, deallocated) is a miss and Prepare falls back to a GET.
Stored claims are shared, not copied: readers must not change them.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterable
from typing import Any

from dralab.driver.kube import KubeClient, KubeError
from dralab.util import get_logger

log = get_logger("dralab.driver.informer")

CLAIMS_PATH = "/apis/resource.k8s.io/v1/resourceclaims"
PAGE = 500
WATCH_S = 300  # the server ends a watch after this; the informer resumes from the last version
BACKOFF_S = (0.5, 30.0)  # first and largest wait after a failure


class Expired(Exception):
    """The watch's resourceVersion is older than the apiserver keeps: list again."""


def _results(claim: dict[str, Any]) -> list[dict[str, Any]]:
    alloc = (claim.get("status") or {}).get("allocation") or {}
    return list((alloc.get("devices") or {}).get("results") or [])


class ClaimInformer:
    """ResourceClaims allocated to ``node``'s pool for any of ``drivers``, kept current by a watch."""

    def __init__(self, client: KubeClient, node: str, drivers: Iterable[str], watch_seconds: int = WATCH_S) -> None:
        self.client = client
        self.watch_seconds = watch_seconds
        self.node = node
        self.drivers = frozenset(drivers)
        self.synced = threading.Event()
        self.resource_version = ""
        self._lock = threading.Lock()
        self._claims: dict[tuple[str, str], dict[str, Any]] = {}
        self._rng = random.Random()

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

    def apply(self, event: dict[str, Any]) -> None:
        """One watch event: keep, replace or drop the claim; bookmarks and errors move the version."""
        kind = event.get("type")
        obj = event.get("object") or {}
        if kind == "ERROR":
            code = obj.get("code")
            if code == 410:
                raise Expired(obj.get("message", "resourceVersion too old"))
            raise KubeError(f"watch error: {obj.get('message', obj)}", int(code or 0))
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if kind in ("ADDED", "MODIFIED", "DELETED"):
            key = self._key(obj)
            with self._lock:
                if kind != "DELETED" and self.relevant(obj):
                    self._claims[key] = obj
                else:
                    self._claims.pop(key, None)
        if version:
            self.resource_version = str(version)

    def relist(self) -> None:
        """Replace the cache with a full (paged) list and remember its resourceVersion."""
        claims: dict[tuple[str, str], dict[str, Any]] = {}
        token = ""
        while True:
            params = {"limit": str(PAGE), **({"continue": token} if token else {})}
            page = self.client.get(CLAIMS_PATH, params=params) or {}
            for item in page.get("items") or []:
                if self.relevant(item):
                    claims[self._key(item)] = item
            meta = page.get("metadata") or {}
            token = meta.get("continue") or ""
            if not token:
                break
        with self._lock:
            self._claims = claims
        self.resource_version = str(meta.get("resourceVersion") or "")
        self.synced.set()
        log.info("claim cache listed", extra={"fields": {"node": self.node, "claims": len(claims)}})

    def watch_once(self, stop: threading.Event) -> None:
        """One watch from the current version until the server ends it, ``stop`` or an error."""
        params = {"resourceVersion": self.resource_version, "allowWatchBookmarks": "true"}
        try:
            for event in self.client.watch(CLAIMS_PATH, params, timeout_seconds=self.watch_seconds):
                if stop.is_set():
                    return
                self.apply(event)
        except KubeError as exc:
            if exc.status == 410:  # answered before the stream started
                raise Expired(str(exc)) from None
            raise

    def run(self, stop: threading.Event) -> None:
        """List and watch until ``stop``; never raises (a failure waits and resumes).

        ``stop`` is seen between events and when a watch ends (at most ``watch_seconds``): give the
        informer a client of its own (``KubeClient.clone``) that nothing else closes meanwhile.
        """
        backoff = BACKOFF_S[0]
        need_list = True
        while not stop.is_set():
            try:
                if need_list:
                    self.relist()
                    need_list = False
                self.watch_once(stop)
                backoff = BACKOFF_S[0]
                continue
            except Expired as exc:
                log.info("claim watch expired: listing again", extra={"fields": {"reason": str(exc)}})
                self.synced.clear()
                need_list = True
                continue
            except Exception as exc:  # apiserver away, connection cut, a closed client at shutdown
                if stop.is_set():
                    return
                log.warning(
                    "claim watch failed: retrying", extra={"fields": {"error": str(exc), "wait_s": round(backoff, 2)}}
                )
            stop.wait(backoff * (0.5 + self._rng.random()))
            backoff = min(backoff * 2, BACKOFF_S[1])
