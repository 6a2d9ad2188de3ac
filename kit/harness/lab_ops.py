"""Operations of the lab format: one body model per operation key, and the operation models around them.

An operation is a mapping with exactly one operation key (its body model is in :data:`OPERATIONS`)
next to the common keys of :class:`OperationModel`. The union :data:`AnyOperation` (and
:data:`AnyCollector`, the operations that only gather diagnostics) picks the model by that key, so
an error speaks of that operation alone; in the JSON Schema each is defined once under ``$defs``
and lists refer to ``#/$defs/operation`` or ``#/$defs/collector``.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, TypeAlias, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, Discriminator, Field, Tag, model_validator
from pydantic.alias_generators import to_camel
from typing_extensions import TypeAliasType

from harness.lab_values import (
    Absent,
    Manifests,
    Mapping_,
    Matcher,
    Resource,
    Seconds,
    Strings,
    Variables,
    problem,
    shaped,
)

COMMON_KEYS = ("description", "requires", "evidence", "timeout", "mark", "measure")


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
    objects: Annotated[list[Any], shaped(list, "a list of objects")] | None = None
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
    command: Annotated[list[Any] | str, shaped((list, str), "a list of arguments or a shell string")]
    container: Any = None
    expect: Matcher = None
    parse: Any = None
    capture: Variables | None = None


_SIZES = shaped(list, "a list of allocation sizes in MiB")


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
    args: Annotated[list[Any], shaped(list, "a non-empty list of arguments, e.g. [migrate, plan]", nonempty=True)]
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
COLLECTOR_KINDS = tuple(kind for kind, body in OPERATIONS.items() if body.collector)


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
    if collectors_only and kinds[0] not in COLLECTOR_KINDS:
        raise problem(f"only collectors ({', '.join(COLLECTOR_KINDS)}) may run here", at=kinds[0])
    return raw


def _kind_of(raw: Any) -> str | None:
    if isinstance(raw, Mapping):
        return next((str(k) for k in raw if k in OPERATIONS), None)
    return getattr(raw, "kind", None)


def _union(kinds: tuple[str, ...]) -> Any:
    members = tuple(Annotated[OPERATION_MODELS[kind], Tag(kind)] for kind in kinds)
    return Annotated[Union[members], Discriminator(_kind_of)]  # noqa: UP007 (a runtime tuple of members)


if TYPE_CHECKING:
    # the unions are built at run time from OPERATIONS; statically each member is an OperationModel
    AnyOperation: TypeAlias = OperationModel
    AnyCollector: TypeAlias = OperationModel
else:
    AnyOperation = TypeAliasType(
        "operation",
        Annotated[_union(tuple(OPERATIONS)), BeforeValidator(partial(_operation_key, collectors_only=False))],
    )
    AnyCollector = TypeAliasType(
        "collector", Annotated[_union(COLLECTOR_KINDS), BeforeValidator(partial(_operation_key, collectors_only=True))]
    )
