"""What a lab run produces: outcomes per operation, per step and per lab (pure data).

Results travel from pytest-xdist workers to the controller as JSON and feed the reports, so
every class here converts to and from plain dicts.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

PASSED, FAILED, SKIPPED, ERROR = "passed", "failed", "skipped", "error"
# Some operations ran and passed, others were skipped because the profile lacks a capability:
# the step (or proved row) holds only for what ran, and says what did not.
PARTIAL = "partial"
NOT_RUN = "not run"
# pytest user properties of a step item (JUnit <property> entries): why it is partial, and one
# entry per operation skipped for a missing capability
PARTIAL_PROPERTY = "dralab.partial"
SKIPPED_OP_PROPERTY = "dralab.skipped_operation"


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
    missing: list[str] = field(default_factory=list)  # capabilities the profile lacks (status skipped)

    @property
    def label(self) -> str:
        """How a report names this operation: its evidence label, else its place in the step."""
        if self.evidence:
            return self.evidence
        _, _, place = self.where.rpartition(").")
        return place or self.where


def skipped_ops(ops: list[OpOutcome]) -> list[OpOutcome]:
    """Operations skipped because the profile lacks a capability."""
    return [o for o in ops if o.status == SKIPPED]


def describe_skipped(ops: list[OpOutcome]) -> str:
    """``label (needs cap, cap); label (needs cap)``: what did not run and why, in one line."""
    return "; ".join(f"{o.label} (needs {', '.join(o.missing) or 'a capability'})" for o in ops)


@dataclass
class StepResult:
    id: str
    title: str
    status: str = PASSED
    reason: str | None = None
    seconds: float = 0.0
    started: str | None = None
    proves: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # capabilities whose lack skipped the whole step
    ops: list[OpOutcome] = field(default_factory=list)
    diagnostics: list[OpOutcome] = field(default_factory=list)
    finally_: list[OpOutcome] = field(default_factory=list)

    def evidence(self) -> list[OpOutcome]:
        """Outcomes the lab marked as evidence (passed ones only: failed evidence proves nothing)."""
        return [o for o in self.ops if o.evidence and o.status == PASSED]

    def skipped_ops(self) -> list[OpOutcome]:
        """Operations of ``try`` that did not run here for a missing capability."""
        return skipped_ops(self.ops)


@dataclass
class ProofRow:
    id: str
    claim: str
    lab_evidence: str
    status: str
    steps: list[str]
    live: list[dict[str, Any]]
    note: str = ""  # for partial / skipped rows: what did not run on this profile and why


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
        """failed, skipped (nothing ran), partial (some steps or operations did not run), or passed."""
        if self.error or any(s.status in (FAILED, ERROR) for s in self.steps):
            return FAILED
        if self.steps and all(s.status == SKIPPED for s in self.steps):
            return SKIPPED
        if any(s.status in (PARTIAL, SKIPPED) for s in self.steps):
            return PARTIAL
        return PASSED

    def counts(self) -> dict[str, int]:
        out = {PASSED: 0, PARTIAL: 0, FAILED: 0, SKIPPED: 0, ERROR: 0}
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
