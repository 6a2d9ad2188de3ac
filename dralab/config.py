"""dralab's one configuration schema, shared by ``dralab convert``, the webhook, the driver and the chart.

A YAML file with four sections; every key is optional and has the default shown in
``DEFAULT_CONFIG_YAML``. Unknown keys are errors (a typo must not silently change nothing).
The typed model (:class:`ConfigFile`, pydantic) validates it with one-line errors naming the key
and exports its JSON Schema (``dralab schema config``); callers read the frozen section models.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from pydantic.alias_generators import to_camel
from pydantic.config import JsonDict

from dralab import yamlio
from dralab.driver.devices import BACKENDS
from dralab.errors import UserError
from dralab.model.hami_config import Translation
from dralab.model.vendors import VendorTable, builtin_table_data, load_vendor_table
from dralab.validation import fail, json_schema, validate

DEFAULT_CONFIG_YAML = """\
vendors:
  enabled: [ascend, nvidia, hygon]   # vendors whose HAMi syntax is converted / whose devices are published
  overrides: {}                      # partial vendor-table entries merged over the shipped table
webhook:
  lifecycle: claim                   # claim: named ResourceClaims + janitor; template: shared ResourceClaimTemplates
  claimGracePeriodSeconds: 30        # how long a managed claim may wait for its pod before the janitor deletes it
  excludeNamespaces: [kube-system]   # never converted (the webhook's own namespace is added at run time)
  optOutLabel: dralab.io/convert     # label "false" on a namespace or pod: leave it alone
  failurePolicy: Fail                # mutate: Fail keeps HAMi pods from slipping through unconverted
  # optional: namespaceSelector / objectSelector, extra label selectors (matchLabels, matchExpressions)
  # that a namespace / pod must also match to be converted (default: none)
  maxClaimsPerPod: 16                # a pod needing more ResourceClaims is denied, naming this key
  claimCreateRatePerSecond: 50       # per namespace: claims the webhook creates, steady rate ...
  claimCreateBurst: 500              # ... and burst; beyond them admission answers 429 (retry later)
  admissionDeadlineSeconds: 8        # one deadline for a whole admission; below the registration's timeoutSeconds (10)
  metricsAuthorization: true         # /metrics only for callers the cluster authorizes; false: anyone (trusted network)
driver:
  backend: fake                      # fake | ascend | nvidia
  cdiDir: /var/run/cdi
  pluginDir: /var/lib/kubelet/plugins
  registryDir: /var/lib/kubelet/plugins_registry
  stateDir: /var/lib/dralab
  enforcementLibrary: ""             # host path of the enforcement library; empty: dralab's vcore
  enforcement: required              # required: refuse claims while that library is unusable; none: no enforcement
  injectDeviceNodes: true            # add device nodes to CDI specs (no vendor runtime class injects them)
  metricsAuthorization: true         # /metrics only for callers the cluster authorizes; false: anyone (trusted network)
migration:
  enabled: false                     # migration mode: switching from HAMi / HAMi-DRA (on with --hami-config)
  adoptClaims: null                  # adopt HAMi-DRA's claims (owner = pod) and reap orphans; null: = enabled
  claimLabels: {}                    # optional: adopt only claims that also carry these labels
  claimAnnotations: {}               # optional: ... and these annotations
  graceSeconds: 30                   # how long an unreferenced HAMi-DRA claim may wait for a pod
  volcanoJobs: false                 # also register the webhook for Volcano Jobs (batch.volcano.sh/v1alpha1)
"""


def _section_config(name: str) -> ConfigDict:
    """A section model's settings: camelCase keys in the file, snake_case attributes, no unknown keys."""
    return ConfigDict(extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True, title=name)


def _mapping_or_empty(name: str, value: Any) -> Any:
    """A section left empty (``webhook:``) is its defaults; anything but a mapping is refused by name."""
    if value is None:
        return {}
    if not isinstance(value, Mapping) and not isinstance(value, BaseModel):
        raise fail(f"'{name}' must be a mapping")
    return value


_SELECTOR_KEYS = ("matchLabels", "matchExpressions")
_SELECTOR_SCHEMA: JsonDict = {"type": "object", "propertyNames": {"enum": list(_SELECTOR_KEYS)}}


# attribute -> (lowest, highest): the admission limits a config file may set (the deadline stays below
# the apiserver's 30 s maximum)
_LIMITS: dict[str, tuple[float, float]] = {
    "max_claims_per_pod": (1, 1000),
    "claim_create_rate_per_second": (0.001, 100_000),
    "claim_create_burst": (1, 1_000_000),
    "admission_deadline_seconds": (0.5, 29),
}


def _limit(attr: str) -> dict[str, Any]:
    """A limit's range as field constraints, so the exported schema states it too."""
    low, high = _LIMITS[attr]
    return {"ge": low, "le": high, "strict": True}


# webhook.metricsAuthorization and driver.metricsAuthorization (the chart's metrics.authorization sets both)
METRICS_AUTHORIZATION = (
    "true: /metrics answers only callers whose bearer token the cluster authenticates and authorizes for GET "
    "/metrics (TokenReview, SubjectAccessReview: dralab.kube.authz); false: anyone who reaches the port (a trusted "
    "scrape network only; logged at start)"
)


class WebhookConfig(BaseModel):
    """``webhook:``: how pods are converted and how much one admission may do."""

    model_config = _section_config("webhook")

    lifecycle: Literal["claim", "template"] = Field(
        "claim", description="claim: named ResourceClaims + janitor; template: shared ResourceClaimTemplates"
    )
    claim_grace_period_seconds: int = Field(
        30, ge=0, strict=True, description="how long a managed claim may wait for its pod before the janitor deletes it"
    )
    exclude_namespaces: tuple[str, ...] = Field(("kube-system",), description="namespaces never converted")
    opt_out_label: str = Field(
        "dralab.io/convert", strict=True, description='label "false" on a namespace or pod: leave it alone'
    )
    failure_policy: Literal["Fail", "Ignore"] = Field("Fail", description="the mutating registration's failurePolicy")
    namespace_selector: dict[str, Any] = Field(
        default_factory=dict,
        description="a label selector a namespace must also match",
        json_schema_extra=_SELECTOR_SCHEMA,
    )
    object_selector: dict[str, Any] = Field(
        default_factory=dict, description="a label selector a pod must also match", json_schema_extra=_SELECTOR_SCHEMA
    )
    max_claims_per_pod: int = Field(16, **_limit("max_claims_per_pod"), description="more claims: the pod is denied")
    claim_create_rate_per_second: float = Field(
        50.0, **_limit("claim_create_rate_per_second"), description="per namespace: claims created per second, steady"
    )
    claim_create_burst: int = Field(500, **_limit("claim_create_burst"), description="... and burst")
    admission_deadline_seconds: float = Field(
        8.0,
        **_limit("admission_deadline_seconds"),
        description="one deadline for a whole admission (below the apiserver's 30 s)",
    )
    metrics_authorization: bool = Field(True, strict=True, description=METRICS_AUTHORIZATION)

    @field_validator(*_LIMITS, mode="before")
    @classmethod
    def _in_range(cls, value: Any, info: ValidationInfo) -> Any:
        """Each admission limit is a number in its range, named with both ends (the fix in one line)."""
        low, high = _LIMITS[str(info.field_name)]
        whole = info.field_name in ("max_claims_per_pod", "claim_create_burst")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
            raise fail(f"webhook.{to_camel(str(info.field_name))} must be a number from {low} to {high}, got {value!r}")
        if whole and value != int(value):
            raise fail(f"webhook.{to_camel(str(info.field_name))} must be a whole number, got {value!r}")
        return int(value) if whole else value

    @field_validator("lifecycle", mode="before")
    @classmethod
    def _known_lifecycle(cls, value: Any) -> Any:
        if value not in ("claim", "template"):
            raise fail(f"webhook.lifecycle must be 'claim' or 'template', got {value!r}")
        return value

    @field_validator("failure_policy", mode="before")
    @classmethod
    def _known_policy(cls, value: Any) -> Any:
        if value not in ("Fail", "Ignore"):
            raise fail(f"webhook.failurePolicy must be 'Fail' or 'Ignore', got {value!r}")
        return value

    @field_validator("namespace_selector", "object_selector", mode="before")
    @classmethod
    def _label_selector(cls, value: Any, info: ValidationInfo) -> Any:
        value = {} if value is None else value
        if not isinstance(value, Mapping) or set(value) - set(_SELECTOR_KEYS):
            key = to_camel(str(info.field_name))
            raise fail(f"webhook.{key} must be a label selector with matchLabels and/or matchExpressions")
        return dict(value)


class DriverConfig(BaseModel):
    """``driver:``: the kubelet plugin's backend and host paths."""

    model_config = _section_config("driver")

    backend: str = Field("fake", description=" | ".join(BACKENDS), json_schema_extra={"enum": list(BACKENDS)})
    cdi_dir: str = Field("/var/run/cdi", strict=True)
    plugin_dir: str = Field("/var/lib/kubelet/plugins", strict=True)
    registry_dir: str = Field("/var/lib/kubelet/plugins_registry", strict=True)
    state_dir: str = Field("/var/lib/dralab", strict=True)
    enforcement_library: str = Field(
        "", strict=True, description="host path of the enforcement library; empty: dralab's vcore"
    )
    enforcement: Literal["required", "none"] = Field(
        "required",
        description="required: refuse claims while the enforcement library is missing, unreadable or built for "
        "another machine; none: prepare them without it (quotas not enforced)",
    )
    inject_device_nodes: bool = Field(True, strict=True, description="add device nodes to CDI specs")
    metrics_authorization: bool = Field(True, strict=True, description=METRICS_AUTHORIZATION)

    @field_validator("backend", mode="before")
    @classmethod
    def _known_backend(cls, value: Any) -> Any:
        if value not in BACKENDS:
            raise fail(f"driver.backend must be {', '.join(BACKENDS[:-1])} or {BACKENDS[-1]}, got {value!r}")
        return value

    @field_validator("enforcement", mode="before")
    @classmethod
    def _known_enforcement(cls, value: Any) -> Any:
        if value not in ("required", "none"):
            raise fail(f"driver.enforcement must be 'required' or 'none', got {value!r}")
        return value


class MigrationConfig(BaseModel):
    """``migration:``: switching a cluster from HAMi / HAMi-DRA."""

    model_config = _section_config("migration")

    enabled: bool = Field(False, strict=True, description="migration mode (on with --hami-config)")
    adopt_claims: bool | None = Field(
        None, strict=True, description="adopt HAMi-DRA's claims and reap orphans; null: = enabled"
    )
    claim_labels: dict[str, Annotated[str, Field(strict=True)]] = Field(
        default_factory=dict, description="adopt only claims that also carry these labels"
    )
    claim_annotations: dict[str, Annotated[str, Field(strict=True)]] = Field(
        default_factory=dict, description="... and these annotations"
    )
    grace_seconds: int = Field(
        30, ge=0, strict=True, description="how long an unreferenced HAMi-DRA claim may wait for a pod"
    )
    volcano_jobs: bool = Field(False, strict=True, description="also register the webhook for Volcano Jobs")

    @field_validator("claim_labels", "claim_annotations", mode="before")
    @classmethod
    def _string_map(cls, value: Any, info: ValidationInfo) -> Any:
        value = {} if value is None else value
        if not isinstance(value, Mapping) or not all(isinstance(v, str) for v in value.values()):
            raise fail(f"migration.{to_camel(str(info.field_name))} must map keys to string values")
        return value

    @property
    def adopts(self) -> bool:
        """Adoption runs when asked for, or by default in migration mode."""
        return self.enabled if self.adopt_claims is None else bool(self.adopt_claims)


class VendorsSection(BaseModel):
    """``vendors:``: which vendors are on, and entries merged over the shipped vendor table."""

    model_config = _section_config("vendors")

    enabled: list[str] | None = Field(
        None, description="vendors whose HAMi syntax is converted (default: all shipped vendors)"
    )
    overrides: dict[str, Any] | None = Field(
        None, description="partial vendor-table entries merged over the shipped table"
    )


def _sections_may_be_empty(schema: dict[str, Any]) -> None:
    """A section written with nothing under it (``webhook:``) is its defaults: the schema says so too."""
    for name, prop in schema.get("properties", {}).items():
        schema["properties"][name] = {"anyOf": [prop, {"type": "null"}]}


class ConfigFile(BaseModel):
    """A dralab config file: four sections, every key optional (defaults in ``DEFAULT_CONFIG_YAML``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, json_schema_extra=_sections_may_be_empty)

    vendors: VendorsSection = Field(default_factory=VendorsSection)
    webhook: WebhookConfig = Field(default_factory=WebhookConfig)
    driver: DriverConfig = Field(default_factory=DriverConfig)
    migration: MigrationConfig = Field(default_factory=MigrationConfig)

    @field_validator("vendors", "webhook", "driver", "migration", mode="before")
    @classmethod
    def _section_mapping(cls, value: Any, info: ValidationInfo) -> Any:
        return _mapping_or_empty(str(info.field_name), value)


@dataclass(frozen=True)
class Config:
    """The whole configuration, with the vendor table it implies."""

    vendors: VendorTable
    webhook: WebhookConfig = field(default_factory=WebhookConfig)
    driver: DriverConfig = field(default_factory=DriverConfig)
    migration: MigrationConfig = field(default_factory=MigrationConfig)
    source: str = "<defaults>"
    # what a HAMi device config (--hami-config) did not translate as is: one line per key
    notes: tuple[str, ...] = ()


def parse_config(raw: dict[str, Any] | None, source: str = "<memory>", hami: Translation | None = None) -> Config:
    """Validate a config document (:class:`ConfigFile`) and build the typed config.

    ``hami``: a translated HAMi device config; its vendor entries replace the shipped table and its
    ``vendors:`` list is the enabled list unless this document sets ``vendors.enabled`` itself.
    """
    raw = raw or {}
    if not isinstance(raw, Mapping):
        raise UserError(f"{source}: the config must be a YAML mapping")
    spec: ConfigFile = validate(ConfigFile, raw, source, root="config")
    enabled = spec.vendors.enabled
    if enabled is None and hami is not None:
        enabled = hami.enabled
    table = load_vendor_table(spec.vendors.overrides, enabled, hami.vendors if hami else None)
    migration = spec.migration
    if "enabled" not in migration.model_fields_set:
        # a HAMi device config turns migration mode on unless the document says otherwise
        migration = migration.model_copy(update={"enabled": hami is not None})
    notes = tuple(hami.report()) if hami else ()
    return Config(
        vendors=table, webhook=spec.webhook, driver=spec.driver, migration=migration, source=source, notes=notes
    )


def config_schema() -> dict[str, Any]:
    """JSON Schema of config files, for editors (``dralab schema config``)."""
    return json_schema(
        ConfigFile, "dralab config", "dralab's configuration: dralab convert --config, the webhook, the driver"
    )


def default_config() -> Config:
    return parse_config(yamlio.load(DEFAULT_CONFIG_YAML, "<defaults>"), "<defaults>")


def load_hami_config(path: str | Path) -> Translation:
    """Read and translate HAMi's device config (the file, or the ConfigMap holding it)."""
    from dralab.model.hami_config import parse_document, translate

    p = Path(path)
    if not p.is_file():
        raise UserError(f"HAMi device config {p} not found")
    return translate(parse_document(p.read_text(), str(p)), builtin_table_data(), str(p))


def load_config(path: str | Path | None, hami_config: str | Path | None = None) -> Config:
    """Load the config file at ``path`` (None: the defaults), over HAMi's device config when given."""
    hami = load_hami_config(hami_config) if hami_config else None
    if path is None:
        if hami is None:
            return default_config()
        return parse_config({}, "<defaults>", hami)
    p = Path(path)
    if not p.is_file():
        raise UserError(f"config file {p} not found")
    try:
        raw = yamlio.load(p.read_text(), str(p))
    except yaml.YAMLError as exc:
        raise UserError(f"{p}: not valid YAML ({exc})") from None
    return parse_config(raw, str(p), hami)
