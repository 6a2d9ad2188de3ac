"""Leader election on a coordination.k8s.io/v1 Lease: exactly one webhook process runs the janitor.

Several server workers per replica, and several replicas, all answer admissions; background work
(the janitor, the budget status writer, HAMi-DRA adoption) must run once. Each candidate keeps a
:class:`LeaderElector`; the one whose identity the Lease names is the leader.

Rules, as Kubernetes' own components use them:
- Every write carries the ``resourceVersion`` that was read, so two candidates racing for one Lease
  cannot both win: the apiserver answers the loser 409 (optimistic concurrency).
- Expiry is judged on this process's monotonic clock, from when it last *saw the record change*,
  never from the timestamps written by another host (clock skew between nodes cannot steal a lease).
- A leader that cannot renew within ``renew_deadline`` stops its background work first; since
  ``renew_deadline < lease_seconds``, it has stopped before anyone else may take over.
- Releasing (clean shutdown) clears the holder so a successor takes over at once, not after expiry.
"""

from __future__ import annotations

import datetime as dt
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from dralab.kube import KubeError
from dralab.kube.paths import segment
from dralab.util import get_logger

log = get_logger("dralab.webhook.controllers.lease")

LEASE_GROUP = "/apis/coordination.k8s.io/v1"


class LeaseApi(Protocol):
    """The calls the elector makes (:class:`dralab.kube.Kube` has them)."""

    def request(self, method: str, path: str, *, body: Any = None, timeout: float | None = None) -> Any: ...


def lease_path(namespace: str, name: str | None = None) -> str:
    base = f"{LEASE_GROUP}/namespaces/{segment(namespace)}/leases"
    return f"{base}/{segment(name)}" if name else base


def micro_time(epoch: float) -> str:
    """A Kubernetes MicroTime (RFC 3339 with microseconds, UTC)."""
    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def default_identity() -> str:
    """The pod's name where the chart provides it (``POD_NAME``), else the host name; plus a unique suffix.

    The suffix keeps two processes of one pod (or a restarted one) from mistaking each other's lease for theirs.
    """
    base = os.environ.get("POD_NAME") or socket.gethostname() or "dralab"
    return f"{base}_{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class LeaseTiming:
    """How long a lease lasts, how long a leader may go without renewing, how often candidates try."""

    lease_seconds: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if not 0 < self.retry_period < self.renew_deadline < self.lease_seconds:
            raise ValueError(
                "leader election needs 0 < retry period < renew deadline < lease duration, got "
                f"{self.retry_period:g} < {self.renew_deadline:g} < {self.lease_seconds:g}"
            )


class LeaderElector:
    """One candidate for one Lease. :meth:`step` is one try (pure logic over API answers, testable);
    :meth:`start` runs steps in a thread and calls ``on_start``/``on_stop`` as leadership comes and goes.
    """

    def __init__(
        self,
        api: LeaseApi,
        namespace: str,
        name: str,
        identity: str | None = None,
        timing: LeaseTiming | None = None,
        on_start: Callable[[], None] | None = None,
        on_stop: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.api = api
        self.namespace = namespace
        self.name = name
        self.identity = identity or default_identity()
        self.timing = timing or LeaseTiming()
        self.on_start = on_start
        self.on_stop = on_stop
        self.clock = clock
        self.wall = wall
        self.leading = False
        self._observed: tuple[str, str, str] | None = None  # (holder, renewTime, resourceVersion) last seen
        self._observed_at = 0.0  # clock() when that record was first seen
        self._renewed_at = 0.0  # clock() of our last successful acquire or renew
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- one try ---------------------------------------------------------------------------

    def _spec(self, previous: dict[str, Any] | None) -> dict[str, Any]:
        now = micro_time(self.wall())
        spec = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, round(self.timing.lease_seconds)),
            "renewTime": now,
            "acquireTime": now,
            "leaseTransitions": 0,
        }
        if previous is not None:
            transitions = int(previous.get("leaseTransitions") or 0)
            if previous.get("holderIdentity") == self.identity:
                spec["acquireTime"] = previous.get("acquireTime") or now
                spec["leaseTransitions"] = transitions
            else:
                spec["leaseTransitions"] = transitions + 1
        return spec

    def _expired(self, holder: str, renew_time: str, version: str, duration: float) -> bool:
        record = (holder, renew_time, version)
        now = self.clock()
        if record != self._observed:
            self._observed, self._observed_at = record, now
        return now - self._observed_at >= duration

    def step(self) -> bool:
        """Acquire or renew once; True while this candidate holds the lease (also updates :attr:`leading`)."""
        held = self._try()
        now = self.clock()
        if held:
            self._renewed_at = now
            self._set_leading(True)
        elif self.leading and now - self._renewed_at >= self.timing.renew_deadline:
            log.warning("leadership lost: the lease could not be renewed in time",
                        extra={"fields": {"lease": f"{self.namespace}/{self.name}", "identity": self.identity}})
            self._set_leading(False)
        return self.leading

    def _try(self) -> bool:
        path = lease_path(self.namespace, self.name)
        try:
            lease = self.api.request("GET", path)
        except KubeError as exc:
            if exc.status != 404:
                log.info("cannot read the lease", extra={"fields": {"lease": path, "error": str(exc)}})
                return False
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": self.namespace}, "spec": self._spec(None)}
            try:
                self.api.request("POST", lease_path(self.namespace), body=body)
            except KubeError as create_exc:  # 409: another candidate created it first
                if create_exc.status != 409:
                    log.info("cannot create the lease", extra={"fields": {"lease": path, "error": str(create_exc)}})
                return False
            return True
        meta = lease.get("metadata") or {}
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        version = str(meta.get("resourceVersion") or "")
        duration = float(spec.get("leaseDurationSeconds") or self.timing.lease_seconds)
        if holder and holder != self.identity and not self._expired(
            holder, str(spec.get("renewTime") or ""), version, duration
        ):
            return False
        updated = {**lease, "metadata": {**meta, "resourceVersion": version}, "spec": {**spec, **self._spec(spec)}}
        try:
            self.api.request("PUT", path, body=updated)
        except KubeError as exc:  # 409: someone else wrote it since we read it
            if exc.status != 409:
                log.info("cannot update the lease", extra={"fields": {"lease": path, "error": str(exc)}})
            return False
        return True

    def release(self) -> bool:
        """Give the lease up (only if we hold it): the holder is cleared so a successor need not wait."""
        was_leading = self.leading
        self._set_leading(False)
        if not was_leading:
            return False
        path = lease_path(self.namespace, self.name)
        try:
            lease = self.api.request("GET", path)
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != self.identity:
                return False
            released = {**spec, "holderIdentity": None, "leaseDurationSeconds": 1,
                        "renewTime": micro_time(self.wall())}
            self.api.request("PUT", path, body={**lease, "spec": released})
            return True
        except KubeError as exc:
            log.info("could not release the lease; it expires on its own", extra={"fields": {"error": str(exc)}})
            return False

    def _set_leading(self, leading: bool) -> None:
        if leading == self.leading:
            return
        self.leading = leading
        log.info("leadership " + ("acquired" if leading else "ended"),
                 extra={"fields": {"lease": f"{self.namespace}/{self.name}", "identity": self.identity}})
        callback = self.on_start if leading else self.on_stop
        if callback is not None:
            try:
                callback()
            except Exception:
                log.exception("leadership callback failed")

    # -- the loop --------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="leader-election", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.step()
            except Exception:  # never let the elector die: a dead elector would lead forever
                log.exception("leader election step failed")
            # Candidates retry every retry period; a leader renews on the same beat.
            self._stop.wait(self.timing.retry_period)

    def stop(self) -> None:
        """Stop trying and release the lease (stopping the background work first)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.timing.renew_deadline)
        self.release()
