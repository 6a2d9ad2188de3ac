"""The report's section for ``pains.json`` and ``pains-node.json``: what DRA fixes, per profile."""

from __future__ import annotations

from dralab_kit.bench.common import md_table
from dralab_kit.bench.models.pains import PainsResult

TITLE = "What DRA fixes: budgets, preemption of sharers, a failing claim"
TITLE_NODE = "What DRA fixes, on the node profile (a real kubelet)"


def section(res: PainsResult) -> list[str]:
    """The budget burst's overshoot, a failing claim's delay of its neighbours, and preemption of sharers."""
    burst, stall, pre = res.budget_burst, res.failed_prepare, res.preemption
    preempted = pre.kube_scheduler_preempted
    rows = [
        ["budget burst: overshoot", f"{burst.overshoot_bytes} bytes",
         f"{burst.pods} pods of {burst.pod_memory_mib} MiB at once against {burst.budget_mib} MiB: "
         f"{burst.admitted} admitted (expected {burst.expected_admitted}), {burst.denied} denied"],
        ["failed prepare: extra delay of neighbours", f"{stall.extra_delay_seconds} s",
         f"slowest neighbour minus slowest baseline pod (medians: {stall.extra_delay_median_seconds} s); "
         f"neighbours to Running {', '.join(str(n) for n in stall.neighbour_running_seconds)} s; baseline pods "
         f"before the fault {', '.join(str(b) for b in stall.baseline_running_seconds)} s; recovery after the "
         f"fault is lifted {stall.recovery_seconds} s"],
        ["preemption of sharers by kube-scheduler 1.35", "none" if preempted is False else str(preempted),
         "; ".join(f"{pod}: {msg}" for pod, msg in pre.scheduler_reasons.items())],
        ["manual eviction of one sharer to preemptor Running", f"{pre.evict_to_running_seconds} s",
         f"claim allocated after {pre.evict_to_allocated_seconds} s"],
    ]
    return [
        f"The three pain labs replayed on the `{res.profile}` profile (inventory `team-gpus`) and a burst of",
        "pods against a ShareBudget on the same cluster (admission only: the burst's pods select no node), all in",
        f"one run (`dralab bench pains --profile {res.profile}`).",
        "",
        *md_table(["figure", "value", "how"], rows),
    ]
