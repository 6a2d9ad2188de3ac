"""helm and actionlint, built from their Go modules into dralab's cache (no downloads of binaries).

Used by the chart and workflow tests and by anyone rendering the chart without a helm install.
``built_tool`` answers without building, for the unit tier, which builds nothing from Go.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from dralab_kit.gobuild import build_go_tools, cache_root
from dralab_kit.gobuild.builder import built_paths

HELM_VERSION = "v3.20.2"  # keep in step with kit/dralab_kit/gobuild/wrappers/helm/go.mod
ACTIONLINT_VERSION = "v1.7.12"  # keep in step with kit/dralab_kit/gobuild/wrappers/actionlint/go.mod
TARGET_KUBE_MINOR = "35"  # what `helm template`/`lint` assume when no cluster is asked

_HELM_LDFLAGS = " ".join(
    [
        f"-X helm.sh/helm/v3/internal/version.version={HELM_VERSION}",
        "-X helm.sh/helm/v3/internal/version.gitTreeState=clean",
        "-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1",
        f"-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor={TARGET_KUBE_MINOR}",
        "-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1",
        f"-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor={TARGET_KUBE_MINOR}",
    ]
)


def tools_dir() -> Path:
    return cache_root() / "bin" / "tools"


# tool -> (wrapper module, {binary: package}, ldflags): what build_go_tools is asked for each tool
_TOOLS: dict[str, tuple[str, dict[str, str], str]] = {
    "helm": ("helm", {"helm": "helm.sh/helm/v3/cmd/helm"}, _HELM_LDFLAGS),
    "actionlint": (
        "actionlint",
        {"actionlint": "github.com/rhysd/actionlint/cmd/actionlint"},
        f"-X github.com/rhysd/actionlint.version={ACTIONLINT_VERSION}",
    ),
}


def ensure_tool(name: str, progress: bool = False) -> Path:
    """Path of tool ``name`` built from its Go module (built on first use under a lock, then cached)."""
    wrapper, packages, ldflags = _TOOLS[name]
    return build_go_tools(wrapper, packages, tools_dir(), ldflags=ldflags, progress=progress).paths[name]


def built_tool(name: str) -> Path | None:
    """Path of tool ``name`` when it is already built and current; None otherwise (nothing is built)."""
    wrapper, packages, ldflags = _TOOLS[name]
    paths = built_paths(wrapper, packages, tools_dir(), ldflags=ldflags)
    return None if paths is None else paths[name]


def ensure_helm(progress: bool = False) -> Path:
    """Path of a helm binary built from helm's Go module (built on first use, then cached)."""
    return ensure_tool("helm", progress)


def find_helm() -> Path | None:
    """The helm a user has on PATH, else the one dralab built (``make tools``), else None; builds nothing."""
    found = shutil.which("helm")
    return Path(found) if found else built_tool("helm")


def helm_or_build(progress: bool = False) -> Path:
    """``find_helm``, building helm from its Go module when there is none (the install path needs one)."""
    return find_helm() or ensure_helm(progress)


def ensure_actionlint(progress: bool = False) -> Path:
    """Path of an actionlint binary built from its Go module (built on first use, then cached)."""
    return ensure_tool("actionlint", progress)
