"""Device health as DRA device taints (KEP-5055): what to publish, and whether the cluster can take it.

The backend reports each device's health (``Backend.health``); ``HealthTracker`` remembers since
when a device has been unhealthy and turns that into the device's taints (pure, with an injected
clock): ``dralab.io/unhealthy`` with effect ``NoSchedule`` (new claims are not allocated the device;
running ones keep it), and, when ``noexecute_after`` is set, ``NoExecute`` once the device has been
unhealthy that long (the device taint eviction controller then evicts the pods using it). A device
that recovers loses its taint. ``timeAdded`` is the time the driver first saw the device unhealthy
(for NoExecute: that time plus ``noexecute_after``), so a republish never moves it.

Taints need the DRADeviceTaints gate on the apiserver and the scheduler. ``taints_decision`` says
from the server's version and the gates table (``dralab.versions.gate_stage``) whether
to publish them: ``auto`` publishes where the gate is on by default (beta from 1.36, GA in 1.37);
``on`` is the operator saying the cluster enables it (1.35 with ``--feature-gates
DRADeviceTaints=true``); ``off`` never publishes them. Where taints are not published the driver
logs it once and publishes the device as it was.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from dralab.driver.devices import Health
from dralab.util import get_logger

log = get_logger("dralab.driver.health")

TAINT_KEY = "dralab.io/unhealthy"
NO_SCHEDULE = "NoSchedule"
NO_EXECUTE = "NoExecute"
GATE = "DRADeviceTaints"
AUTO, ON, OFF = "auto", "on", "off"
TAINT_MODES = (AUTO, ON, OFF)
MAX_DEVICES_WITH_TAINTS = 64  # the apiserver's limit per ResourceSlice once any device has taints


def label_value(text: str) -> str:
    """``text`` as a label value (a taint's value): letters, digits, ``-_.``, 63 at most, alphanumeric ends."""
    value = re.sub(r"[^A-Za-z0-9_.-]+", "-", text.strip())[:63]
    return value.strip("-_.")


def timestamp(seconds: float) -> str:
    """RFC 3339 in whole seconds, as the apiserver stores a ``metav1.Time``."""
    return datetime.fromtimestamp(int(seconds), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class TaintDecision:
    enabled: bool
    why: str


def taints_decision(mode: str, version: str | None) -> TaintDecision:
    """Whether to publish device taints to a cluster of ``version`` (None: unknown) in ``mode`` (pure)."""
    if mode == OFF:
        return TaintDecision(False, "device taints are off (--device-taints off)")
    if mode == ON:
        return TaintDecision(True, f"the operator says the cluster enables {GATE} (--device-taints on)")
    if mode != AUTO:
        raise ValueError(f"device taint mode {mode!r} is not one of {', '.join(TAINT_MODES)}")
    if version is None:
        return TaintDecision(False, "the apiserver's version is unknown (GET /version failed)")
    from dralab.errors import UserError
    from dralab.versions import gate_stage

    try:
        stage = gate_stage(GATE, version)
    except UserError as exc:
        return TaintDecision(False, f"Kubernetes {version}: {exc}")
    if stage is None:
        return TaintDecision(False, f"Kubernetes {version} has no {GATE} feature gate")
    name, on_by_default, _locked = stage
    if on_by_default:
        return TaintDecision(True, f"{GATE} is {name} and on by default in Kubernetes {version}")
    return TaintDecision(
        False,
        f"{GATE} is {name} and off by default in Kubernetes {version}: pass --device-taints on "
        "if the cluster enables it (apiserver and scheduler --feature-gates DRADeviceTaints=true)",
    )


@dataclass(frozen=True)
class Unhealthy:
    since: float  # wall-clock seconds when the driver first saw the device unhealthy
    reason: str


def taints_for(state: Unhealthy | None, now: float, noexecute_after: float | None) -> list[dict[str, Any]]:
    """The taints of one device (pure): none when healthy, NoSchedule, then NoExecute after the delay."""
    if state is None:
        return []
    taint: dict[str, Any] = {"key": TAINT_KEY}
    value = label_value(state.reason)
    if value:
        taint["value"] = value
    if noexecute_after is not None and noexecute_after >= 0 and now >= state.since + noexecute_after:
        taint["effect"] = NO_EXECUTE
        taint["timeAdded"] = timestamp(state.since + noexecute_after)
    else:
        taint["effect"] = NO_SCHEDULE
        taint["timeAdded"] = timestamp(state.since)
    return [taint]


class HealthTracker:
    """Since when each device has been unhealthy, from successive health reports; thread-safe."""

    def __init__(self, noexecute_after: float | None = None, clock: Callable[[], float] = time.time) -> None:
        self.noexecute_after = noexecute_after if noexecute_after and noexecute_after > 0 else None
        self.clock = clock
        self._lock = threading.Lock()
        self._unhealthy: dict[str, Unhealthy] = {}

    def update(self, report: Mapping[str, Health]) -> list[tuple[str, Health]]:
        """Take one report; returns the devices whose health changed (a device left out keeps its state)."""
        now = self.clock()
        changed = []
        with self._lock:
            for name, health in report.items():
                known = self._unhealthy.get(name)
                if health.healthy and known is not None:
                    del self._unhealthy[name]
                    changed.append((name, health))
                elif not health.healthy and (known is None or known.reason != health.reason):
                    # a new reason keeps the first time: the device has been unhealthy since then
                    self._unhealthy[name] = Unhealthy(since=known.since if known else now, reason=health.reason)
                    changed.append((name, health))
        return changed

    def unhealthy(self) -> dict[str, Unhealthy]:
        with self._lock:
            return dict(self._unhealthy)

    def taints(self, names: Iterable[str] | None = None) -> dict[str, list[dict[str, Any]]]:
        """Device name -> its taints now, for the tainted devices among ``names`` (None: all)."""
        now = self.clock()
        with self._lock:
            states = dict(self._unhealthy)
        wanted = states.keys() if names is None else [n for n in names if n in states]
        return {n: taints_for(states[n], now, self.noexecute_after) for n in wanted}


class HealthMonitor:
    """Polls the backend's health, feeds the tracker, and calls ``on_change`` when any taint changes."""

    def __init__(
        self,
        health: Callable[[], Mapping[str, Health]],
        tracker: HealthTracker,
        on_change: Callable[[], None],
        period: float = 5.0,
        on_report: Callable[[str, Health], None] | None = None,
    ) -> None:
        self.health = health
        self.tracker = tracker
        self.on_change = on_change
        self.period = period
        self.on_report = on_report
        self._last: dict[str, list[dict[str, Any]]] = {}

    def poll(self) -> bool:
        """One health round; True when the taints changed (and ``on_change`` was called)."""
        for name, health in self.tracker.update(self.health()):
            fields = {"device": name, "reason": health.reason}
            if health.healthy:
                log.info("device healthy again", extra={"fields": fields})
            else:
                log.warning("device unhealthy", extra={"fields": fields})
            if self.on_report is not None:
                self.on_report(name, health)
        taints = self.tracker.taints()
        if taints == self._last:
            return False
        self._last = taints
        self.on_change()
        return True

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                self.poll()
            except Exception as exc:  # a failed health query must never stop the driver
                log.warning("device health query failed", extra={"fields": {"error": str(exc)}})
            stop.wait(self.period)
