"""Pinned versions and the feature gates every dralab cluster needs, plus their validation.

In the product because the driver asks it whether the cluster's Kubernetes turns device taints on
(``dralab.driver.health``); the kit's clusters, provisioning and gate-table sync read it too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from dralab.errors import UserError

# The one definition of the Kubernetes versions dralab runs on. The default is Lab 20's; every
# component that writes a version or feature gates (the local and real-node clusters, kind and
# kubeadm configs, the Pulumi program, the Ansible role) takes it from here.
KUBERNETES_VERSION = "v1.35.4"
SUPPORTED_KUBERNETES_VERSIONS = ("v1.35.4", "v1.36.3", "v1.37.2")

# The DRA gates dralab cares about, as each version's k8s.io/kubernetes pkg/features/kube_features.go
# declares them: (from minor, stage, on by default, locked). Read from v1.35.4, v1.36.3 and v1.37.2
# (tests/integration/cluster/test_versions.py compares this table with the source that was built).
GATE_STAGES: dict[str, tuple[tuple[int, str, bool, bool], ...]] = {
    "DRAConsumableCapacity": ((34, "alpha", False, False), (36, "beta", True, False)),
    "DRAPrioritizedList": ((33, "alpha", False, False), (34, "beta", True, False), (36, "ga", True, False),
                           (37, "ga", True, True)),
    "DRADeviceTaints": ((33, "alpha", False, False), (36, "beta", True, False), (37, "ga", True, False)),
    "DRAResourceClaimDeviceStatus": ((32, "alpha", False, False), (33, "beta", True, False),
                                     (37, "ga", True, True)),
    "DRAExtendedResource": ((34, "alpha", False, False), (36, "beta", True, False), (37, "ga", True, True)),
    "DRAAdminAccess": ((32, "alpha", False, False), (34, "beta", True, False), (36, "ga", True, True)),
}

# What dralab needs on: consumable capacity. Gates a profile wants besides (DRADeviceTaints on 1.35,
# say) are added by name; feature_gates_for decides per version which of them must be passed.
REQUIRED_GATES = ("DRAConsumableCapacity",)


def kubernetes_minor(version: str) -> int:
    """``v1.36.3`` -> 36 (the version is checked first)."""
    return int(check_kubernetes_version(version).split(".")[1])


def gate_stage(gate: str, version: str) -> tuple[str, bool, bool] | None:
    """(stage, on by default, locked) of ``gate`` in ``version``; None when that version does not know it."""
    minor = kubernetes_minor(version)
    known = [entry for entry in GATE_STAGES.get(gate, ()) if entry[0] <= minor]
    return known[-1][1:] if known else None


def feature_gates_for(version: str = KUBERNETES_VERSION, wanted: tuple[str, ...] = REQUIRED_GATES) -> dict[str, bool]:
    """The ``--feature-gates`` a component of ``version`` needs so every ``wanted`` gate is on.

    A gate is passed only where it is off by default; one that is on by default or locked is left
    out (passing a locked gate is an error in later releases), and so is one the version does not
    know. A wanted gate that ``version`` does not have at all is an error: it cannot be turned on.
    """
    gates: dict[str, bool] = {}
    for gate in wanted:
        stage = gate_stage(gate, version)
        if stage is None:
            if gate not in GATE_STAGES:
                gates[gate] = True  # not one of dralab's DRA gates: the caller asked for it by name
                continue
            raise UserError(f"Kubernetes {version} has no feature gate {gate}: use a newer version")
        if not stage[1]:
            gates[gate] = True
    return gates


# The four components that must carry the gates (FACTS: a missing one silently breaks accounting).
GATED_COMPONENTS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet")

# kind's node image per Kubernetes minor, pinned by digest, with the kind release that made it the
# default (kind supports a node image with the release it shipped with, others on a best effort).
# kind publishes only some patches, so the image's patch can trail the version above (1.35.0 for
# 1.35.4). The 1.36 and 1.37 digests were not pulled here (no registry is reachable): they are the
# defaults of kind v0.32.0 and v0.33.0 as many public repositories pin them, all agreeing.
KIND_RELEASES: dict[int, tuple[str, str]] = {
    35: ("v0.31.0", "kindest/node:v1.35.0@sha256:452d707d4862f52530247495d180205e029056831160e22870e37e3f6c1ac31f"),
    36: ("v0.32.0", "kindest/node:v1.36.1@sha256:3489c7674813ba5d8b1a9977baea8a6e553784dab7b84759d1014dbd78f7ebd5"),
    37: ("v0.33.0", "kindest/node:v1.37.0@sha256:a1ed56cfb0e7b93589bdf97c8cd566405a265939e3620fc4f5de89adff580ae5"),
}
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
    if major != 1:
        raise UserError(
            f"Kubernetes {version} is not a 1.x release: dralab knows Kubernetes 1 only "
            f"(use {KUBERNETES_VERSION})"
        )
    if minor < MIN_MINOR:
        raise UserError(
            f"Kubernetes {version} is too old: DRA consumable capacity needs v1.{MIN_MINOR} or newer "
            f"(use {KUBERNETES_VERSION})"
        )
    return f"v{major}.{minor}.{patch}"


_SERVER_VERSION_RE = re.compile(r"v?(\d+)\.(\d+)\.(\d+)")


def server_version(info: Mapping[str, Any]) -> str | None:
    """``vX.Y.Z`` from a ``GET /version`` answer (``gitVersion`` may carry ``-rc.1`` or ``+build``)."""
    match = _SERVER_VERSION_RE.match(str(info.get("gitVersion") or ""))
    return f"v{match[1]}.{match[2]}.{match[3]}" if match else None


def check_supported(version: str) -> str:
    """``version`` normalized, if dralab builds and tests it (``dralab cluster build --kubernetes``)."""
    normal = check_kubernetes_version(version)
    if normal not in SUPPORTED_KUBERNETES_VERSIONS:
        raise UserError(
            f"Kubernetes {normal} is not one dralab builds: use one of {', '.join(SUPPORTED_KUBERNETES_VERSIONS)}"
        )
    return normal


def kind_release(version: str = KUBERNETES_VERSION) -> tuple[str, str]:
    """(kind release, pinned node image) for ``version``'s minor; a minor kind has no image pinned for
    is a user error naming the ones there are."""
    minor = kubernetes_minor(version)
    if minor not in KIND_RELEASES:
        known = ", ".join(f"1.{m}" for m in sorted(KIND_RELEASES))
        raise UserError(f"no kind node image is pinned for Kubernetes {version}: use one of {known}")
    return KIND_RELEASES[minor]


# The gates of the default version (kept for the callers that write Lab 20's clusters).
FEATURE_GATES: dict[str, bool] = feature_gates_for(KUBERNETES_VERSION)
KIND_VERSION, KIND_NODE_IMAGE = kind_release(KUBERNETES_VERSION)
