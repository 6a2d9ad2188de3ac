"""An admission lock held on a ShareBudget through the apiserver, shared by every worker and replica.

The webhook's in-process lock serializes one process's admissions; server workers and replicas
are other processes. So before it reads a namespace's claims, the budget gate also takes this lock:
the annotation ``dralab.io/admission-lock: "<holder> <expiry>"`` on each ShareBudget the pod
touches, written with the budget's resourceVersion as precondition (compare-and-swap), and removed
once the pod's claims exist. The next holder's claim LIST then includes them: no overshoot across
processes. A holder that died leaves a lock that expires after :data:`LOCK_TTL_SECONDS` (longer than
the longest admission deadline, so a live holder never loses it).
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Callable
from typing import Any

import anyio

from dralab.kube import AsyncKube, Kube, KubeError
from dralab.kube.aio import call_api
from dralab.kube.client import PATCH_TYPES
from dralab.util import get_logger

log = get_logger("dralab.webhook.controllers.budget_lock")

LOCK_ANNOTATION = "dralab.io/admission-lock"
LOCK_TTL_SECONDS = 30.0  # the admission deadline is at most 29 s
RETRY_START = 0.005
RETRY_MAX = 0.1


def holder_identity() -> str:
    """This process: host, pid and a random suffix (a restarted process never mistakes an old lock for its own)."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


def lock_free(value: str | None, now: float) -> bool:
    """Whether a lock annotation value leaves the budget free: absent, unreadable or expired."""
    if not value:
        return True
    try:
        return float(value.rsplit(" ", 1)[1]) <= now
    except (IndexError, ValueError):
        return True


class BudgetLock:
    """Take and give back the apiserver-held lock on ShareBudgets (see the module docstring)."""

    def __init__(
        self,
        api: Kube | AsyncKube,
        identity: str | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.api = api
        self.identity = identity or holder_identity()
        self.wall_clock = wall_clock

    async def _call(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        fn = self.api.request
        kwargs: dict[str, Any] = {}
        if body is not None:
            kwargs = {"body": body, "content_type": PATCH_TYPES["merge"]}
        return await call_api(fn, method, path, **kwargs)

    async def acquire(self, path: str, obj: dict[str, Any] | None = None) -> str:
        """Hold the lock of the ShareBudget at ``path`` (``obj``: a recent copy, saves a GET); returns the token."""
        delay = RETRY_START
        while True:
            if obj is None:
                obj = await self._call("GET", path)
            meta = obj.get("metadata") or {}
            if lock_free((meta.get("annotations") or {}).get(LOCK_ANNOTATION), self.wall_clock()):
                token = f"{self.identity}/{uuid.uuid4().hex[:8]} {self.wall_clock() + LOCK_TTL_SECONDS:.3f}"
                patch = {"metadata": {"resourceVersion": meta.get("resourceVersion"),
                                      "annotations": {LOCK_ANNOTATION: token}}}
                try:
                    await self._call("PATCH", path, patch)
                    return token
                except KubeError as exc:
                    if exc.status != 409:
                        raise
            obj = None  # taken, or changed under us: look again after a short wait
            await anyio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX)

    async def release(self, path: str, token: str) -> None:
        """Give the lock back if it is still ours; a failure leaves it to expire (logged, never raised)."""
        for _ in range(5):
            try:
                obj = await self._call("GET", path)
                meta = obj.get("metadata") or {}
                if (meta.get("annotations") or {}).get(LOCK_ANNOTATION) != token:
                    return
                patch = {"metadata": {"resourceVersion": meta.get("resourceVersion"),
                                      "annotations": {LOCK_ANNOTATION: None}}}
                await self._call("PATCH", path, patch)
                return
            except KubeError as exc:
                if exc.status == 404:
                    return
                if exc.status != 409:
                    log.warning("budget lock not released; it expires by itself",
                                extra={"fields": {"budget": path, "error": str(exc)}})
                    return

