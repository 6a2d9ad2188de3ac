"""helm and actionlint, built from their Go modules into dralab's cache (no downloads of binaries).

Used by the chart and workflow tests and by anyone rendering the chart without a helm install.
"""

from __future__ import annotations

from pathlib import Path

from dralab.gobuild import build_go_tools, cache_root

HELM_VERSION = "v3.20.2"  # keep in step with dralab/gobuild/wrappers/helm/go.mod
ACTIONLINT_VERSION = "v1.7.12"  # keep in step with dralab/gobuild/wrappers/actionlint/go.mod
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


def ensure_helm(progress: bool = False) -> Path:
    """Path of a helm binary built from helm's Go module (built on first use, then cached)."""
    result = build_go_tools(
        "helm", {"helm": "helm.sh/helm/v3/cmd/helm"}, tools_dir(), ldflags=_HELM_LDFLAGS, progress=progress
    )
    return result.paths["helm"]


def ensure_actionlint(progress: bool = False) -> Path:
    """Path of an actionlint binary built from its Go module (built on first use, then cached)."""
    result = build_go_tools(
        "actionlint",
        {"actionlint": "github.com/rhysd/actionlint/cmd/actionlint"},
        tools_dir(),
        ldflags=f"-X github.com/rhysd/actionlint.version={ACTIONLINT_VERSION}",
        progress=progress,
    )
    return result.paths["actionlint"]
