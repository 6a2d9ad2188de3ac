"""The one list-and-watch loop: resourceVersion bookkeeping, relist on 410 Gone, bookmarks, backoff.

``ListWatch.run`` lists a collection (paged), hands the items to ``on_list``, then watches from
the list's resourceVersion and hands every ADDED/MODIFIED/DELETED event to ``on_event``. Each
event and bookmark moves the version forward, so a watch the server ends (``timeoutSeconds``) or
a dropped connection resumes from the last version seen, with no relist and no missed event. The
apiserver keeps a bounded window of versions: a resume from one that fell out of it answers
``410 Gone`` (as the HTTP status or as an ERROR event), and only then is the collection listed
again. Any other failure (apiserver away, a 5xx, a cut stream) waits with jittered exponential
backoff before it tries again, and ``run`` never raises.
"""

from __future__ import annotations

import contextlib
import random
import threading
from collections.abc import Callable
from typing import Any

from dralab.kube.client import JSON, Kube
from dralab.kube.errors import KubeError
from dralab.util import get_logger

log = get_logger("dralab.kube.watch")

BACKOFF_S = (0.5, 30.0)  # first and largest wait after a failure


class Expired(Exception):
    """The watch's resourceVersion is older than the apiserver keeps: list again."""


def event_version(event: dict[str, Any]) -> str:
    return str(((event.get("object") or {}).get("metadata") or {}).get("resourceVersion") or "")


def check_event(event: dict[str, Any]) -> None:
    """Raise for an ERROR event: :class:`Expired` for 410, else :class:`KubeError` with the Status."""
    if event.get("type") != "ERROR":
        return
    status = event.get("object") or {}
    code = int(status.get("code") or 0)
    if code == 410:
        raise Expired(str(status.get("message") or "resourceVersion too old"))
    raise KubeError(code, str(status.get("reason") or "watch error"), status, what="watch event")


class ListWatch:
    """Keeps ``on_list``/``on_event`` fed with one collection until stopped.

    ``on_list(items, resource_version)`` replaces the caller's view after every (re)list;
    ``on_event(type, object)`` applies one change. ``synced`` is set after a list and cleared when a
    relist is due. Callbacks run on the thread of :meth:`run`.
    """

    def __init__(
        self,
        kube: Kube | None,
        path: str,
        *,
        on_list: Callable[[list[dict[str, Any]], str], None],
        on_event: Callable[[str, dict[str, Any]], None],
        label_selector: str | None = None,
        field_selector: str | None = None,
        accept: str = JSON,
        page: int = 500,
        watch_seconds: int = 300,
        backoff: tuple[float, float] = BACKOFF_S,
        name: str = "",
        gather_seconds: float = 0.0,
    ) -> None:
        """``gather_seconds``: how long the reader may let events gather (:meth:`dralab.kube.Kube.watch`)."""
        self.kube = kube
        self.path = path
        self.on_list = on_list
        self.on_event = on_event
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.accept = accept
        self.page = page
        self.watch_seconds = watch_seconds
        self.backoff = backoff
        self.name = name or path
        self.gather_seconds = gather_seconds
        self.resource_version = ""
        self.synced = threading.Event()
        self._stop = threading.Event()
        self._resp: Any = None
        self._rng = random.Random()

    # -- one step each --------------------------------------------------------------------------

    def relist(self) -> None:
        """List the whole collection and remember its version."""
        assert self.kube is not None, "ListWatch needs a client to list"
        items, version = self.kube.list_all(
            self.path, label_selector=self.label_selector, field_selector=self.field_selector, page=self.page,
            accept=self.accept,
        )
        self.on_list(items, version)
        self.resource_version = version
        self.synced.set()

    def handle(self, event: dict[str, Any]) -> None:
        """One watch event: raise for ERROR, move the version, pass changes on (bookmarks only move it)."""
        check_event(event)
        kind = str(event.get("type") or "")
        if kind in ("ADDED", "MODIFIED", "DELETED"):
            self.on_event(kind, event.get("object") or {})
        version = event_version(event)
        if version:
            self.resource_version = version

    def watch_once(self, stop: threading.Event) -> None:
        """Watch from the current version until the server ends the watch, ``stop``, or an error."""
        assert self.kube is not None, "ListWatch needs a client to watch"
        try:
            for event in self.kube.watch(
                self.path,
                resource_version=self.resource_version,
                label_selector=self.label_selector,
                field_selector=self.field_selector,
                timeout_seconds=self.watch_seconds,
                accept=self.accept,
                stop=stop,
                on_open=self._opened,
                gather_seconds=self.gather_seconds,
            ):
                if stop.is_set():
                    return
                self.handle(event)
        except KubeError as exc:
            if exc.gone:  # answered before the stream started
                raise Expired(str(exc)) from None
            raise
        finally:
            self._resp = None

    # -- the loop -------------------------------------------------------------------------------

    def run(self, stop: threading.Event | None = None) -> None:
        """List and watch until ``stop`` is set (or :meth:`stop` is called); never raises.

        A failure waits (jittered exponential backoff) and resumes from the last version.
        """
        if stop is not None:
            self._stop = stop
        stop = self._stop
        wait = self.backoff[0]
        need_list = not self.synced.is_set()
        while not stop.is_set():
            try:
                if need_list:
                    self.relist()
                    need_list = False
                self.watch_once(stop)
                wait = self.backoff[0]
                continue
            except Expired as exc:
                log.info("watch expired: listing again", extra={"fields": {"watch": self.name, "reason": str(exc)}})
                self.synced.clear()
                need_list = True
                continue
            except Exception as exc:  # apiserver away, connection cut, a closed client at shutdown
                if stop.is_set():
                    return
                log.warning("watch failed: retrying", extra={
                    "fields": {"watch": self.name, "error": str(exc)[:300], "wait_s": round(wait, 2)}})
            stop.wait(wait * (0.5 + self._rng.random()))
            wait = min(wait * 2, self.backoff[1])

    def stop(self) -> None:
        """End :meth:`run` now: set its stop flag and close the open watch stream."""
        self._stop.set()
        resp = self._resp
        if resp is not None:
            for method in ("shutdown", "close"):
                fn = getattr(resp, method, None)
                if fn is not None:
                    with contextlib.suppress(Exception):  # a half-read response may complain; it closes anyway
                        fn()

    def _opened(self, resp: Any) -> None:
        self._resp = resp
