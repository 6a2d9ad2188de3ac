"""``node.json``: the real kubelet and containerd node (profile ``node``)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from dralab_kit.bench.models.base import BenchResult, Latency, Model, Num
from dralab_kit.bench.models.faults import Audit, Scenario


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
    # the node profile's fault scenarios, rows of the same engine as ``faults.json``
    faults: list[Scenario] = Field(default_factory=list)
    faults_baseline: Audit = Field(default_factory=Audit)
    lab20: NodeLab | None = None

    @field_validator("faults", mode="before")
    @classmethod
    def _rows(cls, value: Any) -> Any:
        """Runs before the one fault engine wrote ``{fault: {ok, figures...}}``: read them as rows."""
        if isinstance(value, dict):
            return [{"name": name, "passed": row.get("ok"),
                     "detail": {k: v for k, v in row.items() if k != "ok"}} for name, row in value.items()]
        return value
