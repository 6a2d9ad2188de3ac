"""Cluster profiles: where a lab runs, as data.

A profile names the cluster source (the local cluster, a kubeconfig, or an in-memory cluster
for tests), how dralab is deployed there, what can be observed (``capabilities``), which vendors
its devices are, and variables that labs may use. Shipped profiles live in
``harness/profiles/<name>.yaml``; ``--profile FILE`` takes any file of the same shape.

Capabilities the runner knows: ``node-files`` (CDI specs and kubelet records on the node),
``host-probe`` (run the enforcement probe on the host), ``component-logs``,
``container-exec`` (real containers), ``hardware`` (real accelerators).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from dralab.errors import UserError

CAPABILITIES = ("node-files", "host-probe", "component-logs", "container-exec", "hardware")
SOURCES = ("local", "kubeconfig", "memory")
DEPLOY_METHODS = ("host-processes", "helm", "none")
_KEYS = {"name", "description", "cluster", "deploy", "capabilities", "vendors", "vars", "inventory"}
_CLUSTER_KEYS = {"source", "name", "defaultInventory", "kubeconfig", "context", "objects", "nodeRoot", "logsDir"}
_DEPLOY_KEYS = {"method", "release", "chart", "namespace", "timeout", "values"}


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

    def cluster_name_for(self, inventory: str | None) -> str:
        """The local cluster that has ``inventory``'s devices: one cluster per inventory."""
        base = str(self.cluster.get("name", "dralab"))
        default = str(self.cluster.get("defaultInventory", "lab20"))
        if not inventory or inventory == default:
            return base
        return f"{base}-{Path(inventory).stem}"


def builtin_profiles() -> list[str]:
    folder = resources.files("harness").joinpath("profiles")
    return sorted(p.name.removesuffix(".yaml") for p in folder.iterdir() if p.name.endswith(".yaml"))


def parse_profile(data: Any, source: str, path: Path | None = None) -> Profile:
    if not isinstance(data, Mapping):
        raise UserError(f"{source}: a profile is a YAML mapping with name, cluster, deploy and capabilities")
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise UserError(f"{source}: unknown key(s) {', '.join(unknown)} (valid: {', '.join(sorted(_KEYS))})")
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise UserError(f"{source}: 'name' is required")
    cluster = dict(data.get("cluster") or {})
    bad = sorted(set(cluster) - _CLUSTER_KEYS)
    if bad:
        raise UserError(
            f"{source}: unknown cluster key(s) {', '.join(bad)} (valid: {', '.join(sorted(_CLUSTER_KEYS))})"
        )
    src = cluster.get("source")
    if src not in SOURCES:
        raise UserError(f"{source}: cluster.source must be one of {', '.join(SOURCES)} (got {src!r})")
    deploy = dict(data.get("deploy") or {"method": "none"})
    bad = sorted(set(deploy) - _DEPLOY_KEYS)
    if bad:
        raise UserError(f"{source}: unknown deploy key(s) {', '.join(bad)} (valid: {', '.join(sorted(_DEPLOY_KEYS))})")
    if deploy.get("method", "none") not in DEPLOY_METHODS:
        raise UserError(f"{source}: deploy.method must be one of {', '.join(DEPLOY_METHODS)}")
    if deploy.get("method") == "helm" and not deploy.get("chart"):
        raise UserError(f"{source}: deploy.method helm needs deploy.chart")
    caps = tuple(data.get("capabilities") or ())
    unknown_caps = [c for c in caps if c not in CAPABILITIES]
    if unknown_caps:
        raise UserError(
            f"{source}: unknown capabilit(y/ies) {', '.join(unknown_caps)} (known: {', '.join(CAPABILITIES)})"
        )
    return Profile(
        name=name,
        source=src,
        description=str(data.get("description") or ""),
        cluster=cluster,
        deploy=deploy,
        capabilities=caps,
        vendors=tuple(data.get("vendors") or ()),
        vars=dict(data.get("vars") or {}),
        path=path,
        inventory=str(data["inventory"]) if data.get("inventory") else None,
    )


def load_profile(name_or_path: str | Path) -> Profile:
    """A shipped profile by name, or a profile file."""
    ref = str(name_or_path)
    if ref in builtin_profiles():
        text = resources.files("harness").joinpath("profiles", f"{ref}.yaml").read_text()
        return parse_profile(yaml.safe_load(text), f"profile {ref}")
    path = Path(ref).expanduser()
    if not path.is_file():
        raise UserError(f"unknown profile {ref!r}: use one of {', '.join(builtin_profiles())} or a profile YAML file")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise UserError(f"{path}: not valid YAML ({exc})") from None
    return parse_profile(data, str(path), path.resolve())
