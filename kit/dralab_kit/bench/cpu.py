"""CPU accounting from Linux ``/proc`` for the benchmarks: per process tree, per cluster component, per machine.

CPU seconds are far less sensitive to a busy machine than wall time, and the machine's busy share says
whether a latency figure was taken on a saturated machine (where every process queues for a core).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")  # /proc counts CPU time in these
CPU_COMPONENTS = ("apiserver", "etcd", "scheduler", "webhook", "kwok", "kubelet", "driver", "controller-manager")


def process_cpu(pid: int) -> float:
    """User plus system CPU seconds of process ``pid`` so far (Linux /proc); 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS_PER_SECOND


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            out += [int(c) for c in (task / "children").read_text().split()]
    except OSError:
        pass
    return out


def tree_cpu(pid: int) -> float:
    """CPU seconds of ``pid`` and its descendants (the supervisor and every worker, janitor threads included)."""
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        total += process_cpu(current)
        todo += _children(current)
    return total


def settled_cpu(pid: int, quiet: float = 0.02, limit: float = 5.0) -> float:
    """The tree's CPU once trailing work (the janitor's watch events) has stopped: read until a 0.5 s
    window adds less than ``quiet`` CPU seconds, at most ``limit`` seconds."""
    last = tree_cpu(pid)
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = tree_cpu(pid)
        if now - last < quiet:
            return now
        last = now
    return last


@dataclass
class CpuMeter:
    """CPU seconds of the cluster's processes (each with its children: the webhook's workers), from /proc.

    A component may be several processes (a fleet's node layer: ``driver/shard-0``, ``driver/shard-1``,
    ...): its reading is their sum.
    """

    pids: dict[str, list[int]]

    @classmethod
    def for_cluster(cls, handle: Any) -> CpuMeter:
        comps = (handle.state or {}).get("components") or {}
        pids = {}
        for name in CPU_COMPONENTS:
            found = [rec["pid"] for key, rec in comps.items()
                     if (key == name or key.startswith(f"{name}/")) and rec.get("pid")]
            if found:
                pids[name] = found
        return cls(pids)

    def read(self) -> dict[str, float]:
        return {name: sum(tree_cpu(pid) for pid in pids) for name, pids in self.pids.items()}


def machine_cpu(stat: str | None = None) -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine so far, every core together (``/proc/stat``'s ``cpu`` line).

    Busy is everything but idle and iowait; steal counts as busy (the core was not ours to use).
    """
    text = stat if stat is not None else Path("/proc/stat").read_text()
    line = next(x for x in text.splitlines() if x.startswith("cpu "))
    ticks = [int(v) for v in line.split()[1:]]
    total = sum(ticks[:8])  # user nice system idle iowait irq softirq steal (guest time is inside user)
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    return (total - idle) / TICKS_PER_SECOND, total / TICKS_PER_SECOND


def settle_machine(below: float = 0.35, window: float = 0.5, limit: float = 30.0) -> float | None:
    """Wait until the machine's busy share over one ``window`` is under ``below`` (at most ``limit`` seconds);
    returns the last share seen (None without ``/proc/stat``).

    What one measurement leaves behind (watch events of thousands of claims, their deletion, garbage
    collection in every component) keeps the cores busy for seconds after it ends; a fixed pause either
    wastes time or charges that work to the next measurement.
    """
    deadline = time.monotonic() + limit
    share = None
    while True:
        try:
            busy0, total0 = machine_cpu()
            time.sleep(window)  # the measuring window itself
            busy1, total1 = machine_cpu()
        except (OSError, StopIteration):
            return None
        share = (busy1 - busy0) / (total1 - total0) if total1 > total0 else 0.0
        if share < below or time.monotonic() >= deadline:
            return round(share, 3)
