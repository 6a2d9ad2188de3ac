"""What a lab run produces: outcomes per operation, per step and per lab (pure data).

Results travel from pytest-xdist workers to the controller as JSON and feed the reports, so
every class here converts to and from plain dicts.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

PASSED, FAILED, SKIPPED, ERROR = "passed", "failed", "skipped", "error"


@dataclass
class OpOutcome:
    """One operation: what it did (``summary``), what it saw (``excerpt``, ``text``), how long it took."""

    kind: str
    where: str
    status: str = PASSED
    summary: str = ""
    excerpt: Any = None
    text: str | None = None
    evidence: str | None = None
    error: str | None = None
    seconds: float = 0.0


@dataclass
class StepResult:
    id: str
    title: str
    status: str = PASSED
    reason: str | None = None
    seconds: float = 0.0
    started: str | None = None
    proves: list[str] = field(default_factory=list)
    ops: list[OpOutcome] = field(default_factory=list)
    diagnostics: list[OpOutcome] = field(default_factory=list)
    finally_: list[OpOutcome] = field(default_factory=list)

    def evidence(self) -> list[OpOutcome]:
        """Outcomes the lab marked as evidence (passed ones only: failed evidence proves nothing)."""
        return [o for o in self.ops if o.evidence and o.status == PASSED]


@dataclass
class ProofRow:
    id: str
    claim: str
    lab_evidence: str
    status: str
    steps: list[str]
    live: list[dict[str, Any]]


@dataclass
class LabResult:
    lab: str
    title: str
    profile: str
    run_id: str
    namespace: str | None = None
    source: str = ""
    environment: dict[str, Any] = field(default_factory=dict)
    started: str | None = None
    finished: str | None = None
    seconds: float = 0.0
    steps: list[StepResult] = field(default_factory=list)
    cleanup: list[OpOutcome] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)
    captured: dict[str, Any] = field(default_factory=dict)
    proved: list[ProofRow] = field(default_factory=list)
    error: str | None = None

    @property
    def status(self) -> str:
        if self.error or any(s.status in (FAILED, ERROR) for s in self.steps):
            return FAILED
        if self.steps and all(s.status == SKIPPED for s in self.steps):
            return SKIPPED
        return PASSED

    def counts(self) -> dict[str, int]:
        out = {PASSED: 0, FAILED: 0, SKIPPED: 0, ERROR: 0}
        for step in self.steps:
            out[step.status] = out.get(step.status, 0) + 1
        return out

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["status"] = self.status
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LabResult:
        raw = dict(data)
        raw.pop("status", None)
        steps = [_step_from(s) for s in raw.pop("steps", [])]
        cleanup = [OpOutcome(**o) for o in raw.pop("cleanup", [])]
        proved = [ProofRow(**p) for p in raw.pop("proved", [])]
        return cls(steps=steps, cleanup=cleanup, proved=proved, **raw)


def _step_from(data: dict[str, Any]) -> StepResult:
    raw = dict(data)
    ops = [OpOutcome(**o) for o in raw.pop("ops", [])]
    diags = [OpOutcome(**o) for o in raw.pop("diagnostics", [])]
    fin = [OpOutcome(**o) for o in raw.pop("finally_", [])]
    return StepResult(ops=ops, diagnostics=diags, finally_=fin, **raw)
