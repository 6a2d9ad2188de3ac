"""The stack configuration, validated before any resource exists (pure: no Pulumi, no I/O).

Every mistake gets one line saying which key is wrong and how to fix it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from dralab.errors import UserError
from dralab.provision.chart import BACKENDS, LIFECYCLES
from dralab.provision.versions import CERT_MANAGER_VERSION, KUBERNETES_VERSION, check_kubernetes_version

PROFILES = ("local", "kind", "baremetal")
ROLES = ("control-plane", "worker")
DEFAULT_IMAGE = "ghcr.io/dralab/dralab:0.1.0"
DEFAULT_CNI = "https://github.com/flannel-io/flannel/releases/download/v0.28.10/kube-flannel.yml"
# Lab 20's namespace: the coexisting HAMi webhook must leave it alone.
DEFAULT_NAMESPACES = ({"name": "dra-ascend-e2e", "labels": {"hami.io/webhook": "ignore"}},)
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_HOST_KEY = re.compile(r"^(ssh-[a-z0-9-]+|ecdsa-sha2-nistp\d+|sk-[a-z0-9@.-]+) [A-Za-z0-9+/]+={0,2}$")

KNOWN_KEYS = (
    "profile", "clusterName", "namespace", "namespaces", "kubeconfig", "kubernetesVersion", "vendors",
    "backend", "lifecycle", "image", "loadImage", "workers", "chartValues", "hosts", "podSubnet", "cni",
    "certManagerVersion", "sshPrivateKey", "allowClusterReplacement", "insecureSkipHostKeyCheck",
)  # fmt: skip


@dataclass(frozen=True)
class Host:
    name: str
    address: str
    user: str
    role: str
    port: int = 22
    host_key: str | None = None  # "<type> <base64>", as in known_hosts without the address


@dataclass(frozen=True)
class Namespace:
    name: str
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Settings:
    profile: str
    cluster_name: str = "dralab"
    namespace: str = "dralab-system"
    namespaces: tuple[Namespace, ...] = ()
    kubeconfig: str | None = None
    kubernetes_version: str = KUBERNETES_VERSION
    vendors: tuple[str, ...] | None = None
    backend: str = "fake"
    lifecycle: str = "claim"
    image: str = DEFAULT_IMAGE
    load_image: bool = False
    workers: int = 1
    chart_values: dict[str, Any] = field(default_factory=dict)
    hosts: tuple[Host, ...] = ()
    pod_subnet: str = "10.244.0.0/16"
    cni: str = DEFAULT_CNI
    cert_manager_version: str = CERT_MANAGER_VERSION
    # Replacing the cluster resources re-runs kubeadm reset/init on live hosts: only when asked.
    allow_cluster_replacement: bool = False
    # SSH without checking host keys lets an impersonated host capture the join token: only when asked.
    insecure_skip_host_key_check: bool = False

    @property
    def control_plane(self) -> Host:
        return next(h for h in self.hosts if h.role == "control-plane")

    @property
    def workers_hosts(self) -> tuple[Host, ...]:
        return tuple(h for h in self.hosts if h.role == "worker")


def _bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no", ""):
        return False
    raise UserError(f"dralab:{key} must be true or false, got {value!r}")


def _int(key: str, value: Any, minimum: int) -> int:
    try:
        number = int(str(value))
    except ValueError:
        raise UserError(f"dralab:{key} must be a whole number, got {value!r}") from None
    if number < minimum:
        raise UserError(f"dralab:{key} must be at least {minimum}, got {number}")
    return number


def _choice(key: str, value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise UserError(f"dralab:{key} must be one of {', '.join(choices)}, got {value!r}")
    return str(value)


def _name(key: str, value: Any) -> str:
    if not isinstance(value, str) or not _DNS_LABEL.match(value):
        raise UserError(f"dralab:{key} must be a DNS label (lower-case letters, digits, '-'), got {value!r}")
    return value


def _hosts(raw: Any) -> tuple[Host, ...]:
    if not raw:
        raise UserError(
            "the baremetal profile needs hosts: pulumi config set --path 'dralab:hosts[0].name' node1 "
            "(and .address, .user, .role=control-plane)"
        )
    if not isinstance(raw, list):
        raise UserError("dralab:hosts must be a list of {name, address, user, role[, port]}")
    hosts = []
    for i, entry in enumerate(raw):
        if not isinstance(entry, dict):
            raise UserError(f"dralab:hosts[{i}] must be a mapping with name, address, user, role")
        missing = [k for k in ("name", "address", "user") if not entry.get(k)]
        if missing:
            raise UserError(f"dralab:hosts[{i}] lacks {', '.join(missing)}")
        unknown = sorted(set(entry) - {"name", "address", "user", "role", "port", "hostKey"})
        if unknown:
            raise UserError(
                f"dralab:hosts[{i}] has unknown key(s) {', '.join(unknown)}: use name, address, user, role, port, "
                "hostKey"
            )
        host_key = entry.get("hostKey")
        if host_key is not None and (not isinstance(host_key, str) or not _HOST_KEY.match(host_key.strip())):
            raise UserError(
                f"dralab:hosts[{i}].hostKey must be '<type> <base64 key>' as ssh-keyscan prints it, got {host_key!r}"
            )
        role = entry.get("role", "worker")
        if role not in ROLES:
            raise UserError(f"dralab:hosts[{i}].role must be control-plane or worker, got {role!r}")
        hosts.append(
            Host(
                name=_name(f"hosts[{i}].name", entry["name"]),
                address=str(entry["address"]),
                user=str(entry["user"]),
                role=role,
                port=_int(f"hosts[{i}].port", entry.get("port", 22), 1),
                host_key=host_key.strip() if host_key else None,
            )
        )
    names = [h.name for h in hosts]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise UserError(f"dralab:hosts names must be unique: {', '.join(dupes)} appear more than once")
    planes = [h for h in hosts if h.role == "control-plane"]
    if len(planes) != 1:
        raise UserError(f"dralab:hosts needs exactly one host with role control-plane, found {len(planes)}")
    return tuple(hosts)


def _namespaces(raw: Any) -> tuple[Namespace, ...]:
    if raw is None:
        raw = list(DEFAULT_NAMESPACES)
    if not isinstance(raw, list):
        raise UserError("dralab:namespaces must be a list of {name, labels}")
    out = []
    for i, entry in enumerate(raw):
        entry = {"name": entry} if isinstance(entry, str) else entry
        if not isinstance(entry, dict) or "name" not in entry:
            raise UserError(f"dralab:namespaces[{i}] must be a name or {{name, labels}}")
        labels = entry.get("labels") or {}
        if not isinstance(labels, dict):
            raise UserError(f"dralab:namespaces[{i}].labels must be a mapping")
        out.append(
            Namespace(_name(f"namespaces[{i}].name", entry["name"]), {str(k): str(v) for k, v in labels.items()})
        )
    return tuple(out)


def parse_settings(raw: dict[str, Any]) -> Settings:
    """Build the settings from config values (``dralab:`` prefix stripped; objects already parsed)."""
    unknown = sorted(set(raw) - set(KNOWN_KEYS))
    if unknown:
        raise UserError(
            f"unknown config key(s) {', '.join('dralab:' + k for k in unknown)}; valid: {', '.join(KNOWN_KEYS)}"
        )
    profile = _choice("profile", raw.get("profile", "local"), PROFILES)
    backend_default = "ascend" if profile == "baremetal" else "fake"
    backend = _choice("backend", raw.get("backend", backend_default), BACKENDS)
    if profile == "baremetal" and backend == "fake":
        raise UserError("dralab:backend must be ascend or nvidia on baremetal (fake devices are for local and kind)")
    if profile == "kind" and backend != "fake":
        raise UserError("dralab:backend must be fake on kind (kind nodes have no accelerators)")
    vendors = raw.get("vendors")
    if vendors is not None:
        if isinstance(vendors, str):
            vendors = [v.strip() for v in vendors.split(",") if v.strip()]
        if not isinstance(vendors, list) or not vendors:
            raise UserError("dralab:vendors must be a non-empty list, e.g. [ascend]")
        vendors = tuple(vendors)
    chart_values = raw.get("chartValues") or {}
    if not isinstance(chart_values, dict):
        raise UserError("dralab:chartValues must be a mapping of extra Helm values")
    settings = Settings(
        profile=profile,
        cluster_name=_name("clusterName", raw.get("clusterName", "dralab")),
        namespace=_name("namespace", raw.get("namespace", "dralab-system")),
        namespaces=_namespaces(raw.get("namespaces")),
        kubeconfig=raw.get("kubeconfig") or None,
        kubernetes_version=check_kubernetes_version(raw.get("kubernetesVersion", KUBERNETES_VERSION)),
        vendors=vendors,
        backend=backend,
        lifecycle=_choice("lifecycle", raw.get("lifecycle", "claim"), LIFECYCLES),
        image=str(raw.get("image", DEFAULT_IMAGE)),
        load_image=_bool("loadImage", raw.get("loadImage", False)),
        workers=_int("workers", raw.get("workers", 1), 0),
        chart_values=chart_values,
        hosts=_hosts(raw.get("hosts")) if profile == "baremetal" else (),
        pod_subnet=str(raw.get("podSubnet", "10.244.0.0/16")),
        cni=str(raw.get("cni", DEFAULT_CNI)),
        cert_manager_version=str(raw.get("certManagerVersion", CERT_MANAGER_VERSION)),
        allow_cluster_replacement=_bool("allowClusterReplacement", raw.get("allowClusterReplacement", False)),
        insecure_skip_host_key_check=_bool("insecureSkipHostKeyCheck", raw.get("insecureSkipHostKeyCheck", False)),
    )
    if profile == "baremetal" and not settings.insecure_skip_host_key_check:
        missing = [i for i, h in enumerate(settings.hosts) if not h.host_key]
        if missing:
            raise UserError(
                f"dralab:hosts[{missing[0]}].hostKey is not set: SSH must check each host's key, or an impersonated "
                "host captures the join token. Run `ssh-keyscan -t ed25519 <address>` on a trusted network, check "
                "the fingerprint on the host's console, and set it: pulumi config set --path "
                f"'dralab:hosts[{missing[0]}].hostKey' 'ssh-ed25519 AAAA...'; or accept the risk with "
                "`pulumi config set dralab:insecureSkipHostKeyCheck true`"
            )
    if settings.vendors is not None:
        from dralab.model.vendors import load_vendor_table

        load_vendor_table(enabled=list(settings.vendors))  # unknown vendors: a clear UserError
    return settings
