"""``node.json``: the real kubelet and containerd node (profile ``node``)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from dralab_kit.bench.models.base import BenchResult, Latency, Model, Num


class NodeMemory(Model):
    """Resident memory of the node's processes (MiB)."""

    kubelet_mib: Num | None = None
    containerd_mib: Num | None = None
    shims: int | None = None
    shims_mib: Num | None = None


class NodeLab(Model):
    status: str | None = None
    replay_wall_seconds: Num | None = None
    target_seconds: Num | None = None
    within_target: bool | None = None
    steps_seconds: Num | None = None


class NodeResult(BenchResult):
    kubelet: str | None = None
    containerd: str | None = None
    bring_up_seconds: Num | None = None
    pods: int | None = None
    claim_apply_to_running_seconds: Latency = Field(default_factory=Latency)
    plain_apply_to_running_seconds: Latency = Field(default_factory=Latency)
    memory_idle: NodeMemory = Field(default_factory=NodeMemory)
    memory_with_pods: NodeMemory = Field(default_factory=NodeMemory)
    # fault name -> its figures and ``ok``; each fault records its own figures
    faults: dict[str, dict[str, Any]] = Field(default_factory=dict)
    lab20: NodeLab | None = None
