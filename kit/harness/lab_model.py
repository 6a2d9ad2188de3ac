"""The lab format as a typed model (pydantic v2): it validates ``lab.yaml`` and exports its JSON Schema.

One model does both jobs, so what an editor flags (``dralab schema lab``) and what ``dralab lab run``
refuses never drift apart. Operations are in :mod:`harness.lab_ops`, value types in
:mod:`harness.lab_values`. Checks that need the lab's folder (manifest files next to the lab, the
``${vars}`` those manifests use) read it from the validation context (``{"lab_dir": Path}``);
without one they are skipped. Errors come out as one line naming the place
(:mod:`harness.lab_errors`), e.g.
``labs/x/lab.yaml: steps[3] (allocation).try[1].assert: unknown key(s) mach (valid: ...)``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic.alias_generators import to_camel
from pydantic.json_schema import GenerateJsonSchema

from dralab.errors import UserError
from dralab.validation import json_schema
from harness.lab_errors import describe
from harness.lab_ops import COMMON_KEYS, OPERATIONS, AnyCollector, AnyOperation, ApplyBody, OperationModel
from harness.lab_values import DNS_LABEL, Mapping_, Strings, dns_label, mapping_or_empty, problem, tuple_of
from harness.subst import references

__all__ = ["API_VERSION", "BUILTIN_VARS", "COMMON_KEYS", "OPERATIONS", "LabModel", "lab_schema", "validate_lab"]

API_VERSION = "dralab.io/v1alpha1"
BUILTIN_VARS = ("namespace", "lab", "profile", "run_id", "cluster")


class StepModel(BaseModel):
    """A step: operations tried in order; collectors on failure; operations run whatever happened."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    id: Annotated[str, Field(pattern=DNS_LABEL.pattern)]
    title: str | None = None
    description: str | None = None
    proves: Strings = Field(None, description="ids of rows of the lab's proved table")
    requires: Strings = None
    try_: list[AnyOperation] = Field(alias="try", min_length=1)
    catch: list[AnyCollector] | None = None
    finally_: list[AnyOperation] | None = Field(None, alias="finally")

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

    id: str = Field(min_length=1)
    claim: str = Field(min_length=1)
    evidence: str = ""


Where = tuple[str, OperationModel]


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
    catch: list[AnyCollector] | None = Field(None, description="collectors run after any failed step")
    cleanup: list[AnyOperation] | None = Field(None, description="run once at the end, whatever happened")
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
        return dns_label("must be a DNS label: lower-case letters, digits and '-'", value)

    @field_validator("prerequisites", "namespace", mode="before")
    @classmethod
    def _section(cls, value: Any) -> Any:
        return mapping_or_empty(value)

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
                    yield f"{at}.{section}[{j}].{op.kind}", op
        for section, ops in (("catch", self.catch), ("cleanup", self.cleanup)):
            for j, op in enumerate(ops or ()):
                yield f"{section}[{j}].{op.kind}", op

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
        for where, op in self.operations():
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
            undefined = references(value) - set(BUILTIN_VARS) - set(self.vars or {})
            if undefined:
                raise problem(f"vars refer to undefined ${{{sorted(undefined)[0]}}}")


def validate_lab(data: Any, source: str, lab_dir: Path | None = None) -> LabModel:
    """The typed lab, or a ``UserError`` ``"<source>: <where>: <what is wrong and the fix>"``."""
    try:
        return LabModel.model_validate(data, context={"lab_dir": lab_dir})
    except ValidationError as exc:
        raise UserError(f"{source}: {describe(exc, data, LabModel)}") from None


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
