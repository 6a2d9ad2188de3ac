"""ResourceSlice publication: keep the node's pool on the apiserver equal to what the backend enumerates.

A publish compares the highest-generation slices of the pool with the desired ones (only the fields
dralab sets, so server-side defaults never cause churn). On a difference it creates the new slices
with ``generation + 1`` first, then deletes every older slice, so consumers always see a complete
pool. A watch on the node's slices triggers a republish when someone else deletes or edits them
(the kubelet deletes a driver's slices at its start).

Unhealthy devices carry taints (``taints``: from the health tracker) only where the cluster can take
them (``health.taints_decision``: the server's version from ``GET /version`` and the gates table,
or the operator's ``--device-taints on|off``); otherwise the publisher says so once and publishes
the devices as they are. An apiserver that drops the taints it was sent (the gate is off after all)
gets none again from this publisher, so the pool does not churn.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dralab.driver import health
from dralab.driver.devices import Device
from dralab.driver.metrics import DriverMetrics
from dralab.driver.slices import build_slices, comparable
from dralab.kube import Kube, KubeError, ListWatch
from dralab.kube.paths import SLICES_PATH, node_path, slice_path
from dralab.model.vendors import Vendor
from dralab.util import get_logger, spread_start
from dralab.versions import server_version

log = get_logger("dralab.driver.publisher")


def project(actual: Any, desired: Any) -> Any:
    """``actual`` reduced to the keys ``desired`` has (recursively): what the server kept of what we sent."""
    if isinstance(desired, dict) and isinstance(actual, dict):
        return {k: project(actual[k], v) for k, v in desired.items() if k in actual}
    if isinstance(desired, list) and isinstance(actual, list) and len(desired) == len(actual):
        return [project(a, d) for a, d in zip(actual, desired, strict=True)]
    return actual


def _first_device(slice_: dict[str, Any]) -> str:
    devices = (slice_.get("spec") or {}).get("devices") or []
    return str(devices[0].get("name", "")) if devices else ""


def _sent_taints(slice_: dict[str, Any]) -> bool:
    return any(d.get("taints") for d in (slice_.get("spec") or {}).get("devices") or [])


def _tainted(slices: list[dict[str, Any]]) -> set[str]:
    return {str(d.get("name")) for s in slices for d in (s.get("spec") or {}).get("devices") or [] if d.get("taints")}


def needs_publish(current: list[dict[str, Any]], desired: list[dict[str, Any]], pool: str) -> tuple[bool, int]:
    """Whether ``desired`` differs from the pool on the server, and the server's highest generation (pure)."""
    in_pool = [s for s in current if ((s.get("spec") or {}).get("pool") or {}).get("name") == pool]
    highest = max((int(s["spec"]["pool"].get("generation", 0)) for s in in_pool), default=0)
    if len(in_pool) != len(current) or not in_pool:
        return True, highest
    top = [s for s in in_pool if int(s["spec"]["pool"].get("generation", 0)) == highest]
    if len(top) != len(in_pool) or len(top) != len(desired):
        return True, highest
    top = sorted(top, key=_first_device)
    desired = sorted(desired, key=_first_device)
    want = sorted((comparable(d["spec"]) for d in desired), key=repr)
    have = sorted((comparable(project(s["spec"], d["spec"])) for s, d in zip(top, desired, strict=True)), key=repr)
    owners_ok = all(
        (s.get("metadata") or {}).get("ownerReferences") == d["metadata"].get("ownerReferences")
        for s, d in zip(top, desired, strict=True)
    )
    # our labels (the enforcement mode among them) as we want them; labels others added are theirs
    labels_ok = all(
        project((s.get("metadata") or {}).get("labels") or {}, d["metadata"].get("labels") or {})
        == (d["metadata"].get("labels") or {})
        for s, d in zip(top, desired, strict=True)
    )
    # the projection keeps only what we send: a device whose taints we no longer send must still differ
    tainted_ok = _tainted(top) == _tainted(desired)
    return (want != have or not owners_ok or not labels_ok or not tainted_ok), highest


@dataclass
class PublishResult:
    changed: bool
    generation: int
    slices: list[str]


class SlicePublisher:
    """Publishes one driver's pool for one node."""

    def __init__(
        self,
        client: Kube,
        vendor: Vendor,
        node: str,
        devices: Callable[[], list[Device]],
        metrics: DriverMetrics | None = None,
        resync_seconds: float = 300.0,
        enforcement: str | None = None,
        taints: Callable[[list[str]], dict[str, list[dict[str, Any]]]] | None = None,
        taint_mode: str = health.AUTO,
    ) -> None:
        self.client = client
        self.taints = taints  # device names -> the tainted ones' taints (the health tracker)
        self.taint_mode = taint_mode
        self._taint_decision: health.TaintDecision | None = None
        self._taints_said = False  # "taints unavailable" logged once
        self.enforcement = enforcement  # the driver's effective mode, published as a slice label
        self.vendor = vendor
        self.driver = vendor.driver
        self.node = node
        self.devices = devices
        self.metrics = metrics or DriverMetrics()
        self.resync_seconds = resync_seconds
        self.published = threading.Event()
        self._trigger = threading.Event()
        self._node_uid: str | None = None

    def _selector(self) -> str:
        return f"spec.nodeName={self.node},spec.driver={self.driver}"

    def node_uid(self) -> str:
        if self._node_uid is None:
            node = self.client.get(node_path(self.node), missing_ok=True)
            if node is None:
                message = f"Node {self.node} does not exist: slices need it as their owner"
                raise KubeError(404, "NotFound", {"message": message})
            self._node_uid = node["metadata"]["uid"]
        return self._node_uid

    def current(self) -> list[dict[str, Any]]:
        return list(self.client.list(SLICES_PATH, field_selector=self._selector()).get("items") or [])

    def taint_decision(self) -> health.TaintDecision:
        """Whether this cluster takes device taints; the server's version is read once (again after a failure)."""
        if self._taint_decision is not None:
            return self._taint_decision
        version = None
        if self.taint_mode == health.AUTO:
            try:
                version = server_version(self.client.get("/version") or {})
            except Exception as exc:  # the version decides taints only: never fail the publish on it
                log.warning("reading the apiserver's version failed", extra={"fields": {"error": str(exc)}})
        decision = health.taints_decision(self.taint_mode, version)
        if version is not None or self.taint_mode != health.AUTO:
            self._taint_decision = decision
        return decision

    def _desired_taints(self, devices: list[Device]) -> dict[str, list[dict[str, Any]]]:
        """The taints to publish: the tracker's, where the cluster takes them (else {} and one log line)."""
        wanted = self.taints([d.name for d in devices]) if self.taints is not None else {}
        wanted = {name: t for name, t in wanted.items() if t}
        if not wanted:
            return {}
        decision = self.taint_decision()
        if decision.enabled:
            return wanted
        if not self._taints_said:
            self._taints_said = True
            log.warning(
                "device taints unavailable: unhealthy devices stay published as they are",
                extra={"fields": {"driver": self.driver, "devices": sorted(wanted), "why": decision.why}},
            )
        return {}

    def publish_once(self) -> PublishResult:
        """Make the server's pool match the devices; returns whether anything changed."""
        uid = self.node_uid()
        devices = [d for d in self.devices() if d.vendor == self.vendor.key]
        taints = self._desired_taints(devices)
        current = self.current()
        desired = build_slices(
            self.vendor, self.node, devices, generation=1, node_uid=uid, enforcement=self.enforcement,
            taints=taints,
        )
        changed, highest = needs_publish(current, desired, self.node)
        if not changed:
            self.published.set()
            return PublishResult(False, highest, [s["metadata"]["name"] for s in current])
        generation = highest + 1
        created = []
        slices = build_slices(
            self.vendor, self.node, devices, generation=generation, node_uid=uid, enforcement=self.enforcement,
            taints=taints,
        )
        for body in slices:
            made = self.client.create(SLICES_PATH, body)
            created.append(made["metadata"]["name"])
            if "allowMultipleAllocations" not in str(made.get("spec")):
                log.error(
                    "the apiserver dropped allowMultipleAllocations: enable the DRAConsumableCapacity feature gate",
                    extra={"fields": {"driver": self.driver}},
                )
            if taints and _sent_taints(body) and not _sent_taints(made):
                self._taint_decision = health.TaintDecision(False, "the apiserver dropped the device taints")
                log.error(
                    "the apiserver dropped the device taints: enable the DRADeviceTaints feature gate "
                    "(apiserver and scheduler); unhealthy devices are published untainted from now on",
                    extra={"fields": {"driver": self.driver}},
                )
                self._taints_said = True
        for old in current:
            self.client.delete(slice_path(old["metadata"]["name"]), missing_ok=True)
        self.metrics.publishes.labels(self.driver, "changed").inc()
        self.metrics.generation.labels(self.driver).set(generation)
        log.info(
            "published ResourceSlices",
            extra={
                "fields": {"driver": self.driver, "generation": generation, "slices": created, "deleted": len(current)}
            },
        )
        self.published.set()
        return PublishResult(True, generation, created)

    def trigger(self) -> None:
        self._trigger.set()

    def run(self, stop: threading.Event) -> None:
        """Publish now, then on every trigger or resync period (the first at a random point within it),
        until ``stop``; errors retry with backoff."""
        backoff = 0.5
        resync = spread_start(self.resync_seconds)  # the first: a fleet started together resyncs apart
        while not stop.is_set():
            self._trigger.clear()
            try:
                with self.metrics.work(self.driver, "publish"):
                    self.publish_once()
                backoff = 0.5
                wait, resync = resync, self.resync_seconds
            except Exception as exc:  # never let the publisher thread die: log, back off, retry
                self.metrics.publishes.labels(self.driver, "error").inc()
                log.warning(
                    "publishing ResourceSlices failed", extra={"fields": {"driver": self.driver, "error": str(exc)}}
                )
                wait, backoff = backoff, min(backoff * 2, 10.0)
            # Sleep until a trigger or the resync, without polling: whoever sets ``stop`` triggers too
            # (DriverProcess.stop), so a fleet's thousands of idle publishers never wake for nothing.
            deadline = time.monotonic() + wait
            while not stop.is_set() and not self._trigger.is_set() and time.monotonic() < deadline:
                self._trigger.wait(max(0.0, deadline - time.monotonic()))

    def watch(self, stop: threading.Event) -> None:
        """Trigger a republish whenever a slice of this pool is deleted or changed by someone else.

        A (re)list triggers one too: after a 410 the deletions in between are not replayed.
        """
        ListWatch(
            self.client,
            SLICES_PATH,
            field_selector=self._selector(),
            on_list=lambda items, version: self.trigger(),
            on_event=lambda kind, obj: self.trigger() if kind in ("DELETED", "MODIFIED") else None,
            # A watch resumes where it ended, so its length only sets how often it is opened again:
            # 30 s made a 500-node fleet open 17 slice watches a second at rest. Five minutes, as
            # client-go's reflectors; a watch stuck on a dead connection is the resync's to cover.
            watch_seconds=300,
            backoff=(1.0, 10.0),
            name=f"slices of {self.driver} on {self.node}",
        ).run(stop)

    def delete_all(self) -> int:
        """Delete this pool's slices (used by tests and when a driver is removed for good)."""
        items = self.current()
        for item in items:
            self.client.delete(slice_path(item["metadata"]["name"]), missing_ok=True)
        return len(items)
