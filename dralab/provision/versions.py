"""Pinned versions and the feature gates every dralab cluster needs, plus their validation."""

from __future__ import annotations

import re

from dralab.errors import UserError

# The gates DRA with consumable capacity needs on kube-apiserver, kube-controller-manager,
# kube-scheduler and kubelet. DRAConsumableCapacity is alpha (off) in 1.34/1.35; DynamicResourceAllocation
# is GA and locked on in 1.35, so it is not listed (setting a locked gate only logs a warning).
FEATURE_GATES: dict[str, bool] = {"DRAConsumableCapacity": True}

# The four components that must carry the gates (FACTS: a missing one silently breaks accounting).
GATED_COMPONENTS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet")

KUBERNETES_VERSION = "v1.35.4"
KIND_VERSION = "v0.31.0"
# kind publishes one node image per Kubernetes minor with each release; pinned by digest.
KIND_NODE_IMAGE = "kindest/node:v1.35.0@sha256:452d707d4862f52530247495d180205e029056831160e22870e37e3f6c1ac31f"
CERT_MANAGER_VERSION = "v1.21.1"  # what Lab 20 ran against
CERT_MANAGER_REPO = "https://charts.jetstack.io"

_VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)$")
MIN_MINOR = 34  # DRAConsumableCapacity exists from 1.34 on


def feature_gates_arg(gates: dict[str, bool] | None = None) -> str:
    """Render gates as the ``--feature-gates`` flag value, sorted so output is stable."""
    gates = FEATURE_GATES if gates is None else gates
    return ",".join(f"{name}={'true' if on else 'false'}" for name, on in sorted(gates.items()))


def parse_feature_gates(text: str) -> dict[str, bool]:
    """Parse ``A=true,B=false`` (the flag form) into a mapping; a bad entry is a user error."""
    gates: dict[str, bool] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = part.partition("=")
        if not sep or value.lower() not in ("true", "false") or not name:
            raise UserError(f"bad feature gate {part!r}: write NAME=true or NAME=false")
        gates[name] = value.lower() == "true"
    return gates


def check_kubernetes_version(version: str) -> str:
    """Return ``version`` normalized to ``vX.Y.Z``; reject versions that cannot run dralab.

    DRAConsumableCapacity appeared in 1.34; kubeadm's v1beta4 config needs >= 1.31, so 1.34 is the floor.
    """
    match = _VERSION_RE.match(str(version).strip())
    if not match:
        raise UserError(f"bad Kubernetes version {version!r}: write it as v1.35.4 (major.minor.patch)")
    major, minor, patch = (int(g) for g in match.groups())
    if major != 1 or minor < MIN_MINOR:
        raise UserError(
            f"Kubernetes {version} is too old: DRA consumable capacity needs v1.{MIN_MINOR} or newer "
            f"(use {KUBERNETES_VERSION})"
        )
    return f"v{major}.{minor}.{patch}"
