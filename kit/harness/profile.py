"""Cluster profiles: where a lab runs, as data.

A profile names the cluster source (the local cluster, a kubeconfig, or an in-memory cluster
for tests), how dralab is deployed there, what can be observed (``capabilities``), which vendors
its devices are, and variables that labs may use. Shipped profiles live in
``harness/profiles/<name>.yaml``; ``--profile FILE`` takes any file of the same shape.

Capabilities the runner knows: ``node-files`` (CDI specs and kubelet records on the node),
``host-probe`` (run the enforcement probe on the host), ``component-logs``,
``container-exec`` (real containers), ``container-probe`` (the pods' image carries vcore's probe
and fake runtimes: enforcement is checked inside the container), ``hardware`` (real accelerators).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from dralab import yamlio
from dralab.errors import UserError
from dralab.validation import fail, json_schema, validate

CAPABILITIES = ("node-files", "host-probe", "component-logs", "container-exec", "container-probe", "hardware")
SOURCES = ("local", "kubeconfig", "memory")
DEPLOY_METHODS = ("host-processes", "helm", "none")


class ClusterSpec(BaseModel):
    """Where the cluster comes from (``source``) and what the harness needs to reach it."""

    model_config = ConfigDict(extra="forbid")

    source: str = Field(
        description="local: dralab's own cluster; kubeconfig: an existing one; memory: tests",
        json_schema_extra={"enum": list(SOURCES)},
    )
    name: str | None = Field(None, description="local: the cluster for the default inventory (default dralab)")
    defaultInventory: str | None = Field(None, description="local: the inventory of the cluster `name`")
    kubeconfig: str | None = Field(None, description="kubeconfig: the file (default $KUBECONFIG)")
    context: str | None = Field(None, description="kubeconfig: the context to use")
    objects: str | None = Field(None, description="memory: a YAML file of objects, relative to the profile")
    nodeRoot: str | None = Field(None, description="memory: per-node folders, relative to the profile")
    logsDir: str | None = Field(None, description="memory: component logs, relative to the profile")
    realNode: bool | None = Field(None, description="local: the inventory's first node runs a real kubelet")
    podNetwork: bool | None = Field(
        None, description="local, with realNode: Services and kube-proxy for pods; dralab comes from deploy (helm)"
    )
    kubernetes: str | None = Field(
        None, description="local: the Kubernetes version (v1.35.4, v1.36.3 or v1.37.2; default v1.35.4)"
    )

    @field_validator("kubernetes")
    @classmethod
    def _supported_version(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from dralab.errors import UserError
        from dralab.versions import check_supported

        try:
            return check_supported(value)
        except UserError as exc:
            raise fail(f"cluster.kubernetes: {exc}") from None

    @field_validator("source")
    @classmethod
    def _known_source(cls, value: str) -> str:
        if value not in SOURCES:
            raise fail(f"cluster.source must be one of {', '.join(SOURCES)} (got {value!r})")
        return value


class DeploySpec(BaseModel):
    """How dralab gets onto the cluster."""

    model_config = ConfigDict(extra="forbid")

    method: str = Field(
        "none",
        description="host-processes (the local cluster starts them), helm, or none",
        json_schema_extra={"enum": list(DEPLOY_METHODS)},
    )
    release: str | None = Field(None, description="helm: the release name")
    chart: str | None = Field(None, description="helm: the chart, a path relative to the checkout")
    namespace: str | None = Field(None, description="helm: the release namespace")
    timeout: str | None = Field(None, description="helm: --timeout, e.g. 5m")
    values: dict[str, Any] | None = Field(None, description="helm: values over the chart's defaults")

    @field_validator("method")
    @classmethod
    def _known_method(cls, value: str) -> str:
        if value not in DEPLOY_METHODS:
            raise fail(f"deploy.method must be one of {', '.join(DEPLOY_METHODS)} (got {value!r})")
        return value

    @model_validator(mode="after")
    def _helm_needs_a_chart(self) -> DeploySpec:
        if self.method == "helm" and not self.chart:
            raise fail("deploy.method helm needs deploy.chart")
        return self


class ProfileSpec(BaseModel):
    """A cluster profile file (``harness/profiles/<name>.yaml`` or ``--profile FILE``)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="the profile's name, as --profile takes it")
    description: str = ""
    cluster: ClusterSpec
    deploy: DeploySpec | None = None
    capabilities: list[str] = Field(
        default_factory=list,
        description="what can be observed: " + ", ".join(CAPABILITIES),
        json_schema_extra={"items": {"type": "string", "enum": list(CAPABILITIES)}},
    )
    vendors: list[str] = Field(default_factory=list, description="vendors of the devices; empty: any")
    vars: dict[str, Any] = Field(default_factory=dict, description="variables labs may use")
    inventory: str | None = Field(None, description="fake devices of a deployed (non-local) cluster")

    @field_validator("name")
    @classmethod
    def _named(cls, value: str) -> str:
        if not value:
            raise fail("'name' is required")
        return value

    @field_validator("capabilities")
    @classmethod
    def _known_capabilities(cls, value: list[str]) -> list[str]:
        unknown = [c for c in value if c not in CAPABILITIES]
        if unknown:
            raise fail(f"unknown capabilit(y/ies) {', '.join(unknown)} (known: {', '.join(CAPABILITIES)})")
        return value


@dataclass(frozen=True)
class Profile:
    name: str
    source: str
    description: str = ""
    cluster: dict[str, Any] = field(default_factory=dict)
    deploy: dict[str, Any] = field(default_factory=dict)
    capabilities: tuple[str, ...] = ()
    vendors: tuple[str, ...] = ()
    vars: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None
    inventory: str | None = None  # fake devices of a deployed (non-local) cluster; None: real or any

    @property
    def deploy_method(self) -> str:
        return str(self.deploy.get("method", "none"))

    @property
    def kubernetes(self) -> str | None:
        """local: the Kubernetes version of the cluster (None: dralab's default)."""
        value = self.cluster.get("kubernetes")
        return str(value) if value else None

    def cluster_name_for(self, inventory: str | None) -> str:
        """The local cluster that has ``inventory``'s devices and the profile's Kubernetes version.

        One cluster per inventory and version: ``dralab`` for Lab 20's host on the default version,
        ``dralab-team-gpus``, ``dralab-v1-37``, ``dralab-team-gpus-v1-37`` for the others.
        """
        from dralab.versions import KUBERNETES_VERSION, kubernetes_minor

        base = str(self.cluster.get("name", "dralab"))
        default = str(self.cluster.get("defaultInventory", "lab20"))
        name = base if not inventory or inventory == default else f"{base}-{Path(inventory).stem}"
        if self.kubernetes and self.kubernetes != KUBERNETES_VERSION:
            name += f"-v1-{kubernetes_minor(self.kubernetes)}"
        return name


def builtin_profiles() -> list[str]:
    folder = resources.files("harness").joinpath("profiles")
    return sorted(p.name.removesuffix(".yaml") for p in folder.iterdir() if p.name.endswith(".yaml"))


def parse_profile(data: Any, source: str, path: Path | None = None) -> Profile:
    """Validate a profile document (:class:`ProfileSpec`); errors are one line naming the field."""
    if not isinstance(data, Mapping):
        raise UserError(f"{source}: a profile is a YAML mapping with name, cluster, deploy and capabilities")
    if "cluster" not in data:
        raise UserError(f"{source}: 'cluster' is required (cluster.source: {', '.join(SOURCES)})")
    spec = validate(ProfileSpec, {k: v for k, v in data.items() if v is not None}, source)
    deploy = spec.deploy.model_dump(exclude_unset=True) if spec.deploy else {"method": "none"}
    return Profile(
        name=spec.name,
        source=spec.cluster.source,
        description=spec.description,
        cluster=spec.cluster.model_dump(exclude_unset=True),
        deploy=deploy,
        capabilities=tuple(spec.capabilities),
        vendors=tuple(spec.vendors),
        vars=dict(spec.vars),
        path=path,
        inventory=spec.inventory or None,
    )


def profile_schema() -> dict[str, Any]:
    """JSON Schema of profile files, for editors (``dralab schema profile``)."""
    return json_schema(ProfileSpec, "dralab cluster profile", "Where a lab runs: harness/profiles/<name>.yaml")


def load_profile(name_or_path: str | Path) -> Profile:
    """A shipped profile by name, or a profile file."""
    ref = str(name_or_path)
    if ref in builtin_profiles():
        text = resources.files("harness").joinpath("profiles", f"{ref}.yaml").read_text()
        return parse_profile(yamlio.load(text, f"profile {ref}"), f"profile {ref}")
    path = Path(ref).expanduser()
    if not path.is_file():
        raise UserError(f"unknown profile {ref!r}: use one of {', '.join(builtin_profiles())} or a profile YAML file")
    try:
        data = yamlio.load(path.read_text(), str(path))
    except yaml.YAMLError as exc:
        raise UserError(f"{path}: not valid YAML ({exc})") from None
    return parse_profile(data, str(path), path.resolve())


def with_kubernetes(profile: Profile, version: str | None) -> Profile:
    """``profile`` on Kubernetes ``version`` (``--kubernetes``); unchanged when None. Local profiles only."""
    if not version:
        return profile
    from dralab.versions import check_supported

    if profile.source != "local":
        raise UserError(f"--kubernetes {version}: profile {profile.name} does not bring its cluster up; "
                        "its cluster's version is whatever that cluster runs")
    return dataclasses.replace(profile, cluster={**profile.cluster, "kubernetes": check_supported(version)})
