"""The report's section for ``node.json``: the real kubelet and containerd node (profile ``node``)."""

from __future__ import annotations

import json
from typing import Any

from dralab_kit.bench.common import fmt
from dralab_kit.bench.models.node import NodeResult
from dralab_kit.bench.sections.format import table, verdict_text

TITLE = "The real node: kubelet + containerd (profile node)"


def section(res: NodeResult) -> list[str]:
    """Pod latency with and without a claim, memory, the faults on the real kubelet and Lab 20."""
    out = [
        f"A real kubelet {res.kubelet} and containerd {res.containerd} on this machine; the benchmark "
        "never patches a pod or calls the driver itself (only the kubelet prepares claims). "
        f"Cold bring-up of its cluster: {fmt(res.bring_up_seconds, ' s')}.",
        "",
    ]
    rows = [[label, s.n, fmt(s.p50), fmt(s.p99), fmt(s.max)]
            for s, label in ((res.claim_apply_to_running_seconds, "pod with its own claim"),
                             (res.plain_apply_to_running_seconds, "pod without claim (baseline)"))]
    out += table(["apply -> Running, one pod at a time", "pods", "p50 s", "p99 s", "max s"], rows)
    idle, busy = res.memory_idle, res.memory_with_pods
    out += table(
        ["RSS MiB", "idle", f"with {res.pods} claim pods"],
        [
            ["kubelet", fmt(idle.kubelet_mib), fmt(busy.kubelet_mib)],
            ["containerd", fmt(idle.containerd_mib), fmt(busy.containerd_mib)],
            [f"shims ({busy.shims})", fmt(idle.shims_mib), fmt(busy.shims_mib)],
        ],
    )
    rows = []
    for row in res.faults:
        figures = {k: v for k, v in row.detail.items() if k != "final_audit"}
        rows.append([row.name, verdict_text(row.passed), fmt(row.leaked_claims), fmt(row.leaked_capacity),
                     ", ".join(f"{k} {json.dumps(v)}" for k, v in figures.items())])
    out += table(["fault (real kubelet)", "verdict", "leaked claims", "leaked capacity", "figures"], rows)
    reboot = next((row for row in res.faults if row.name == "reboot"), None)
    out += reboot_lines(reboot.detail if reboot else None, reboot.passed if reboot else None, res.bring_up_seconds)
    lab = res.lab20
    if lab:
        out += [
            f"Lab 20 on the node: {lab.status}, replay wall clock {fmt(lab.replay_wall_seconds, ' s')} "
            f"(target <= {fmt(lab.target_seconds, ' s')}: {verdict_text(lab.within_target)}); "
            f"steps {fmt(lab.steps_seconds, ' s')}.",
            "",
        ]
    return out


def reboot_lines(row: dict[str, Any] | None, passed: bool | None, bring_up: Any) -> list[str]:
    """The reboot fault in words: how long the pods were gone, beside the cluster's cold bring-up."""
    if not row:
        return []
    return [
        f"Reboot (`dralab cluster reboot`, one more pod and its claim deleted while the node was off): "
        f"power-off to all {row.get('pods')} pods Running again "
        f"{fmt(row.get('power_off_to_all_pods_running_seconds'), ' s')}, of which the node was off "
        f"{fmt(row.get('node_off_seconds'), ' s')}; power-on to the node's components healthy "
        f"{fmt(row.get('power_on_to_node_healthy_seconds'), ' s')} and to the pods Running "
        f"{fmt(row.get('power_on_to_all_pods_running_seconds'), ' s')} (baseline, same run: the cluster's "
        f"cold bring-up {fmt(bring_up, ' s')}). Same claims {row.get('same_claims')}/{row.get('pods')}, "
        f"same env and preload: {fmt(row.get('same_env_and_preload'))}, leaked traces: "
        f"{len(row.get('leaked') or [])} ({verdict_text(passed)}).",
        "",
    ]
