"""The local cluster's binaries: which programs, from which wrapper module, where they land.

``dralab cluster build`` puts kube-apiserver, kube-controller-manager, kube-scheduler, kubectl,
etcd and kwok into ``${DRALAB_CACHE:-~/.cache/dralab}/bin/<k8s version>/``; ``binary_path``
is how every other module finds them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dralab.errors import UserError
from dralab.gobuild import BuildResult, build_go_tools, cache_root

K8S_VERSION = "v1.35.4"
ETCD_VERSION = "v3.6.14"
KWOK_VERSION = "v0.7.0"


@dataclass(frozen=True)
class ToolSet:
    """Binaries built together from one wrapper module."""

    wrapper: str
    packages: dict[str, str]
    ldflags: str


def _k8s_ldflags(version: str) -> str:
    major, minor = version.lstrip("v").split(".")[:2]
    prefix = "-X k8s.io/component-base/version"
    return (
        f"{prefix}.gitVersion={version} {prefix}.gitMajor={major} {prefix}.gitMinor={minor} "
        f"{prefix}.gitTreeState=clean {prefix}.buildDate=1970-01-01T00:00:00Z"
    )


TOOLSETS: tuple[ToolSet, ...] = (
    ToolSet(
        wrapper="kubernetes",
        packages={
            "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
            "kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
            "kube-scheduler": "k8s.io/kubernetes/cmd/kube-scheduler",
            "kubectl": "k8s.io/kubernetes/cmd/kubectl",
        },
        ldflags=_k8s_ldflags(K8S_VERSION),
    ),
    ToolSet(wrapper="etcd", packages={"etcd": "go.etcd.io/etcd/server/v3"}, ldflags=""),
    ToolSet(
        wrapper="kwok",
        packages={"kwok": "sigs.k8s.io/kwok/cmd/kwok"},
        ldflags=f"-X sigs.k8s.io/kwok/pkg/consts.Version={KWOK_VERSION}",
    ),
)

BINARIES: tuple[str, ...] = tuple(name for ts in TOOLSETS for name in ts.packages)


def bin_dir(version: str = K8S_VERSION) -> Path:
    """Where the binaries of ``version`` live."""
    return cache_root() / "bin" / version


def binary_path(name: str) -> Path:
    """Path of one cluster binary (it may not be built yet: see ``missing_binaries``)."""
    if name not in BINARIES:
        raise UserError(f"{name!r} is not a cluster binary (known: {', '.join(BINARIES)})")
    return bin_dir() / name


def missing_binaries() -> list[str]:
    """Binaries not present in the cache."""
    return [name for name in BINARIES if not binary_path(name).is_file()]


def require_binaries() -> None:
    """UserError naming the fix when a binary is missing."""
    missing = missing_binaries()
    if missing:
        raise UserError(
            f"cluster binaries missing in {bin_dir()}: {', '.join(missing)}; run `dralab cluster build` first "
            "(needs Go >= 1.25 and the Go module proxy; takes minutes the first time)"
        )


def build(force: bool = False, progress: bool = True) -> list[BuildResult]:
    """Build every cluster binary that is not already built; one result per wrapper module."""
    results = []
    for toolset in TOOLSETS:
        results.append(
            build_go_tools(
                toolset.wrapper, toolset.packages, bin_dir(), toolset.ldflags, force=force, progress=progress
            )
        )
    return results
