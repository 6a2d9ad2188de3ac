"""The local cluster's binaries: which programs, from which wrapper module, where they land.

``dralab cluster build`` puts kube-apiserver, kube-controller-manager, kube-scheduler, kubectl,
etcd and kwok into ``${DRALAB_CACHE:-~/.cache/dralab}/bin/<k8s version>/``; ``binary_path``
is how every other module finds them. ``--kubernetes VERSION`` builds another supported version's
control plane and kubelet (wrapper modules ``kubernetes_v1_<minor>``/``kubelet_v1_<minor>``, written
by ``scripts/k8s-wrapper``) into ``bin/<VERSION>/``; etcd, kwok, containerd, runc and the CNI
plugins do not depend on it and are built once, with the default version's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dralab.errors import UserError
from dralab.versions import KUBERNETES_VERSION, check_supported
from dralab_kit.cluster import preflight
from dralab_kit.gobuild import BuildResult, build_go_tools, cache_root

K8S_VERSION = KUBERNETES_VERSION  # the default (Lab 20's); the one definition is dralab.versions
ETCD_VERSION = "v3.6.14"
KWOK_VERSION = "v0.7.0"


@dataclass(frozen=True)
class ToolSet:
    """Binaries built together from one wrapper module."""

    wrapper: str
    packages: dict[str, str]
    ldflags: str
    env: tuple[tuple[str, str], ...] = ()
    subdir: str = ""


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

CONTAINERD_VERSION = "v2.2.9"
RUNC_VERSION = "v1.3.7"
CNI_VERSION = "v1.10.0"

# The real node (`dralab cluster build --real-node`): kubelet at the control plane's version,
# containerd + ctr + the runc shim, runc with seccomp (the kubelet always asks for RuntimeDefault
# on the sandbox, and a runc without seccomp refuses it), and the three CNI plugins the node uses.
NODE_TOOLSETS: tuple[ToolSet, ...] = (
    ToolSet(
        wrapper="kubelet",
        # kube-proxy: the Services of a cluster with a pod network (`up --pod-network`, dralab_kit.cluster.node.podnet)
        packages={"kubelet": "k8s.io/kubernetes/cmd/kubelet", "kube-proxy": "k8s.io/kubernetes/cmd/kube-proxy"},
        ldflags=_k8s_ldflags(K8S_VERSION),
    ),
    ToolSet(
        wrapper="containerd",
        packages={
            "containerd": "github.com/containerd/containerd/v2/cmd/containerd",
            "ctr": "github.com/containerd/containerd/v2/cmd/ctr",
            "containerd-shim-runc-v2": "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2",
        },
        ldflags=f"-X github.com/containerd/containerd/v2/version.Version={CONTAINERD_VERSION}",
        env=(("GOFLAGS", "-tags=no_btrfs,no_devmapper,no_zfs -mod=readonly"),),
    ),
    ToolSet(
        wrapper="runc",
        packages={"runc": "github.com/opencontainers/runc"},
        # Static, cgo for libseccomp (Debian's libseccomp-dev ships the static library).
        ldflags=f"-X main.version={RUNC_VERSION.lstrip('v')} -extldflags=-static",
        env=(("CGO_ENABLED", "1"), ("GOFLAGS", "-tags=seccomp,netgo,osusergo -mod=readonly")),
    ),
    ToolSet(
        wrapper="cni",
        packages={
            "bridge": "github.com/containernetworking/plugins/plugins/main/bridge",
            "host-local": "github.com/containernetworking/plugins/plugins/ipam/host-local",
            "loopback": "github.com/containernetworking/plugins/plugins/main/loopback",
        },
        ldflags="",
        subdir="cni",
    ),
)

NODE_BINARIES: tuple[str, ...] = tuple(name for ts in NODE_TOOLSETS for name in ts.packages)


# Wrapper modules whose binaries are built per Kubernetes version (the rest serve every version).
VERSIONED_WRAPPERS = ("kubernetes", "kubelet")


def for_version(toolset: ToolSet, version: str) -> ToolSet:
    """``toolset`` as built for ``version``: the version's wrapper module and version stamp."""
    if toolset.wrapper not in VERSIONED_WRAPPERS or version == K8S_VERSION:
        return toolset
    minor = check_supported(version).split(".")[1]
    return ToolSet(wrapper=f"{toolset.wrapper}_v1_{minor}", packages=toolset.packages,
                   ldflags=_k8s_ldflags(version), env=toolset.env, subdir=toolset.subdir)


def _versioned(name: str) -> bool:
    return any(name in ts.packages for ts in (*TOOLSETS, *NODE_TOOLSETS) if ts.wrapper in VERSIONED_WRAPPERS)


def bin_dir(version: str = K8S_VERSION) -> Path:
    """Where the binaries of ``version`` live."""
    return cache_root() / "bin" / version


def binary_path(name: str, version: str = K8S_VERSION) -> Path:
    """Path of one cluster binary of ``version`` (it may not be built yet: see ``missing_binaries``)."""
    home = bin_dir(version if _versioned(name) else K8S_VERSION)
    if name in BINARIES:
        return home / name
    for toolset in NODE_TOOLSETS:
        if name in toolset.packages:
            return home / toolset.subdir / name if toolset.subdir else home / name
    known = ", ".join((*BINARIES, *NODE_BINARIES))
    raise UserError(f"{name!r} is not a cluster binary (known: {known})")


def node_bin_dir(toolset: ToolSet, version: str = K8S_VERSION) -> Path:
    """Where one real-node toolset lands (the CNI plugins get a folder of their own)."""
    home = bin_dir(version if toolset.wrapper in VERSIONED_WRAPPERS else K8S_VERSION)
    return home / toolset.subdir if toolset.subdir else home


def cni_bin_dir() -> Path:
    """The folder containerd searches for CNI plugins."""
    return bin_dir() / "cni"


def _build_hint(version: str, real_node: bool) -> str:
    flags = (" --real-node" if real_node else "") + (f" --kubernetes {version}" if version != K8S_VERSION else "")
    return f"dralab cluster build{flags}"


def missing_node_binaries(version: str = K8S_VERSION) -> list[str]:
    """Real-node binaries of ``version`` not present in the cache."""
    return [name for name in NODE_BINARIES if not binary_path(name, version).is_file()]


def require_node_binaries(version: str = K8S_VERSION) -> None:
    """UserError naming the fix when a real-node binary is missing."""
    missing = missing_node_binaries(version)
    if missing:
        raise UserError(
            f"real-node binaries missing in {bin_dir(version)}: {', '.join(missing)}; run "
            f"`{_build_hint(version, True)}` (needs Go >= 1.25, the Go module proxy, gcc and libseccomp-dev for runc)"
        )


def missing_binaries(version: str = K8S_VERSION) -> list[str]:
    """Binaries of ``version`` not present in the cache."""
    return [name for name in BINARIES if not binary_path(name, version).is_file()]


def require_binaries(version: str = K8S_VERSION) -> None:
    """UserError naming the fix when ``version`` is not one dralab builds or a binary of it is missing."""
    version = check_supported(version)  # a build hint for a version no build makes would mislead
    missing = missing_binaries(version)
    if missing:
        raise UserError(
            f"cluster binaries missing in {bin_dir(version)}: {', '.join(missing)}; "
            f"run `{_build_hint(version, False)}` first "
            "(needs Go >= 1.25 and the Go module proxy; takes minutes the first time)"
        )


def build(
    force: bool = False, progress: bool = True, real_node: bool = False, version: str = K8S_VERSION
) -> list[BuildResult]:
    """Build every cluster binary of ``version`` that is not already built; one result per wrapper module.

    ``real_node`` adds the kubelet, containerd, runc and the CNI plugins.
    """
    version = check_supported(version)
    if force or missing_binaries(version) or (real_node and missing_node_binaries(version)):
        preflight.require(preflight.check_build(preflight.THIS_HOST, real_node), "build the cluster binaries")
    results = []
    for toolset in TOOLSETS:
        ts = for_version(toolset, version)
        home = bin_dir(version if toolset.wrapper in VERSIONED_WRAPPERS else K8S_VERSION)
        results.append(build_go_tools(ts.wrapper, ts.packages, home, ts.ldflags, force=force, progress=progress))
    if real_node:
        results.extend(build_node(force=force, progress=progress, version=version))
    return results


def build_node(force: bool = False, progress: bool = True, version: str = K8S_VERSION) -> list[BuildResult]:
    """Build the real node's binaries (kubelet, containerd, runc, CNI plugins) that are not built."""
    out = []
    for toolset in NODE_TOOLSETS:
        ts = for_version(toolset, version)
        out.append(build_go_tools(ts.wrapper, ts.packages, node_bin_dir(toolset, version), ts.ldflags, dict(ts.env),
                                  force=force, progress=progress))
    return out
