"""The report's section for ``taints.json``: from an unhealthy device to its taint and to pods avoiding it."""

from __future__ import annotations

from dralab_kit.bench.common import md_table
from dralab_kit.bench.models.taints import TaintsResult

TITLE = "Device health: from an unhealthy device to its taint and to pods avoiding it"

LABELS = (("fault_to_taint_s", "fault to taint in the ResourceSlice"),
          ("fault_to_avoided_s", "fault to the next pod allocated another device"),
          ("recovery_to_untainted_s", "recovery to the taint gone"),
          ("baseline_allocated_s", "baseline: one pod created to allocated, no fault"))


def section(res: TaintsResult) -> list[str]:
    """Seconds of the cold fault and p50/max of the warm ones, and how many probes still got the sick device."""
    s = res.summary
    rows = [[what, s.cold.get(key, "-"), s.warm.get(key, {}).get("p50", "-"), s.warm.get(key, {}).get("max", "-")]
            for key, what in LABELS]
    return [
        f"Kubernetes {res.kubernetes}, one KWOK node with two fake L4s; the fault hook marks the device a "
        f"healthy node hands out first unhealthy, then a probe pod every {res.interval_s} s until one is "
        f"allocated the other device (read every {res.poll_s} s). The driver reads health every "
        f"{res.driver_health_seconds} s. p50 and max over the {max(0, (s.repeats or 0) - 1)} repeats "
        "after the cold one.",
        "",
        *md_table(["time (s)", "cold (first fault)", "p50", "max"], rows),
        f"{s.avoided}/{s.repeats} faults avoided within the limit; "
        f"probes still allocated the sick device after the fault: {s.sick_allocations_after_fault}; of those "
        f"created after its taint was seen: {s.sick_allocations_after_taint}.",
        "",
    ]
