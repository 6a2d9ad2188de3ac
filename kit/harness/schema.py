"""The lab format: typed, validated ``lab.yaml`` documents, and the objects a run walks.

A lab is data. :mod:`harness.lab_model` (pydantic) checks a document completely before anything
runs (unknown keys, missing manifests, undefined ``${vars}``, unknown operators) and says where the
problem is, e.g. ``labs/x/lab.yaml: steps[3] (allocation).try[1].assert: unknown key(s) mach``.
This module turns the checked document into the frozen :class:`Lab`, :class:`Step` and
:class:`Operation` the runner executes; each operation keeps where it came from for its messages.

Document shape::

    apiVersion: dralab.io/v1alpha1
    kind: Lab
    name: lab20-ascend-hami-dra          # DNS label; `dralab lab run NAME`
    title: ...
    source: ...                          # where the manual lab is written down (optional)
    description: ...
    profiles: [local, kind, ascend-310p] # cluster profiles it runs on
    prerequisites: {inventory: lab20, vendors: [ascend], capabilities: []}
    namespace: {prefix: dra-ascend-e2e, labels: {...}}
    vars: {name: default}                # every variable a lab uses is declared or captured
    profileVars: {kind: {name: value}}   # per-profile overrides of vars
    catch: [collector operations]        # after any failed step (besides the step's own)
    cleanup: [operations]                # once at the end, whatever happened
    proved: [{id, claim, evidence}]      # the "What This Lab Proved" table
    steps: [{id, title, description, proves, requires, try, catch, finally}]

Operations are mappings with exactly one operation key (see :data:`OPERATIONS`) and the
common keys ``description``, ``requires``, ``evidence``, ``timeout``, ``mark``, ``measure``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from dralab import yamlio
from dralab.errors import UserError
from harness.lab_model import API_VERSION, BUILTIN_VARS, COMMON_KEYS, OPERATIONS, LabModel, validate_lab
from harness.lab_ops import Body, OperationModel
from harness.lab_values import seconds, tuple_of

__all__ = ["API_VERSION", "BUILTIN_VARS", "COMMON_KEYS", "OPERATIONS", "Lab", "Operation", "Step", "load_lab"]


def parse_duration(value: Any, where: str) -> float:
    """Seconds from ``30``, ``"30s"``, ``"2m"``, ``"500ms"``, ``"1h"``."""
    try:
        return seconds(value)
    except ValueError as exc:
        raise UserError(f"{where}: {exc}") from None


@dataclass(frozen=True)
class Measure:
    since: str
    name: str


@dataclass(frozen=True)
class Operation:
    """One operation of a step; ``body`` still holds ``${vars}`` until the runner substitutes them."""

    kind: str
    body: dict[str, Any]
    where: str
    requires: tuple[str, ...] = ()
    evidence: str | None = None
    timeout: float | None = None
    mark: str | None = None
    measure: Measure | None = None
    description: str | None = None

    @property
    def spec(self) -> type[Body]:
        """The operation's body model: its keys, whether it is a collector, its default timeout."""
        return OPERATIONS[self.kind]

    @property
    def effective_timeout(self) -> float:
        return self.timeout if self.timeout is not None else self.spec.default_timeout


@dataclass(frozen=True)
class Step:
    id: str
    title: str
    ops: tuple[Operation, ...]
    catch: tuple[Operation, ...] = ()
    finally_: tuple[Operation, ...] = ()
    proves: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()
    description: str = ""


@dataclass(frozen=True)
class Proof:
    """A row of the lab's "What This Lab Proved" table."""

    id: str
    claim: str
    evidence: str


@dataclass(frozen=True)
class Lab:
    name: str
    title: str
    path: Path
    steps: tuple[Step, ...]
    profiles: tuple[str, ...] = ()
    source: str = ""
    description: str = ""
    prerequisites: dict[str, Any] = field(default_factory=dict)
    namespace_prefix: str = "lab"
    namespace_labels: dict[str, str] = field(default_factory=dict)
    namespace_annotations: dict[str, str] = field(default_factory=dict)
    vars: dict[str, Any] = field(default_factory=dict)
    profile_vars: dict[str, dict[str, Any]] = field(default_factory=dict)
    catch: tuple[Operation, ...] = ()
    cleanup: tuple[Operation, ...] = ()
    proved: tuple[Proof, ...] = ()

    @property
    def directory(self) -> Path:
        return self.path.parent

    @property
    def inventory(self) -> str | None:
        value = self.prerequisites.get("inventory")
        return str(value) if value else None

    def step(self, step_id: str) -> Step:
        for step in self.steps:
            if step.id == step_id:
                return step
        raise KeyError(step_id)

    def variables_for(self, profile: str) -> dict[str, Any]:
        """The lab's variables with the overrides for ``profile`` applied."""
        out = dict(self.vars)
        out.update(self.profile_vars.get(profile, {}))
        return out


def _operation(model: OperationModel, where: str) -> Operation:
    """The runnable operation: its body as written (``timeout`` already moved next to it)."""
    body = model.body.model_dump(by_alias=True, exclude_unset=True, exclude={"timeout"}) if model.body else {}
    measure = Measure(since=model.measure.since, name=model.measure.name) if model.measure else None
    return Operation(
        kind=model.kind,
        body=body,
        where=where,
        requires=tuple_of(model.requires),
        evidence=model.evidence,
        timeout=model.timeout,
        mark=model.mark,
        measure=measure,
        description=model.description,
    )


def _operations(models: list[OperationModel] | None, at: str) -> tuple[Operation, ...]:
    """The runnable operations of one list; ``at`` locates the list (``<file>: steps[0] (id).try``)."""
    return tuple(_operation(op, f"{at}[{j}].{op.kind}") for j, op in enumerate(models or ()))


def _build(doc: LabModel, path: Path) -> Lab:
    """The runtime lab of a validated document."""
    steps = []
    for i, step in enumerate(doc.steps):
        at = f"{path}: steps[{i}] ({step.id})"
        steps.append(
            Step(
                id=step.id,
                title=step.title or step.id,
                description=(step.description or "").strip(),
                ops=_operations(step.try_, f"{at}.try"),
                catch=_operations(step.catch, f"{at}.catch"),
                finally_=_operations(step.finally_, f"{at}.finally"),
                proves=tuple_of(step.proves),
                requires=tuple_of(step.requires),
            )
        )
    ns = doc.namespace
    return Lab(
        name=doc.name,
        title=doc.title or doc.name,
        path=path,
        steps=tuple(steps),
        profiles=tuple_of(doc.profiles),
        source=doc.source or "",
        description=(doc.description or "").strip(),
        prerequisites=doc.prerequisites.model_dump(by_alias=True, exclude_unset=True) if doc.prerequisites else {},
        namespace_prefix=doc.namespace_prefix,
        namespace_labels={str(k): str(v) for k, v in ((ns.labels if ns else None) or {}).items()},
        namespace_annotations={str(k): str(v) for k, v in ((ns.annotations if ns else None) or {}).items()},
        vars=dict(doc.vars or {}),
        profile_vars={str(k): dict(v or {}) for k, v in (doc.profile_vars or {}).items()},
        catch=_operations(doc.catch, f"{path}: catch"),
        cleanup=_operations(doc.cleanup, f"{path}: cleanup"),
        proved=tuple(Proof(id=p.id, claim=p.claim, evidence=p.evidence) for p in doc.proved or ()),
    )


def parse_lab(data: Any, path: Path) -> Lab:
    """Validate a lab document (``path`` locates it and its manifests) and return the typed lab."""
    return _build(validate_lab(data, str(path), path.parent), path)


def load_lab(path: str | Path) -> Lab:
    """Read and validate ``path`` (a lab.yaml or the folder holding one)."""
    p = Path(path)
    if p.is_dir():
        p = p / "lab.yaml"
    if not p.is_file():
        raise UserError(f"{p}: no lab here (a lab is a folder with a lab.yaml)")
    try:
        data = yamlio.load(p.read_text(), str(p))
    except yaml.YAMLError as exc:
        raise UserError(f"{p}: not valid YAML ({exc})") from None
    return parse_lab(data, p.resolve())
