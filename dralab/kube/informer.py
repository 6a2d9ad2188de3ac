"""Informers: list-then-watch caches of one kind, and the loop two of them wake (pods and claims).

:class:`Informer` keeps objects by (namespace, name) from a :class:`~dralab.kube.ListWatch` and
calls back after each (re)list and each relevant event, keeping each object without its
``managedFields`` (:func:`slim`); :class:`PodClaimLoop` is a background loop
woken by a pod informer and a claim informer. The janitor, the adopter, the budget reconciler, the
extended-resource warnings and the monitor build on them.
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Callable
from typing import Any

from dralab.kube.client import JSON, PARTIAL_METADATA, Kube
from dralab.kube.watch import ListWatch

Key = tuple[str, str]  # (namespace, name)
# Metadata only (names, owners, timestamps): what a claim watch that needs no spec or status asks for,
# with whole objects as the fallback of a server that cannot serve metadata alone.
METADATA_ONLY = f"{PARTIAL_METADATA},{JSON}"
WATCH_SECONDS = 240  # the server ends a watch after this; the informer resumes from the last version
BACKOFF_S = (0.2, 5.0)  # first and largest wait after a failed list or watch
# Background watches let events gather this long after one that was waited for (Kube.watch): a tenth of
# the janitor's quiet time, and a third of the CPU per event at 200 claims/s.
GATHER_S = 0.05


def slim(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` without ``metadata.managedFields``, changed in place (it was just decoded for the cache).

    Server-side apply's field ownership is no cache reader's business, yet it is often the largest part
    of an object: every manager that wrote the object (the webhook, the scheduler, the kubelet, the
    driver) keeps an entry with the set of fields it owns. A cache holding every claim and pod of a
    fleet would carry them all (``dralab bench caches``).
    """
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj


def key_of(obj: dict[str, Any]) -> Key:
    """(namespace, name) of an object ("" for what it lacks)."""
    m = obj.get("metadata") or {}
    return (m.get("namespace", ""), m.get("name", ""))


class Informer:
    """A list-then-watch cache of one kind of object, fed by a :class:`~dralab.kube.ListWatch`.

    The ListWatch resumes from the last resourceVersion, relists on 410 and backs off on failures;
    this keeps the objects by (namespace, name) and calls ``on_change`` after each (re)list and
    each relevant event. ``synced`` is set by the first list and stays set (a relist after an
    expired watch keeps serving the cached state, so readiness does not flap). ``lists`` counts the
    (re)lists, for a user that keeps its own indexes from the events.
    """

    def __init__(
        self,
        api: Kube,
        path: str,
        label_selector: str,
        on_change: Callable[[], None],
        name: str,
        relevant: Callable[[str, dict[str, Any]], bool] | None = None,
        metadata_only: bool = False,
        gather_seconds: float = GATHER_S,
    ) -> None:
        """``relevant(event type, object)``: whether a watch event calls ``on_change`` (default: every one);
        ``metadata_only``: cache PartialObjectMetadata (no spec or status: less to send and to decode);
        ``gather_seconds``: how long events may gather before they are read (0: each at once).
        """
        self.api = api
        self.path = path
        self.selector = label_selector
        self.on_change = on_change
        self.name = name
        self.relevant = relevant
        self.accept = METADATA_ONLY if metadata_only else JSON
        self.items: dict[Key, dict[str, Any]] = {}
        self.lists = 0  # (re)lists so far: a relist replaces ``items`` without events
        self.synced = threading.Event()
        self._lock = threading.Lock()
        self.watch = ListWatch(
            api, path, on_list=self._listed, on_event=self._changed, label_selector=label_selector or None,
            accept=self.accept, watch_seconds=WATCH_SECONDS, backoff=BACKOFF_S, name=name,
            gather_seconds=gather_seconds,
        )
        self._thread = threading.Thread(target=self.watch.run, name=f"informer-{name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.watch.stop()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.items.values())

    def _listed(self, items: list[dict[str, Any]], version: str) -> None:
        with self._lock:
            self.items = {key_of(o): slim(o) for o in items}
            self.lists += 1
        self.synced.set()
        self.on_change()

    def _changed(self, kind: str, obj: dict[str, Any]) -> None:
        with self._lock:
            if kind == "DELETED":
                self.items.pop(key_of(obj), None)
            else:
                self.items[key_of(obj)] = slim(obj)
        if self.relevant is None or self.relevant(kind, obj):
            self.on_change()


class PodClaimLoop(abc.ABC):
    """A background loop woken by a pod informer and a claim informer (the janitor, the adopter).

    Subclasses call :meth:`_prepare_loop` before building their informers (which take ``self._kick.set``)
    and set ``self.pods`` and ``self.claims``; the loop itself is their ``_loop``.
    """

    pods: Informer
    claims: Informer

    def _prepare_loop(self, name: str) -> None:
        self._kick = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    @abc.abstractmethod
    def _loop(self) -> None:
        """The subclass's work: runs on ``self._thread`` until ``self._stop``."""

    def start(self) -> None:
        self.pods.start()
        self.claims.start()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._kick.set()
        self.pods.stop()
        self.claims.stop()
        self._thread.join(timeout=5)

    def ready(self) -> bool:
        return self.pods.synced.is_set() and self.claims.synced.is_set()
