"""dralab's one configuration schema, shared by ``dralab convert``, the webhook, the driver and the chart.

A YAML file with three sections; every key is optional and has the default shown in
``DEFAULT_CONFIG_YAML``. Unknown keys are errors (a typo must not silently change nothing).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from dralab.errors import UserError
from dralab.model.hami_config import Translation
from dralab.model.vendors import VendorTable, builtin_table_data, load_vendor_table

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
driver:
  backend: fake                      # fake | ascend | nvidia
  cdiDir: /var/run/cdi
  pluginDir: /var/lib/kubelet/plugins
  registryDir: /var/lib/kubelet/plugins_registry
  stateDir: /var/lib/dralab
  enforcementLibrary: ""             # host path of the enforcement library; empty: dralab's vcore
  injectDeviceNodes: true            # add device nodes to CDI specs (no vendor runtime class injects them)
migration:
  enabled: false                     # migration mode: switching from HAMi / HAMi-DRA (on with --hami-config)
  adoptClaims: null                  # adopt HAMi-DRA's claims (owner = pod) and reap orphans; null: = enabled
  claimLabels: {}                    # optional: adopt only claims that also carry these labels
  claimAnnotations: {}               # optional: ... and these annotations
  graceSeconds: 30                   # how long an unreferenced HAMi-DRA claim may wait for a pod
  volcanoJobs: false                 # also register the webhook for Volcano Jobs (batch.volcano.sh/v1alpha1)
"""


@dataclass(frozen=True)
class WebhookConfig:
    lifecycle: str = "claim"
    claim_grace_period_seconds: int = 30
    exclude_namespaces: tuple[str, ...] = ("kube-system",)
    opt_out_label: str = "dralab.io/convert"
    failure_policy: str = "Fail"
    namespace_selector: dict[str, Any] = field(default_factory=dict)
    object_selector: dict[str, Any] = field(default_factory=dict)
    max_claims_per_pod: int = 16
    claim_create_rate_per_second: float = 50.0
    claim_create_burst: int = 500
    admission_deadline_seconds: float = 8.0


@dataclass(frozen=True)
class DriverConfig:
    backend: str = "fake"
    cdi_dir: str = "/var/run/cdi"
    plugin_dir: str = "/var/lib/kubelet/plugins"
    registry_dir: str = "/var/lib/kubelet/plugins_registry"
    state_dir: str = "/var/lib/dralab"
    enforcement_library: str = ""
    inject_device_nodes: bool = True


@dataclass(frozen=True)
class MigrationConfig:
    enabled: bool = False
    adopt_claims: bool | None = None
    claim_labels: dict[str, str] = field(default_factory=dict)
    claim_annotations: dict[str, str] = field(default_factory=dict)
    grace_seconds: int = 30
    volcano_jobs: bool = False

    @property
    def adopts(self) -> bool:
        """Adoption runs when asked for, or by default in migration mode."""
        return self.enabled if self.adopt_claims is None else bool(self.adopt_claims)


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


_WEBHOOK_KEYS = {
    "lifecycle": "lifecycle",
    "claimGracePeriodSeconds": "claim_grace_period_seconds",
    "excludeNamespaces": "exclude_namespaces",
    "optOutLabel": "opt_out_label",
    "failurePolicy": "failure_policy",
    "namespaceSelector": "namespace_selector",
    "objectSelector": "object_selector",
    "maxClaimsPerPod": "max_claims_per_pod",
    "claimCreateRatePerSecond": "claim_create_rate_per_second",
    "claimCreateBurst": "claim_create_burst",
    "admissionDeadlineSeconds": "admission_deadline_seconds",
}
_MIGRATION_KEYS = {
    "enabled": "enabled",
    "adoptClaims": "adopt_claims",
    "claimLabels": "claim_labels",
    "claimAnnotations": "claim_annotations",
    "graceSeconds": "grace_seconds",
    "volcanoJobs": "volcano_jobs",
}
_DRIVER_KEYS = {
    "backend": "backend",
    "cdiDir": "cdi_dir",
    "pluginDir": "plugin_dir",
    "registryDir": "registry_dir",
    "stateDir": "state_dir",
    "enforcementLibrary": "enforcement_library",
    "injectDeviceNodes": "inject_device_nodes",
}


def _section(raw: dict[str, Any], name: str, keys: dict[str, str], source: str) -> dict[str, Any]:
    section = raw.get(name) or {}
    if not isinstance(section, dict):
        raise UserError(f"{source}: '{name}' must be a mapping")
    unknown = sorted(set(section) - set(keys))
    if unknown:
        raise UserError(f"{source}: unknown key(s) {name}.{', '.join(unknown)}; valid keys: {', '.join(keys)}")
    out = {}
    for yaml_key, attr in keys.items():
        if yaml_key in section:
            value = section[yaml_key]
            out[attr] = tuple(value) if isinstance(value, list) else value
    return out


# (key, attribute, lowest, highest): admission limits a config file may set, checked with their names.
_WEBHOOK_LIMITS = (
    ("maxClaimsPerPod", "max_claims_per_pod", 1, 1000),
    ("claimCreateRatePerSecond", "claim_create_rate_per_second", 0.001, 100_000),
    ("claimCreateBurst", "claim_create_burst", 1, 1_000_000),
    ("admissionDeadlineSeconds", "admission_deadline_seconds", 0.5, 29),
)


def _check_webhook_limits(webhook: WebhookConfig, source: str) -> None:
    """Each limit is a number in its range (the deadline must stay below the apiserver's 30 s maximum)."""
    for key, attr, low, high in _WEBHOOK_LIMITS:
        value = getattr(webhook, attr)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
            raise UserError(f"{source}: webhook.{key} must be a number from {low} to {high}, got {value!r}")
        if attr in ("max_claims_per_pod", "claim_create_burst") and value != int(value):
            raise UserError(f"{source}: webhook.{key} must be a whole number, got {value!r}")


def parse_config(raw: dict[str, Any] | None, source: str = "<memory>", hami: Translation | None = None) -> Config:
    """Validate a config document and build the typed config.

    ``hami``: a translated HAMi device config; its vendor entries replace the shipped table and its
    ``vendors:`` list is the enabled list unless this document sets ``vendors.enabled`` itself.
    """
    raw = raw or {}
    if not isinstance(raw, dict):
        raise UserError(f"{source}: the config must be a YAML mapping")
    unknown = sorted(set(raw) - {"vendors", "webhook", "driver", "migration"})
    if unknown:
        raise UserError(
            f"{source}: unknown section(s) {', '.join(unknown)}; valid: vendors, webhook, driver, migration"
        )
    vendors_raw = raw.get("vendors") or {}
    bad = sorted(set(vendors_raw) - {"enabled", "overrides"})
    if bad:
        raise UserError(f"{source}: unknown key(s) vendors.{', '.join(bad)}; valid keys: enabled, overrides")
    enabled = vendors_raw.get("enabled")
    if enabled is None and hami is not None:
        enabled = hami.enabled
    table = load_vendor_table(vendors_raw.get("overrides"), enabled, hami.vendors if hami else None)
    webhook = WebhookConfig(**_section(raw, "webhook", _WEBHOOK_KEYS, source))
    if webhook.lifecycle not in ("claim", "template"):
        raise UserError(f"{source}: webhook.lifecycle must be 'claim' or 'template', got {webhook.lifecycle!r}")
    if webhook.failure_policy not in ("Fail", "Ignore"):
        raise UserError(f"{source}: webhook.failurePolicy must be 'Fail' or 'Ignore'")
    _check_webhook_limits(webhook, source)
    for key, value in (("namespaceSelector", webhook.namespace_selector), ("objectSelector", webhook.object_selector)):
        if not isinstance(value, dict) or set(value) - {"matchLabels", "matchExpressions"}:
            raise UserError(
                f"{source}: webhook.{key} must be a label selector with matchLabels and/or matchExpressions"
            )
    driver = DriverConfig(**_section(raw, "driver", _DRIVER_KEYS, source))
    if driver.backend not in ("fake", "ascend", "nvidia"):
        raise UserError(f"{source}: driver.backend must be fake, ascend or nvidia, got {driver.backend!r}")
    migration = _migration(raw, source, hami is not None)
    notes = tuple(hami.report()) if hami else ()
    return Config(vendors=table, webhook=webhook, driver=driver, migration=migration, source=source, notes=notes)


def _migration(raw: dict[str, Any], source: str, hami_given: bool) -> MigrationConfig:
    """The migration section; a HAMi device config turns migration mode on unless it says otherwise."""
    values = _section(raw, "migration", _MIGRATION_KEYS, source)
    values.setdefault("enabled", hami_given)
    migration = MigrationConfig(**values)
    if not isinstance(migration.enabled, bool) or migration.adopt_claims not in (None, True, False):
        raise UserError(f"{source}: migration.enabled and migration.adoptClaims must be true or false")
    if not isinstance(migration.volcano_jobs, bool):
        raise UserError(f"{source}: migration.volcanoJobs must be true or false")
    for key, value in (("claimLabels", migration.claim_labels), ("claimAnnotations", migration.claim_annotations)):
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise UserError(f"{source}: migration.{key} must map keys to string values")
    if isinstance(migration.grace_seconds, bool) or not isinstance(migration.grace_seconds, int) or (
        migration.grace_seconds < 0
    ):
        raise UserError(f"{source}: migration.graceSeconds must be a whole number of seconds >= 0")
    return migration


def default_config() -> Config:
    return parse_config(yaml.safe_load(DEFAULT_CONFIG_YAML), "<defaults>")


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
        raw = yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        raise UserError(f"{p}: not valid YAML ({exc})") from None
    return parse_config(raw, str(p), hami)
