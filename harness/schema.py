"""The lab format: typed, validated ``lab.yaml`` documents.

A lab is data. This module checks a document completely before anything runs (unknown keys,
missing manifests, undefined ``${vars}``, unknown operators) and says where the problem is,
e.g. ``labs/x/lab.yaml: steps[3] (allocation).try[1].assert: unknown key 'mach'``.

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

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from dralab.errors import UserError
from harness import match as matching
from harness.resources import parse_ref
from harness.subst import references

API_VERSION = "dralab.io/v1alpha1"
BUILTIN_VARS = ("namespace", "lab", "profile", "run_id", "cluster")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_VAR_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")


@dataclass(frozen=True)
class OpSpec:
    """Which keys an operation's body takes."""

    one_of: tuple[tuple[str, ...], ...] = ()
    required: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()
    collector: bool = False
    default_timeout: float = 30.0
    doc: str = ""

    @property
    def keys(self) -> set[str]:
        return {k for group in self.one_of for k in group} | set(self.required) | set(self.optional)


OPERATIONS: dict[str, OpSpec] = {
    "apply": OpSpec(
        one_of=(("file", "object", "objects"),),
        optional=("vars", "expectError", "namespace"),
        doc="create (or update) objects from a manifest file or inline; ${vars} substituted",
    ),
    "delete": OpSpec(
        one_of=(("resource", "file"),),
        optional=("wait", "gracePeriodSeconds", "missingOk"),
        default_timeout=60.0,
        doc="delete objects and (by default) wait until they are gone; fails when none exists unless missingOk",
    ),
    "capture": OpSpec(
        required=("resource", "values"),
        doc="store values read from an object (or list) in variables: {var: object-path}",
    ),
    "wait-for": OpSpec(
        required=("resource",),
        one_of=(("match", "absent"),),
        default_timeout=60.0,
        doc="poll until the object matches (or is gone)",
    ),
    "assert": OpSpec(
        required=("resource",),
        one_of=(("match", "absent"),),
        default_timeout=10.0,
        doc="partial match of an object or list, retried until the timeout",
    ),
    "expect-pending": OpSpec(
        required=("pod",),
        optional=("reason", "message", "claims"),
        default_timeout=60.0,
        doc="the pod stays unscheduled with a scheduler event saying why; its claims stay unallocated",
    ),
    "exec-in-pod": OpSpec(
        required=("pod", "command"),
        optional=("container", "expect", "parse", "capture"),
        default_timeout=120.0,
        doc="run a command in a container (profiles with real containers)",
    ),
    "read-cdi": OpSpec(
        one_of=(("claim", "uid"),),
        optional=("expect", "absent", "capture", "node"),
        default_timeout=30.0,
        doc="the claim's CDI spec from the node's CDI directory and the kubelet's records of it",
    ),
    "run-with-claim-env": OpSpec(
        one_of=(("claim", "uid"),),
        required=("vendor",),
        optional=("steps", "env", "expect", "capture"),
        default_timeout=60.0,
        doc="run the enforcement probe on the host with the environment the claim's CDI spec gives a container",
    ),
    "probe-in-pod": OpSpec(
        required=("pod", "vendor"),
        optional=("container", "steps", "env", "expect", "capture"),
        default_timeout=60.0,
        doc="run vcore's probe inside a container (the CDI spec preloads the library); result as run-with-claim-env",
    ),
    "dralab": OpSpec(
        required=("args",),
        optional=("expect", "parse", "capture"),
        default_timeout=120.0,
        doc="run one dralab command (e.g. migrate apply) against the run's cluster; exit code and output matched",
    ),
    "device-capacity": OpSpec(
        required=("driver",),
        optional=("node", "expect", "capture"),
        default_timeout=30.0,
        doc="a driver's devices: capacity, consumed by every allocated claim, free, and the claims holding them",
    ),
    "events": OpSpec(
        optional=("resource", "reasons"),
        collector=True,
        doc="collect the namespace's events (or those of one object)",
    ),
    "describe": OpSpec(
        required=("resource",),
        collector=True,
        doc="collect describe-like dumps of objects",
    ),
    "logs": OpSpec(
        optional=("components", "tail"),
        collector=True,
        doc="collect the tail of component logs (profiles that expose them)",
    ),
}

COMMON_KEYS = ("description", "requires", "evidence", "timeout", "mark", "measure")
_STEP_KEYS = {"id", "title", "description", "proves", "requires", "try", "catch", "finally"}
_LAB_KEYS = {
    "apiVersion", "kind", "name", "title", "source", "description", "profiles", "prerequisites",
    "namespace", "vars", "profileVars", "catch", "cleanup", "proved", "steps",
}  # fmt: skip
_PREREQ_KEYS = {"inventory", "vendors", "capabilities", "featureGates", "runtimeClasses"}
_NS_KEYS = {"prefix", "labels", "annotations"}


def parse_duration(value: Any, where: str) -> float:
    """Seconds from ``30``, ``"30s"``, ``"2m"``, ``"500ms"``, ``"1h"``."""
    if isinstance(value, bool):
        raise UserError(f"{where}: {value!r} is not a duration (write 30s, 2m or a number of seconds)")
    if isinstance(value, int | float):
        return float(value)
    match = _DURATION.match(str(value))
    if not match:
        raise UserError(f"{where}: {value!r} is not a duration (write 30s, 2m or a number of seconds)")
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}[match.group(2)]
    return float(match.group(1)) * scale


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
    def spec(self) -> OpSpec:
        return OPERATIONS[self.kind]

    @property
    def effective_timeout(self) -> float:
        return self.timeout if self.timeout is not None else self.spec.default_timeout

    def defines(self) -> set[str]:
        """Variables this operation sets for later ones."""
        out: set[str] = set()
        if self.kind == "capture":
            out |= set(self.body.get("values") or {})
        elif self.kind in (
            "read-cdi", "run-with-claim-env", "exec-in-pod", "probe-in-pod", "device-capacity", "dralab",
        ):  # fmt: skip
            out |= set(self.body.get("capture") or {})
        if self.measure:
            out.add(self.measure.name)
        return out


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


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UserError(f"{where}: must be a list of strings")
    return tuple(value)


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise UserError(f"{where}: must be a mapping")
    return dict(value)


def _operation(raw: Any, where: str, lab_dir: Path, collectors_only: bool = False) -> Operation:
    if not isinstance(raw, Mapping):
        raise UserError(f"{where}: an operation is a mapping such as {{apply: {{file: pod.yaml}}}}")
    kinds = [k for k in raw if k in OPERATIONS]
    stray = sorted(set(raw) - set(OPERATIONS) - set(COMMON_KEYS))
    if stray:
        raise UserError(
            f"{where}: unknown key(s) {', '.join(map(str, stray))} "
            f"(operations: {', '.join(OPERATIONS)}; common keys: {', '.join(COMMON_KEYS)})"
        )
    if len(kinds) != 1:
        found = ", ".join(kinds) or "none"
        raise UserError(f"{where}: needs exactly one operation key, found {found} (one of {', '.join(OPERATIONS)})")
    kind = kinds[0]
    where = f"{where}.{kind}"
    spec = OPERATIONS[kind]
    if collectors_only and not spec.collector:
        raise UserError(f"{where}: only collectors (events, describe, logs) may run here")
    body = raw[kind]
    if body is None:
        body = {}
    if not isinstance(body, Mapping):
        raise UserError(f"{where}: the body must be a mapping (keys: {', '.join(sorted(spec.keys)) or 'none'})")
    body = dict(body)
    if "timeout" in body:  # accepted inside the body too, where it reads naturally
        if raw.get("timeout") is not None:
            raise UserError(f"{where}: timeout is given twice (inside and next to the operation)")
        raw = {**raw, "timeout": body.pop("timeout")}
    unknown = sorted(set(body) - spec.keys)
    if unknown:
        raise UserError(f"{where}: unknown key(s) {', '.join(unknown)} (valid: {', '.join(sorted(spec.keys))})")
    for key in spec.required:
        if key not in body:
            raise UserError(f"{where}: '{key}' is required")
    for group in spec.one_of:
        present = [k for k in group if k in body]
        if len(present) != 1:
            raise UserError(f"{where}: give exactly one of {', '.join(group)}")
    _check_body(kind, body, where, lab_dir)
    measure = None
    if raw.get("measure") is not None:
        m = raw["measure"]
        if not isinstance(m, Mapping) or set(m) != {"since", "as"}:
            raise UserError(f"{where}: measure is {{since: <mark>, as: <variable>}}")
        measure = Measure(since=str(m["since"]), name=str(m["as"]))
    timeout = parse_duration(raw["timeout"], f"{where}.timeout") if raw.get("timeout") is not None else None
    return Operation(
        kind=kind,
        body=body,
        where=where,
        requires=_strings(raw.get("requires"), f"{where}.requires"),
        evidence=str(raw["evidence"]) if raw.get("evidence") is not None else None,
        timeout=timeout,
        mark=str(raw["mark"]) if raw.get("mark") is not None else None,
        measure=measure,
        description=raw.get("description"),
    )


def _check_body(kind: str, body: dict[str, Any], where: str, lab_dir: Path) -> None:
    if "resource" in body:
        parse_ref(body["resource"], f"{where}.resource")
    if "file" in body:
        for name in _strings(body["file"], f"{where}.file"):
            if not (lab_dir / name).is_file():
                raise UserError(f"{where}.file: {name} not found next to the lab ({lab_dir})")
    for key in ("match", "expect", "absent"):
        if key in body and key != "absent":
            matching.validate(body[key], f"{where}.{key}")
    if "absent" in body and not isinstance(body["absent"], bool):
        raise UserError(f"{where}.absent: must be true or false")
    for key in ("values", "capture"):
        if key in body:
            values = _mapping(body[key], f"{where}.{key}")
            for var in values:
                if not _VAR_NAME.fullmatch(str(var)):
                    raise UserError(f"{where}.{key}: {var!r} is not a valid variable name")
    if kind == "dralab" and not (isinstance(body["args"], list) and body["args"]):
        raise UserError(f"{where}.args: a non-empty list of arguments, e.g. [migrate, plan]")
    if kind == "exec-in-pod" and not isinstance(body["command"], list | str):
        raise UserError(f"{where}.command: a list of arguments or a shell string")
    if kind in ("run-with-claim-env", "probe-in-pod") and "steps" in body:
        steps = body["steps"]
        if not isinstance(steps, list):
            raise UserError(f"{where}.steps: a list of allocation sizes in MiB")
    if kind == "apply" and "objects" in body and not isinstance(body["objects"], list):
        raise UserError(f"{where}.objects: a list of objects")


def _operations(raw: Any, where: str, lab_dir: Path, collectors_only: bool = False) -> tuple[Operation, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise UserError(f"{where}: must be a list of operations")
    return tuple(_operation(op, f"{where}[{i}]", lab_dir, collectors_only) for i, op in enumerate(raw))


def _step(raw: Any, pos: int, lab_dir: Path, source: str) -> Step:
    where = f"{source}: steps[{pos}]"
    if not isinstance(raw, Mapping):
        raise UserError(f"{where}: a step is a mapping with id, title and try")
    sid = raw.get("id")
    if not isinstance(sid, str) or not _DNS_LABEL.fullmatch(sid):
        raise UserError(f"{where}: 'id' is required and must be lower-case letters, digits and '-' (got {sid!r})")
    where = f"{where} ({sid})"
    unknown = sorted(set(raw) - _STEP_KEYS)
    if unknown:
        raise UserError(f"{where}: unknown key(s) {', '.join(unknown)} (valid: {', '.join(sorted(_STEP_KEYS))})")
    if not raw.get("try"):
        raise UserError(f"{where}: 'try' needs at least one operation")
    return Step(
        id=sid,
        title=str(raw.get("title") or sid),
        description=str(raw.get("description") or "").strip(),
        ops=_operations(raw["try"], f"{where}.try", lab_dir),
        catch=_operations(raw.get("catch"), f"{where}.catch", lab_dir, collectors_only=True),
        finally_=_operations(raw.get("finally"), f"{where}.finally", lab_dir),
        proves=_strings(raw.get("proves"), f"{where}.proves"),
        requires=_strings(raw.get("requires"), f"{where}.requires"),
    )


def parse_lab(data: Any, path: Path) -> Lab:
    """Validate a lab document (``path`` locates it and its manifests) and return the typed lab."""
    source = str(path)
    lab_dir = path.parent
    if not isinstance(data, Mapping):
        raise UserError(f"{source}: a lab is a YAML mapping (apiVersion: {API_VERSION}, kind: Lab, ...)")
    if data.get("apiVersion") != API_VERSION or data.get("kind") != "Lab":
        raise UserError(f"{source}: must start with apiVersion: {API_VERSION} and kind: Lab")
    unknown = sorted(set(data) - _LAB_KEYS)
    if unknown:
        raise UserError(f"{source}: unknown key(s) {', '.join(unknown)} (valid: {', '.join(sorted(_LAB_KEYS))})")
    name = data.get("name")
    if not isinstance(name, str) or not _DNS_LABEL.fullmatch(name):
        raise UserError(f"{source}: 'name' is required and must be a DNS label (got {name!r})")
    prereq = _mapping(data.get("prerequisites"), f"{source}: prerequisites")
    bad = sorted(set(prereq) - _PREREQ_KEYS)
    if bad:
        raise UserError(
            f"{source}: unknown prerequisite(s) {', '.join(bad)} (valid: {', '.join(sorted(_PREREQ_KEYS))})"
        )
    ns = _mapping(data.get("namespace"), f"{source}: namespace")
    bad = sorted(set(ns) - _NS_KEYS)
    if bad:
        raise UserError(f"{source}: unknown namespace key(s) {', '.join(bad)} (valid: {', '.join(sorted(_NS_KEYS))})")
    prefix = str(ns.get("prefix") or name)[:40].rstrip("-")
    if not _DNS_LABEL.fullmatch(prefix):
        raise UserError(f"{source}: namespace.prefix {prefix!r} must be a DNS label")
    raw_steps = data.get("steps")
    if not isinstance(raw_steps, list) or not raw_steps:
        raise UserError(f"{source}: 'steps' needs at least one step")
    steps = tuple(_step(raw, i, lab_dir, source) for i, raw in enumerate(raw_steps))
    ids = [s.id for s in steps]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise UserError(f"{source}: duplicate step id(s) {', '.join(dupes)}")
    proved = []
    for i, row in enumerate(data.get("proved") or []):
        if not isinstance(row, Mapping) or not row.get("id") or not row.get("claim"):
            raise UserError(f"{source}: proved[{i}] needs id and claim (and the lab's evidence text)")
        proved.append(Proof(id=str(row["id"]), claim=str(row["claim"]), evidence=str(row.get("evidence", ""))))
    proof_ids = {p.id for p in proved}
    for step in steps:
        missing = [p for p in step.proves if p not in proof_ids]
        if missing:
            raise UserError(f"{source}: step {step.id} proves unknown row(s) {', '.join(missing)} (see 'proved')")
    variables = _mapping(data.get("vars"), f"{source}: vars")
    profile_vars = {
        str(k): _mapping(v, f"{source}: profileVars.{k}")
        for k, v in _mapping(data.get("profileVars"), f"{source}: profileVars").items()
    }
    for prof, values in profile_vars.items():
        extra = sorted(set(values) - set(variables))
        if extra:
            raise UserError(
                f"{source}: profileVars.{prof} sets undeclared var(s) {', '.join(extra)}: declare them in vars"
            )
    lab = Lab(
        name=name,
        title=str(data.get("title") or name),
        path=path,
        steps=steps,
        profiles=_strings(data.get("profiles"), f"{source}: profiles"),
        source=str(data.get("source") or ""),
        description=str(data.get("description") or "").strip(),
        prerequisites=prereq,
        namespace_prefix=prefix,
        namespace_labels={str(k): str(v) for k, v in _mapping(ns.get("labels"), f"{source}: namespace.labels").items()},
        namespace_annotations={
            str(k): str(v) for k, v in _mapping(ns.get("annotations"), f"{source}: namespace.annotations").items()
        },
        vars=variables,
        profile_vars=profile_vars,
        catch=_operations(data.get("catch"), f"{source}: catch", lab_dir, collectors_only=True),
        cleanup=_operations(data.get("cleanup"), f"{source}: cleanup", lab_dir),
        proved=tuple(proved),
    )
    _check_variables(lab)
    return lab


def _check_variables(lab: Lab) -> None:
    """Every ``${var}`` must be declared, built in, or captured by an earlier operation."""
    known = set(BUILTIN_VARS) | set(lab.vars)
    for step in lab.steps:
        for op in (*step.ops, *step.catch, *step.finally_):
            _check_op_refs(op, known, lab)
            known |= op.defines()
    for op in (*lab.catch, *lab.cleanup):
        _check_op_refs(op, known, lab)
    for var in lab.vars.values():
        unknown = references(var) - set(BUILTIN_VARS) - set(lab.vars)
        if unknown:
            raise UserError(f"{lab.path}: vars refer to undefined ${{{sorted(unknown)[0]}}}")


def _check_op_refs(op: Operation, known: set[str], lab: Lab) -> None:
    used = references(op.body)
    if op.kind == "apply" and "file" in op.body:
        for name in _strings(op.body["file"], op.where):
            used |= references(yaml_text_refs((lab.directory / name).read_text()))
        used -= set(_mapping(op.body.get("vars"), f"{op.where}.vars"))
    unknown = sorted(used - known)
    if unknown:
        raise UserError(
            f"{op.where}: ${{{unknown[0]}}} is not defined before this point "
            "(declare it under vars or capture it in an earlier operation)"
        )


def yaml_text_refs(text: str) -> list[str]:
    """A manifest's text as a list of lines, for reference scanning (comments count too, which is safer)."""
    return text.splitlines()


def load_lab(path: str | Path) -> Lab:
    """Read and validate ``path`` (a lab.yaml or the folder holding one)."""
    p = Path(path)
    if p.is_dir():
        p = p / "lab.yaml"
    if not p.is_file():
        raise UserError(f"{p}: no lab here (a lab is a folder with a lab.yaml)")
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        raise UserError(f"{p}: not valid YAML ({exc})") from None
    return parse_lab(data, p.resolve())
