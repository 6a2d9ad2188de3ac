"""The stack configuration, validated before any resource exists (pure: no Pulumi, no I/O).

A typed model (pydantic) of the ``dralab:`` config keys: the program reads attributes, editors
get its JSON Schema (``dralab schema infra``), and every mistake gets one line saying which key is
wrong and how to fix it (``dralab.validation``). Pulumi hands config values over as strings, so
numbers and booleans are parsed here with the same messages as before.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from dralab.validation import fail, json_schema, validate
from dralab.versions import CERT_MANAGER_VERSION, KUBERNETES_VERSION, check_kubernetes_version
from dralab_kit.provision.chart import BACKENDS, LIFECYCLES

PROFILES = ("local", "kind", "baremetal", "node")
NODE_CLUSTER = "dralab-node-chart"  # the node profile's cluster; the harness profile node-chart uses it too
ROLES = ("control-plane", "worker")
DEFAULT_IMAGE = "ghcr.io/dralab/dralab:0.1.0"
DEFAULT_CNI = "https://github.com/flannel-io/flannel/releases/download/v0.28.10/kube-flannel.yml"
# Lab 20's namespace: the coexisting HAMi webhook must leave it alone.
DEFAULT_NAMESPACES = ({"name": "dra-ascend-e2e", "labels": {"hami.io/webhook": "ignore"}},)
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_HOST_KEY = re.compile(r"^(ssh-[a-z0-9-]+|ecdsa-sha2-nistp\d+|sk-[a-z0-9@.-]+) [A-Za-z0-9+/]+={0,2}$")
_CONFIG = ConfigDict(extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True)


def _or_text(kind: dict[str, Any], pattern: str) -> Any:
    """Schema of a scalar Pulumi may hand over as text ("2", "true"): the typed form or matching text."""

    def extra(schema: dict[str, Any]) -> None:
        keep: dict[str, Any] = {k: schema[k] for k in ("title", "description", "default") if k in schema}
        schema.clear()
        schema.update(keep, anyOf=[kind, {"type": "string", "pattern": pattern}])

    return extra


_DIGITS = "^[0-9]+$"
_FLAG = _or_text({"type": "boolean"}, "^(true|false|True|False|TRUE|FALSE|yes|no|1|0|)$")


def _dns_label(value: Any) -> str:
    if not isinstance(value, str) or not _DNS_LABEL.fullmatch(value):
        raise ValueError(f"must be a DNS label (lower-case letters, digits, '-'), got {value!r}")
    return value


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no", ""):
        return False
    raise ValueError(f"must be true or false, got {value!r}")


def _whole(value: Any, minimum: int) -> int:
    try:
        number = int(str(value))
    except ValueError:
        raise ValueError(f"must be a whole number, got {value!r}") from None
    if number < minimum:
        raise ValueError(f"must be at least {minimum}, got {number}")
    return number


def _one_of(value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ValueError(f"must be one of {', '.join(choices)}, got {value!r}")
    return str(value)


class Host(BaseModel):
    """A machine of the baremetal profile."""

    model_config = _CONFIG

    name: str = Field(description="node name (a DNS label)")
    address: str = Field(min_length=1, description="address SSH connects to")
    user: str = Field(min_length=1, description="SSH user (root or passwordless sudo)")
    role: str = Field("worker", json_schema_extra={"enum": list(ROLES)})
    port: int = Field(22, json_schema_extra=_or_text({"type": "integer", "minimum": 1}, _DIGITS))
    host_key: str | None = Field(None, description="'<type> <base64>' as ssh-keyscan prints it (known_hosts)")

    @field_validator("name")
    @classmethod
    def _name(cls, value: Any) -> str:
        return _dns_label(value)

    @field_validator("role")
    @classmethod
    def _role(cls, value: Any) -> str:
        if value not in ROLES:
            raise ValueError(f"must be control-plane or worker, got {value!r}")
        return str(value)

    @field_validator("port", mode="before")
    @classmethod
    def _port(cls, value: Any) -> int:
        return _whole(value, 1)

    @field_validator("host_key", mode="before")
    @classmethod
    def _host_key(cls, value: Any) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str) or not _HOST_KEY.match(value.strip()):
            raise ValueError(f"must be '<type> <base64 key>' as ssh-keyscan prints it, got {value!r}")
        return value.strip()


class Namespace(BaseModel):
    """A namespace the program creates (a name, or a name with labels)."""

    model_config = _CONFIG

    name: str
    labels: dict[str, str] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _name(cls, value: Any) -> str:
        return _dns_label(value)

    @model_validator(mode="before")
    @classmethod
    def _a_name_alone(cls, value: Any) -> Any:
        return {"name": value} if isinstance(value, str) else value

    @field_validator("labels", mode="before")
    @classmethod
    def _labels(cls, value: Any) -> dict[str, str]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise ValueError("must be a mapping")
        return {str(k): str(v) for k, v in value.items()}


class Settings(BaseModel):
    """The ``dralab:`` stack config (keys as in ``pulumi config``; attributes in snake_case)."""

    model_config = _CONFIG

    profile: str = Field("local", json_schema_extra={"enum": list(PROFILES)})
    cluster_name: str = Field("dralab", description="local: the dralab cluster; kind: the kind cluster")
    namespace: str = Field("dralab-system", description="where dralab is installed")
    namespaces: tuple[Namespace, ...] = Field(
        default_factory=lambda: tuple(Namespace.model_validate(n) for n in DEFAULT_NAMESPACES),
        description="namespaces created for the labs (a name, or {name, labels})",
    )
    kubeconfig: str | None = None
    kubernetes_version: str = KUBERNETES_VERSION
    vendors: tuple[str, ...] | None = Field(None, description="vendors to enable; default: the backend's")
    backend: str = Field("fake", description="fake on local and kind; ascend or nvidia on baremetal")
    lifecycle: str = Field("claim", json_schema_extra={"enum": list(LIFECYCLES)})
    image: str = DEFAULT_IMAGE
    load_image: bool = Field(False, json_schema_extra=_FLAG)
    workers: int = Field(1, json_schema_extra=_or_text({"type": "integer", "minimum": 0}, _DIGITS))
    chart_values: dict[str, Any] = Field(default_factory=dict, description="extra Helm values")
    hosts: tuple[Host, ...] = Field((), description="baremetal: the machines, exactly one control-plane")
    pod_subnet: str = "10.244.0.0/16"
    cni: str = DEFAULT_CNI
    cert_manager_version: str = CERT_MANAGER_VERSION
    ssh_private_key: str | None = Field(None, exclude=True, repr=False, description="baremetal: a secret")
    # Replacing the cluster resources re-runs kubeadm reset/init on live hosts: only when asked.
    allow_cluster_replacement: bool = Field(False, json_schema_extra=_FLAG)
    # SSH without checking host keys lets an impersonated host capture the join token: only when asked.
    insecure_skip_host_key_check: bool = Field(False, json_schema_extra=_FLAG)

    @model_validator(mode="before")
    @classmethod
    def _defaults_that_depend_on_the_profile(cls, raw: Any) -> Any:
        if not isinstance(raw, dict):
            return raw
        out = {k: v for k, v in raw.items() if v is not None}
        profile = out.get("profile", "local")
        out.setdefault("backend", "ascend" if profile == "baremetal" else "fake")
        if profile == "node":
            out.setdefault("clusterName", NODE_CLUSTER)
        if profile != "baremetal":
            out.pop("hosts", None)  # only the baremetal profile has hosts
        elif not out.get("hosts"):
            raise fail(
                "the baremetal profile needs hosts: pulumi config set --path 'dralab:hosts[0].name' node1 "
                "(and .address, .user, .role=control-plane, .hostKey)"
            )
        return out

    @field_validator("profile")
    @classmethod
    def _profile(cls, value: Any) -> str:
        return _one_of(value, PROFILES)

    @field_validator("backend")
    @classmethod
    def _backend(cls, value: Any) -> str:
        return _one_of(value, BACKENDS)

    @field_validator("lifecycle")
    @classmethod
    def _lifecycle(cls, value: Any) -> str:
        return _one_of(value, LIFECYCLES)

    @field_validator("cluster_name", "namespace")
    @classmethod
    def _names(cls, value: Any) -> str:
        return _dns_label(value)

    @field_validator("kubernetes_version", mode="before")
    @classmethod
    def _version(cls, value: Any) -> str:
        return check_kubernetes_version(value)  # a UserError names the version and the supported ones

    @field_validator("load_image", "allow_cluster_replacement", "insecure_skip_host_key_check", mode="before")
    @classmethod
    def _flags(cls, value: Any) -> bool:
        return _boolean(value)

    @field_validator("workers", mode="before")
    @classmethod
    def _workers(cls, value: Any) -> int:
        return _whole(value, 0)

    @field_validator("kubeconfig", mode="before")
    @classmethod
    def _kubeconfig(cls, value: Any) -> str | None:
        return value or None

    @field_validator("vendors", mode="before")
    @classmethod
    def _vendors(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, list | tuple) or not value:
            raise ValueError("must be a non-empty list, e.g. [ascend]")
        return value

    @field_validator("chart_values", mode="before")
    @classmethod
    def _chart_values(cls, value: Any) -> dict[str, Any]:
        if not value:
            return {}
        if not isinstance(value, dict):
            raise ValueError("must be a mapping of extra Helm values")
        return value

    @field_validator("hosts", mode="before")
    @classmethod
    def _hosts_shape(cls, value: Any) -> Any:
        if not isinstance(value, list | tuple):
            raise ValueError("must be a list of {name, address, user, role[, port, hostKey]}")
        for i, entry in enumerate(value):
            if not isinstance(entry, dict):
                raise fail(f"dralab:hosts[{i}] must be a mapping with name, address, user, role")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        if self.profile == "baremetal" and self.backend == "fake":
            raise fail("dralab:backend must be ascend or nvidia on baremetal (fake devices are for local and kind)")
        if self.profile in ("kind", "node") and self.backend != "fake":
            raise fail(f"dralab:backend must be fake on {self.profile} (its nodes have no accelerators)")
        if self.profile != "baremetal":
            return self
        names = [h.name for h in self.hosts]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise fail(f"dralab:hosts names must be unique: {', '.join(dupes)} appear more than once")
        planes = [h for h in self.hosts if h.role == "control-plane"]
        if len(planes) != 1:
            raise fail(f"dralab:hosts needs exactly one host with role control-plane, found {len(planes)}")
        missing = [i for i, h in enumerate(self.hosts) if not h.host_key]
        if missing and not self.insecure_skip_host_key_check:
            raise fail(
                f"dralab:hosts[{missing[0]}].hostKey is not set: SSH must check each host's key, or an impersonated "
                "host captures the join token. Run `ssh-keyscan -t ed25519 <address>` on a trusted network, check "
                "the fingerprint on the host's console, and set it: pulumi config set --path "
                f"'dralab:hosts[{missing[0]}].hostKey' 'ssh-ed25519 AAAA...'; or accept the risk with "
                "`pulumi config set dralab:insecureSkipHostKeyCheck true`"
            )
        return self

    @property
    def control_plane(self) -> Host:
        return next(h for h in self.hosts if h.role == "control-plane")

    @property
    def workers_hosts(self) -> tuple[Host, ...]:
        return tuple(h for h in self.hosts if h.role == "worker")


# The config keys the program reads, as `pulumi config` spells them.
KNOWN_KEYS = tuple(info.alias or name for name, info in Settings.model_fields.items())


def parse_settings(raw: dict[str, Any]) -> Settings:
    """Build the settings from config values (``dralab:`` prefix stripped; objects already parsed)."""
    settings = validate(Settings, raw, "", key_prefix="dralab:", root="config")
    if settings.vendors is not None:
        from dralab.model.vendors import load_vendor_table

        load_vendor_table(enabled=list(settings.vendors))  # unknown vendors: a clear UserError
    return settings


def settings_schema() -> dict[str, Any]:
    """JSON Schema of the ``dralab:`` stack config (``dralab schema infra``)."""
    return json_schema(
        Settings,
        "dralab infra stack config",
        "The dralab: keys of a Pulumi stack of infra/, without the prefix (Pulumi.<stack>.yaml, config:)",
    )
