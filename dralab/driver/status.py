"""Claim device status (KEP-4817): after Prepare, the claim's ``status.devices`` says what was applied.

For each of its devices in a freshly prepared claim the driver writes one ``AllocatedDeviceStatus``:
``driver``, ``pool``, ``device``, ``shareID`` (the allocation's), a ``Ready`` condition, and as
``data`` the quota it applied: ``memoryMiB``, ``cores`` (percent of the device; absent when the
claim reserved no compute), the enforcement ``profile`` and ``enforcement`` mode (``required``:
the library enforces it; ``none``: nobody does).

The write is a server-side apply of the ``status`` subresource with this driver's own field manager
(``dralab-<driver>``): ``status.devices`` is a map list keyed by driver, device, pool and shareID, so
the apply owns exactly this driver's entries and leaves other drivers' alone. ``metadata.uid`` in
the body makes a claim replaced under the same name refuse it. It needs ``patch`` on
``resourceclaims/status`` (the chart's driver ClusterRole); the apiserver answers a stale uid with
422 (``metadata.uid: field is immutable``), and an entry for a device the claim was not allocated
with 422 too. Writes run on a thread of their own
after Prepare has answered, so the kubelet never waits for them; a failed write is retried a few
times, then logged (the claim's pods run all the same).
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from dralab.driver.cdi import ClaimRef, PreparedDevice
from dralab.driver.health import timestamp
from dralab.kube import Kube, KubeError
from dralab.kube.paths import claim_path
from dralab.model.enforcement import DeviceShare
from dralab.util import get_logger

log = get_logger("dralab.driver.status")

API_VERSION = "resource.k8s.io/v1"
READY = "Ready"
ATTEMPTS = 4
GONE = (404, 409)  # the claim is gone or was replaced under its name: nothing to write
FINAL = (400, 403, 422)  # refused (no permission, not allocated these devices any more): retrying cannot help
IDLE_CHECK_S = 60.0  # an idle writer looks at its stop flag this often (close() ends it at once)


def field_manager(driver: str) -> str:
    """The field manager of one driver's entries (managers are at most 128 characters)."""
    return f"dralab-{driver}"[:128]


def applied_data(share: DeviceShare, profile: str, mode: str) -> dict[str, Any]:
    """The quota applied to one device of a claim, as the entry's ``data``."""
    data: dict[str, Any] = {"memoryMiB": share.memory_mib}
    if share.reserves_compute:
        data["cores"] = share.cores
    data["profile"] = profile
    data["enforcement"] = mode
    return data


def device_entries(
    driver: str,
    devices: Sequence[PreparedDevice],
    shares: Sequence[DeviceShare],
    profile: str,
    mode: str,
    now: float,
) -> list[dict[str, Any]]:
    """This driver's ``status.devices`` entries for one prepared claim (pure; same order as the results)."""
    entries = []
    enforced = "enforced by the enforcement library" if mode != "none" and profile != "none" else "not enforced"
    for dev, share in zip(devices, shares, strict=True):
        entry: dict[str, Any] = {"driver": driver, "pool": dev.pool_name, "device": dev.device_name}
        if dev.share_id:
            entry["shareID"] = dev.share_id
        entry["conditions"] = [
            {
                "type": READY,
                "status": "True",
                "reason": "Prepared",
                "message": f"CDI spec written; quota {enforced}",
                "lastTransitionTime": timestamp(now),
            }
        ]
        entry["data"] = applied_data(share, profile, mode)
        entries.append(entry)
    return entries


def apply_body(ref: ClaimRef, entries: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The server-side apply body of the claim's status subresource: only this driver's entries."""
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceClaim",
        "metadata": {"name": ref.name, "namespace": ref.namespace, "uid": ref.uid},
        "status": {"devices": list(entries)},
    }


def status_path(ref: ClaimRef) -> str:
    return claim_path(ref.namespace, ref.name) + "/status"


@dataclass(frozen=True)
class StatusUpdate:
    driver: str
    claim: ClaimRef
    entries: tuple[dict[str, Any], ...]


class StatusWriter:
    """Applies claim device status on its own thread (``submit`` never blocks Prepare)."""

    def __init__(
        self,
        client: Kube,
        on_result: Callable[[str, str], None] | None = None,
        backoff: float = 0.5,
        work: Callable[[str], AbstractContextManager[None]] | None = None,
    ) -> None:
        self.client = client
        self.on_result = on_result  # (driver, result): ok | gone | error
        self.work = work  # (driver) -> a block whose CPU is counted as one status write
        self.backoff = backoff
        self._queue: queue.Queue[StatusUpdate | None] = queue.Queue()

    def submit(self, update: StatusUpdate) -> None:
        self._queue.put(update)

    def write(self, update: StatusUpdate) -> str:
        """Apply one update now, retrying transient failures; returns ok, gone or error."""
        with self.work(update.driver) if self.work else contextlib.nullcontext():
            return self._write(update)

    def _write(self, update: StatusUpdate) -> str:
        body = apply_body(update.claim, update.entries)
        fields = {"driver": update.driver, "claim": f"{update.claim.namespace}/{update.claim.name}"}
        for attempt in range(ATTEMPTS):
            try:
                self.client.patch(
                    status_path(update.claim), body, kind="apply", manager=field_manager(update.driver), force=True
                )
                return self._done(update, "ok")
            except KubeError as exc:
                if exc.status in GONE:
                    log.info("claim status not written: claim gone or changed", extra={"fields": {**fields,
                                                                                             "error": str(exc)}})
                    return self._done(update, "gone")
                if exc.status in FINAL or attempt == ATTEMPTS - 1:
                    log.warning("writing the claim's device status failed", extra={"fields": {**fields,
                                                                                           "error": str(exc)}})
                    return self._done(update, "error")
            time.sleep(self.backoff * 2**attempt)
        return self._done(update, "error")

    def _done(self, update: StatusUpdate, result: str) -> str:
        if self.on_result is not None:
            self.on_result(update.driver, result)
        return result

    def close(self) -> None:
        """End :meth:`run` once what is queued before it is written."""
        self._queue.put(None)

    def run(self, stop: threading.Event) -> None:
        """Write queued updates until :meth:`close` (or ``stop``, seen at the next update or minute)."""
        while not stop.is_set():
            try:
                update = self._queue.get(timeout=IDLE_CHECK_S)
            except queue.Empty:
                continue
            if update is None:
                return
            try:
                self.write(update)
            except Exception as exc:  # never let the writer die
                log.warning("claim status writer failed", extra={"fields": {"error": str(exc)}})

    def drain(self, timeout: float = 5.0) -> None:
        """Write what is queued now (tests, shutdown)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                update = self._queue.get_nowait()
            except queue.Empty:
                return
            if update is not None:
                self.write(update)
