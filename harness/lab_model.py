"""The lab format as a typed model (pydantic v2): it validates ``lab.yaml`` and exports its JSON Schema.

One model does both jobs, so what an editor flags (``dralab schema lab``) and what ``dralab lab run``
refuses never drift apart. Checks that need the lab's folder (manifest files next to the lab, the
``${vars}`` those manifests use) read it from the validation context (``{"lab_dir": Path}``); without
one they are skipped. Errors come out as one line naming the place, as
``labs/x/lab.yaml: steps[3] (allocation).try[1].assert: unknown key(s) mach (valid: ...)``, with
the fix where there is one (see :func:`validate_lab`).

An operation is a mapping with exactly one operation key (``apply``, ``assert``, ...; the body model
of each is in :data:`OPERATIONS`) and the common keys of :class:`OperationModel`. In the schema every
operation is defined once under ``$defs`` and lists refer to ``#/$defs/operation`` (or
``#/$defs/collector`` where only collectors may run).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from functools import partial
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic.json_schema import GenerateJsonSchema
from pydantic_core import PydanticCustomError
from typing_extensions import TypeAliasType

from dralab.errors import UserError
from dralab.validation import json_schema
from harness import match as matching
from harness.resources import parse_ref
from harness.subst import references

API_VERSION = "dralab.io/v1alpha1"
BUILTIN_VARS = ("namespace", "lab", "profile", "run_id", "cluster")
COMMON_KEYS = ("description", "requires", "evidence", "timeout", "mark", "measure")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_VAR_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_AT_FIELD = "lab_at_field"  # message follows the failing field's path
_NAMES_FIELD = "lab_names_field"  # message starts with the failing field's own name


# --- errors a validator raises (rendered by validate_lab) -------------------------------------------


def problem(message: str, at: str = "") -> PydanticCustomError:
    """An error whose message follows its path (``<path>[.at]: message``)."""
    return PydanticCustomError(_AT_FIELD, "{message}", {"message": message, "at": at})


def _named(message: str) -> PydanticCustomError:
    """An error from a helper that wrote the field's own name first (``resource: ...``)."""
    return PydanticCustomError(_NAMES_FIELD, "{message}", {"message": message})


# --- values ------------------------------------------------------------------------------------------


def seconds(value: Any) -> float:
    """Seconds from ``30``, ``"30s"``, ``"2m"``, ``"500ms"``, ``"1h"``; ValueError says how to write one."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    found = None if isinstance(value, bool) else _DURATION.match(str(value))
    if not found:
        raise ValueError(f"{value!r} is not a duration (write 30s, 2m or a number of seconds)")
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}[found.group(2)]
    return float(found.group(1)) * scale


def _duration(value: Any) -> float:
    try:
        return seconds(value)
    except ValueError as exc:
        raise problem(str(exc)) from None


def _strings(value: Any) -> Any:
    if value is None or isinstance(value, str):
        return value
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise problem("must be a list of strings")
    return value


def _dns_label(what: str, value: Any) -> Any:
    if not isinstance(value, str) or not DNS_LABEL.fullmatch(value):
        raise problem(f"{what} (got {value!r})")
    return value


def _mapping(value: Any) -> Any:
    """``None`` is empty; anything but a mapping is refused."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise problem("must be a mapping")
    return dict(value)


def _variables(value: Any) -> Any:
    """``{variable: where to read it}``: the names must be usable as ``${name}``."""
    value = _mapping(value)
    for var in value:
        if not _VAR_NAME.fullmatch(str(var)):
            raise problem(f"{var!r} is not a valid variable name")
    return value


def _resource(value: Any) -> Any:
    try:
        parse_ref(value, "resource")
    except UserError as exc:
        raise _named(str(exc)) from None
    return value


def _matcher(value: Any, info: ValidationInfo) -> Any:
    try:
        matching.validate(value, str(info.field_name))
    except UserError as exc:
        raise _named(str(exc)) from None
    return value


def _manifests(value: Any, info: ValidationInfo) -> Any:
    """Manifest files must exist next to the lab (when the context names its folder)."""
    names = _strings(value)
    lab_dir = (info.context or {}).get("lab_dir")
    for name in [names] if isinstance(names, str) else names or []:
        if lab_dir is not None and not (Path(lab_dir) / name).is_file():
            raise problem(f"{name} not found next to the lab ({lab_dir})")
    return value


def _shaped(check: type | tuple[type, ...], hint: str, nonempty: bool = False) -> BeforeValidator:
    """A value of type ``check`` (non-empty if asked), else the hint says what to write."""

    def run(value: Any) -> Any:
        if not isinstance(value, check) or (nonempty and not value):
            raise problem(hint)
        return value

    return BeforeValidator(run)


# named types are defined once in the schema's $defs
Seconds = TypeAliasType(
    "duration",
    Annotated[
        float,
        BeforeValidator(_duration),
        WithJsonSchema({"anyOf": [{"type": "number"}, {"type": "string", "pattern": _DURATION.pattern}]}),
    ],
)
Strings = TypeAliasType("strings", Annotated[str | list[str] | None, BeforeValidator(_strings)])
Resource = Annotated[Any, AfterValidator(_resource), Field(description="Kind/name, Kind, or {kind, name, ...}")]
Matcher = Annotated[Any, AfterValidator(_matcher), Field(description="a partial object; $operators allowed")]
Variables = Annotated[dict[str, Any], BeforeValidator(_variables)]
Manifests = Annotated[str | list[str], BeforeValidator(_manifests)]
Absent = Annotated[bool, _shaped(bool, "must be true or false")]
Mapping_ = Annotated[dict[str, Any] | None, BeforeValidator(_mapping)]


def tuple_of(value: str | list[str] | None) -> tuple[str, ...]:
    """A :data:`Strings` value as a tuple (one string is a list of one)."""
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


# --- operation bodies ----------------------------------------------------------------------------------


def _one_of_schema(schema: dict[str, Any], model: type[Body]) -> None:
    """Each ``one_of`` group: exactly one of its keys (the schema says what the model checks)."""
    groups = [{"oneOf": [{"required": [key]} for key in group]} for group in model.one_of]
    if groups:
        schema["allOf"] = groups


class Body(BaseModel):
    """What every operation body shares; a subclass per operation names its keys."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True, json_schema_extra=_one_of_schema
    )

    one_of: ClassVar[tuple[tuple[str, ...], ...]] = ()
    collector: ClassVar[bool] = False
    default_timeout: ClassVar[float] = 30.0
    # variables the operation sets for later ones, from these keys of its body
    sets_from: ClassVar[tuple[str, ...]] = ()

    timeout: Seconds | None = Field(None, description="the operation's timeout (accepted in the body too)")

    @model_validator(mode="after")
    def _exactly_one(self) -> Body:
        for group in self.one_of:
            if len([key for key in group if key in self.model_fields_set]) != 1:
                raise problem(f"give exactly one of {', '.join(group)}")
        return self

    @classmethod
    def keys(cls) -> list[str]:
        return sorted(info.alias or name for name, info in cls.model_fields.items())

    def defines(self) -> set[str]:
        """Variables this body sets for later operations."""
        out: set[str] = set()
        for key in self.sets_from:
            out |= set(getattr(self, key) or {})
        return out


class ApplyBody(Body):
    """create (or update) objects from a manifest file or inline; ${vars} substituted"""

    one_of = (("file", "object", "objects"),)
    file: Manifests | None = None
    object: dict[str, Any] | None = None
    objects: Annotated[list[Any], _shaped(list, "a list of objects")] | None = None
    vars: Mapping_ = Field(None, description="values for the manifest's ${vars}")
    expect_error: Any = None
    namespace: Any = None


class DeleteBody(Body):
    """delete objects and (by default) wait until they are gone; fails when none exists unless missingOk"""

    one_of = (("resource", "file"),)
    default_timeout = 60.0
    resource: Resource = None
    file: Manifests | None = None
    wait: Any = None
    grace_period_seconds: Any = None
    missing_ok: Any = None


class CaptureBody(Body):
    """store values read from an object (or list) in variables: {var: object-path}"""

    sets_from = ("values",)
    resource: Resource
    values: Variables


class WaitForBody(Body):
    """poll until the object matches (or is gone)"""

    one_of = (("match", "absent"),)
    default_timeout = 60.0
    resource: Resource
    match: Matcher = None
    absent: Absent | None = None


class AssertBody(WaitForBody):
    """partial match of an object or list, retried until the timeout"""

    default_timeout = 10.0


class ExpectPendingBody(Body):
    """the pod stays unscheduled with a scheduler event saying why; its claims stay unallocated"""

    default_timeout = 60.0
    pod: Any
    reason: Any = None
    message: Any = None
    claims: Any = None


class ExecInPodBody(Body):
    """run a command in a container (profiles with real containers)"""

    default_timeout = 120.0
    sets_from = ("capture",)
    pod: Any
    command: Annotated[list[Any] | str, _shaped((list, str), "a list of arguments or a shell string")]
    container: Any = None
    expect: Matcher = None
    parse: Any = None
    capture: Variables | None = None


_SIZES = _shaped(list, "a list of allocation sizes in MiB")


class ReadCdiBody(Body):
    """the claim's CDI spec from the node's CDI directory and the kubelet's records of it"""

    one_of = (("claim", "uid"),)
    sets_from = ("capture",)
    claim: Any = None
    uid: Any = None
    expect: Matcher = None
    absent: Absent | None = None
    capture: Variables | None = None
    node: Any = None


class RunWithClaimEnvBody(Body):
    """run the enforcement probe on the host with the environment the claim's CDI spec gives a container"""

    one_of = (("claim", "uid"),)
    default_timeout = 60.0
    sets_from = ("capture",)
    claim: Any = None
    uid: Any = None
    vendor: Any
    steps: Annotated[list[Any], _SIZES] | None = None
    env: Any = None
    expect: Matcher = None
    capture: Variables | None = None


class ProbeInPodBody(Body):
    """run vcore's probe inside a container (the CDI spec preloads the library); result as run-with-claim-env"""

    default_timeout = 60.0
    sets_from = ("capture",)
    pod: Any
    vendor: Any
    container: Any = None
    steps: Annotated[list[Any], _SIZES] | None = None
    env: Any = None
    expect: Matcher = None
    capture: Variables | None = None


class DralabBody(Body):
    """run one dralab command (e.g. migrate apply) against the run's cluster; exit code and output matched"""

    default_timeout = 120.0
    sets_from = ("capture",)
    args: Annotated[list[Any], _shaped(list, "a non-empty list of arguments, e.g. [migrate, plan]", nonempty=True)]
    expect: Matcher = None
    parse: Any = None
    capture: Variables | None = None


class DeviceCapacityBody(Body):
    """a driver's devices: capacity, consumed by every allocated claim, free, and the claims holding them"""

    sets_from = ("capture",)
    driver: Any
    node: Any = None
    expect: Matcher = None
    capture: Variables | None = None


class EventsBody(Body):
    """collect the namespace's events (or those of one object)"""

    collector = True
    resource: Resource = None
    reasons: Any = None


class DescribeBody(Body):
    """collect describe-like dumps of objects"""

    collector = True
    resource: Resource


class LogsBody(Body):
    """collect the tail of component logs (profiles that expose them)"""

    collector = True
    components: Any = None
    tail: Any = None


# operation key -> its body, in the order the docs and the schema list them
OPERATIONS: dict[str, type[Body]] = {
    "apply": ApplyBody,
    "delete": DeleteBody,
    "capture": CaptureBody,
    "wait-for": WaitForBody,
    "assert": AssertBody,
    "expect-pending": ExpectPendingBody,
    "exec-in-pod": ExecInPodBody,
    "read-cdi": ReadCdiBody,
    "run-with-claim-env": RunWithClaimEnvBody,
    "probe-in-pod": ProbeInPodBody,
    "dralab": DralabBody,
    "device-capacity": DeviceCapacityBody,
    "events": EventsBody,
    "describe": DescribeBody,
    "logs": LogsBody,
}
COLLECTORS = tuple(kind for kind, body in OPERATIONS.items() if body.collector)


# --- operations ----------------------------------------------------------------------------------------


class Measure(BaseModel):
    """``{since: <mark>, as: <variable>}``: seconds from a marked operation to the end of this one."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    since: str
    name: str = Field(alias="as")


def _measure(value: Any) -> Any:
    if value is not None and not isinstance(value, Mapping):
        raise problem("is {since: <mark>, as: <variable>}")
    return value


class OperationModel(BaseModel):
    """An operation's common keys; a subclass per operation adds its body under the operation key."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: ClassVar[str] = ""
    body: Body | None

    description: str | None = None
    requires: Strings = None
    evidence: str | None = Field(None, description="the claim this operation's output supports")
    timeout: Seconds | None = None
    mark: str | None = Field(None, description="remember when this operation started (for measure)")
    measure: Annotated[Measure | None, BeforeValidator(_measure)] = None

    @model_validator(mode="before")
    @classmethod
    def _body_shape(cls, raw: Any) -> Any:
        """A missing body is an empty one; ``timeout`` inside the body moves next to it."""
        body = raw.get(cls.kind) if isinstance(raw, Mapping) else None
        if body is None or not isinstance(raw, Mapping):
            return {**raw, cls.kind: {}} if isinstance(raw, Mapping) else raw
        if not isinstance(body, Mapping):
            keys = ", ".join(OPERATIONS[cls.kind].keys())
            raise problem(f"the body must be a mapping (keys: {keys})")
        if "timeout" not in body:
            return raw
        if raw.get("timeout") is not None:
            raise problem("timeout is given twice (inside and next to the operation)")
        return {**raw, "timeout": body["timeout"], cls.kind: {k: v for k, v in body.items() if k != "timeout"}}

    def defines(self) -> set[str]:
        """Variables this operation sets for later ones."""
        out = self.body.defines() if self.body else set()
        return out | ({self.measure.name} if self.measure else set())


def _operation_model(kind: str, body: type[Body]) -> type[OperationModel]:
    """The model of operation ``kind``: the common keys plus ``kind: <body>``."""
    optional = not any(info.is_required() for info in body.model_fields.values())
    name = body.__name__.removesuffix("Body") + "Operation"
    namespace = {
        "__doc__": body.__doc__,
        "__module__": __name__,
        "__annotations__": {"body": body | None if optional else body},
        "model_config": ConfigDict(title=kind),
        "kind": kind,
        "body": Field(alias=kind),
    }
    return type(name, (OperationModel,), namespace)


OPERATION_MODELS: dict[str, type[OperationModel]] = {kind: _operation_model(kind, b) for kind, b in OPERATIONS.items()}


def _operation_key(raw: Any, collectors_only: bool) -> Any:
    """Exactly one operation key, next to common keys only (and only collectors where asked)."""
    if not isinstance(raw, Mapping):
        raise problem("an operation is a mapping such as {apply: {file: pod.yaml}}")
    stray = sorted(str(k) for k in set(raw) - set(OPERATIONS) - set(COMMON_KEYS))
    if stray:
        raise problem(
            f"unknown key(s) {', '.join(stray)} (operations: {', '.join(OPERATIONS)}; "
            f"common keys: {', '.join(COMMON_KEYS)})"
        )
    kinds = [k for k in raw if k in OPERATIONS]
    if len(kinds) != 1:
        found = ", ".join(kinds) or "none"
        raise problem(f"needs exactly one operation key, found {found} (one of {', '.join(OPERATIONS)})")
    if collectors_only and kinds[0] not in COLLECTORS:
        raise problem(f"only collectors ({', '.join(COLLECTORS)}) may run here", at=kinds[0])
    return raw


def _kind_of(raw: Any) -> str | None:
    if isinstance(raw, Mapping):
        return next((str(k) for k in raw if k in OPERATIONS), None)
    return getattr(raw, "kind", None)


def _union(kinds: tuple[str, ...]) -> Any:
    members = tuple(Annotated[OPERATION_MODELS[kind], Tag(kind)] for kind in kinds)
    return Annotated[Union[members], Discriminator(_kind_of)]  # noqa: UP007 (a runtime tuple of members)


Operation = TypeAliasType(
    "operation", Annotated[_union(tuple(OPERATIONS)), BeforeValidator(partial(_operation_key, collectors_only=False))]
)
Collector = TypeAliasType(
    "collector", Annotated[_union(COLLECTORS), BeforeValidator(partial(_operation_key, collectors_only=True))]
)


# --- steps and the lab -------------------------------------------------------------------------------


class StepModel(BaseModel):
    """A step: operations tried in order; collectors on failure; operations run whatever happened."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    id: Annotated[str, Field(pattern=DNS_LABEL.pattern)]
    title: str | None = None
    description: str | None = None
    proves: Strings = Field(None, description="ids of rows of the lab's proved table")
    requires: Strings = None
    try_: list[Operation] = Field(alias="try", min_length=1)
    catch: list[Collector] | None = None
    finally_: list[Operation] | None = Field(None, alias="finally")

    @model_validator(mode="before")
    @classmethod
    def _id_and_try(cls, raw: Any) -> Any:
        """An id first (it names the step in every later message), then something to try."""
        if not isinstance(raw, Mapping):
            raise problem("a step is a mapping with id, title and try")
        sid = raw.get("id")
        if not isinstance(sid, str) or not DNS_LABEL.fullmatch(sid):
            raise problem(f"'id' is required and must be lower-case letters, digits and '-' (got {sid!r})")
        known = {info.alias or name for name, info in cls.model_fields.items()}
        if not raw.get("try") and not set(raw) - known:
            raise problem("'try' needs at least one operation")
        return raw


class Prerequisites(BaseModel):
    """What a cluster profile must offer for the lab to run."""

    model_config = ConfigDict(extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True)

    inventory: str | None = Field(None, description="the device inventory (harness/inventories/<name>)")
    vendors: Strings = None
    capabilities: Strings = None
    feature_gates: Any = None
    runtime_classes: Any = None


class NamespaceModel(BaseModel):
    """The run's namespace: a prefix (default: the lab's name) and its labels and annotations."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    prefix: str | None = None
    labels: Mapping_ = None
    annotations: Mapping_ = None


class ProofModel(BaseModel):
    """A row of the lab's "What This Lab Proved" table."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    claim: str
    evidence: str = ""


Where = tuple[str, OperationModel, bool]


class LabModel(BaseModel):
    """A lab document: ``labs/<name>/lab.yaml``."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, title="dralab lab")

    api_version: Literal["dralab.io/v1alpha1"] = Field(alias="apiVersion")
    kind: Literal["Lab"]
    name: Annotated[str, Field(pattern=DNS_LABEL.pattern, description="dralab lab run NAME")]
    title: str | None = None
    source: str | None = Field(None, description="where the manual lab is written down")
    description: str | None = None
    profiles: Strings = Field(None, description="cluster profiles it runs on")
    prerequisites: Prerequisites | None = None
    namespace: NamespaceModel | None = None
    vars: Mapping_ = Field(None, description="every variable a lab uses is declared here or captured")
    profile_vars: dict[str, Mapping_] | None = Field(
        None, alias="profileVars", description="per-profile values of declared vars"
    )
    catch: list[Collector] | None = Field(None, description="collectors run after any failed step")
    cleanup: list[Operation] | None = Field(None, description="run once at the end, whatever happened")
    proved: list[ProofModel] | None = None
    steps: list[StepModel] = Field(min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _a_lab(cls, raw: Any) -> Any:
        if not isinstance(raw, Mapping):
            raise problem(f"a lab is a YAML mapping (apiVersion: {API_VERSION}, kind: Lab, ...)")
        if raw.get("apiVersion") != API_VERSION or raw.get("kind") != "Lab":
            raise problem(f"must start with apiVersion: {API_VERSION} and kind: Lab")
        known = {info.alias or name for name, info in cls.model_fields.items()}
        steps = raw.get("steps")
        if not set(raw) - known and (not isinstance(steps, list) or not steps):
            raise problem("'steps' needs at least one step")
        return raw

    @field_validator("name", mode="before")
    @classmethod
    def _name(cls, value: Any) -> Any:
        return _dns_label("must be a DNS label: lower-case letters, digits and '-'", value)

    @property
    def namespace_prefix(self) -> str:
        """The run namespace's prefix: 40 characters at most, so the run suffix fits in a DNS label."""
        given = self.namespace.prefix if self.namespace else None
        return str(given or self.name)[:40].rstrip("-")

    def operations(self) -> Iterator[Where]:
        """Every operation in run order, with where it is (``steps[0] (id).try[1].apply``)."""
        for i, step in enumerate(self.steps):
            at = f"steps[{i}] ({step.id})"
            for section, ops in (("try", step.try_), ("catch", step.catch), ("finally", step.finally_)):
                for j, op in enumerate(ops or ()):
                    yield f"{at}.{section}[{j}].{op.kind}", op, False
        for section, ops in (("catch", self.catch), ("cleanup", self.cleanup)):
            for j, op in enumerate(ops or ()):
                yield f"{section}[{j}].{op.kind}", op, True

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> LabModel:
        """What no single key shows: unique ids, known proof rows, declared and defined variables."""
        if not DNS_LABEL.fullmatch(self.namespace_prefix):
            raise problem(f"namespace.prefix {self.namespace_prefix!r} must be a DNS label")
        ids = [s.id for s in self.steps]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise problem(f"duplicate step id(s) {', '.join(dupes)}")
        rows = {p.id for p in self.proved or ()}
        for step in self.steps:
            missing = [p for p in tuple_of(step.proves) if p not in rows]
            if missing:
                raise problem(f"step {step.id} proves unknown row(s) {', '.join(missing)} (see 'proved')")
        declared = set(self.vars or {})
        for profile, values in (self.profile_vars or {}).items():
            extra = sorted(set(values or {}) - declared)
            if extra:
                raise problem(f"profileVars.{profile} sets undeclared var(s) {', '.join(extra)}: declare them in vars")
        self._check_references((info.context or {}).get("lab_dir"))
        return self

    def _check_references(self, lab_dir: Path | None) -> None:
        """Every ``${var}`` is declared, built in, or captured by an earlier operation."""
        known = set(BUILTIN_VARS) | set(self.vars or {})
        for where, op, _ in self.operations():
            used = references(op.body.model_dump(by_alias=True, exclude_unset=True) if op.body else {})
            if isinstance(op.body, ApplyBody) and op.body.file is not None and lab_dir is not None:
                for name in tuple_of(op.body.file):
                    used |= references((Path(lab_dir) / name).read_text().splitlines())
                used -= set(op.body.vars or {})
            unknown = sorted(used - known)
            if unknown:
                raise problem(
                    f"{where}: ${{{unknown[0]}}} is not defined before this point "
                    "(declare it under vars or capture it in an earlier operation)"
                )
            known |= op.defines()
        for value in (self.vars or {}).values():
            unknown = references(value) - set(BUILTIN_VARS) - set(self.vars or {})
            if unknown:
                raise problem(f"vars refer to undefined ${{{sorted(unknown)[0]}}}")


# --- error messages ------------------------------------------------------------------------------------


def _path(loc: tuple[str | int, ...], data: Any) -> str:
    """``("steps", 3, "try", 1, "assert", "assert", "mach")`` as ``steps[3] (id).try[1].assert.mach``.

    The operation key appears twice (the union's tag, then the field): it is written once. A step
    is named by its id as well as its position, as the old messages did.
    """
    out = ""
    previous: str | int | None = None
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
            if loc[:1] == ("steps",) and previous == "steps":
                steps = data.get("steps") if isinstance(data, Mapping) else None
                sid = steps[part].get("id") if isinstance(steps, list) and isinstance(steps[part], Mapping) else None
                if isinstance(sid, str) and DNS_LABEL.fullmatch(sid):
                    out += f" ({sid})"
        elif part != previous:
            out += f".{part}" if out else str(part)
        previous = part
    return out


def _model_at(loc: tuple[str | int, ...]) -> type[BaseModel] | None:
    """The model whose keys are at ``loc`` (for the list of valid keys)."""
    current: Any = LabModel
    for part in loc:
        if isinstance(part, int):
            continue
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = next((i for n, i in current.model_fields.items() if (i.alias or n) == part), None)
            if field is not None:
                current = _model_in(field.annotation)
                continue
        current = OPERATION_MODELS.get(str(part))
        if current is None:
            return None
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _model_in(annotation: Any) -> Any:
    """The model inside ``X | None``, ``list[X]``, ``Annotated[...]``: the first one found."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or getattr(annotation, "__metadata__", ()):
        found = _model_in(arg)
        if found is not None:
            return found
    origin = getattr(annotation, "__origin__", None)
    return _model_in(origin) if origin is not None and origin is not annotation else None


def describe(exc: ValidationError, data: Any) -> str:
    """The first problem as one line; unknown keys come first (most often a typo), together per mapping."""
    errors = exc.errors()
    first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    loc = tuple(first["loc"])
    parent = loc[:-1]
    where = _path(parent, data)
    lead = f"{where}: " if where else ""
    kind = first["type"]
    if kind == "extra_forbidden":
        keys = [str(e["loc"][-1]) for e in errors if e["type"] == kind and tuple(e["loc"][:-1]) == parent]
        owner = _model_at(parent)
        valid = f" (valid: {', '.join(sorted(i.alias or n for n, i in owner.model_fields.items()))})" if owner else ""
        return f"{lead}unknown key(s) {', '.join(keys)}{valid}"
    if kind == "missing" and loc and not isinstance(loc[-1], int):
        return f"{lead}'{loc[-1]}' is required"
    if kind == _NAMES_FIELD:
        return f"{where}.{first['ctx']['message']}" if where else str(first["ctx"]["message"])
    path = _path(loc, data)
    if kind == _AT_FIELD:
        at = first["ctx"]["at"]
        path = f"{path}.{at}" if path and at else path or at
        return f"{path}: {first['ctx']['message']}" if path else str(first["ctx"]["message"])
    message = first["msg"].removeprefix("Value error, ")
    got = f" (got {first['input']!r})" if "input" in first and not isinstance(first["input"], Mapping) else ""
    return f"{path}: {message[0].lower()}{message[1:]}{got}" if path else f"{message}{got}"


def validate_lab(data: Any, source: str, lab_dir: Path | None = None) -> LabModel:
    """The typed lab, or a ``UserError`` ``"<source>: <where>: <what is wrong and the fix>"``."""
    try:
        return LabModel.model_validate(data, context={"lab_dir": lab_dir})
    except ValidationError as exc:
        raise UserError(f"{source}: {describe(exc, data)}") from None


class _KeysUntitled(GenerateJsonSchema):
    """No generated title on each key ("Description" for ``description``): it says nothing an editor needs."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def lab_schema() -> dict[str, Any]:
    """The lab format's JSON Schema (draft 2020-12), from :class:`LabModel` (``dralab schema lab``)."""
    return json_schema(
        LabModel,
        "dralab lab",
        "A lab: labs/<name>/lab.yaml (checked in full whenever dralab loads it: lab list, lab run)",
        generator=_KeysUntitled,
    )
