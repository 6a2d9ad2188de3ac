"""Command lines of the real node's processes (pure: paths and ports in, ComponentSpec out).

``node-ns/<node>`` holds the private mount namespace; ``containerd/<node>`` and ``kubelet/<node>``
enter it with ``nsenter`` (which execs, so the recorded pid is containerd's or the kubelet's own).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from dralab_kit.cluster.components import ComponentSpec, Health
from dralab_kit.cluster.node.paths import NodePaths

NS = "node-ns"
CONTAINERD = "containerd"
KUBELET = "kubelet"
KUBE_PROXY = "kube-proxy"
TAP = "dra-tap"


def ns_component(node: str) -> str:
    return f"{NS}/{node}"


def containerd_component(node: str) -> str:
    return f"{CONTAINERD}/{node}"


def kubelet_component(node: str) -> str:
    return f"{KUBELET}/{node}"


TAP_CODE = ("dralab_kit/cluster/node/tap.py",)  # a change restarts the tap (components.code_fingerprint)


def tap_component(node: str) -> str:
    return f"{TAP}/{node}"


def kube_proxy_component(node: str) -> str:
    return f"{KUBE_PROXY}/{node}"


def kube_proxy_spec(paths: NodePaths, binary: Path, config: Path, healthz_port: int) -> ComponentSpec:
    """kube-proxy of a node with a pod network (``podnet``): in the host's mount namespace, where
    iptables lives; the rules it writes are the host's, and ``podnet.remove`` takes them off."""
    argv = [str(binary), f"--config={config}", "--v=1"]
    return ComponentSpec(
        kube_proxy_component(paths.node),
        argv,
        Health(f"http://127.0.0.1:{healthz_port}/healthz"),
        env=node_env(binary.parent),
        stop_timeout=10.0,
    )


def tap_spec(paths: NodePaths, driver_registry: Path, records: Path) -> ComponentSpec:
    """The recorder between the kubelet and the drivers (``dralab_kit.cluster.node.tap``)."""
    argv = [
        sys.executable, "-m", "dralab_kit.cluster.node.tap",
        "--driver-registry", str(driver_registry),
        "--kubelet-registry", str(paths.plugins_registry),
        "--socket-dir", str(paths.tap_dir),
        "--records", str(records),
        "--node", paths.node,
    ]  # fmt: skip
    return ComponentSpec(tap_component(paths.node), argv, None, stop_timeout=5.0, code=TAP_CODE)


def node_env(bin_dir: Path) -> dict[str, str]:
    """PATH with the node binaries first: containerd finds its shim and runc there."""
    return {
        "PATH": os.pathsep.join(
            [str(bin_dir), "/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]
        )
    }


def holder_spec(paths: NodePaths) -> ComponentSpec:
    argv = [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "--",
        sys.executable,
        "-m",
        "dralab_kit.cluster.node.holder",
        "--root",
        str(paths.root),
        "--cluster",
        paths.cluster,
        "--node",
        paths.node,
        "--host-ns",
        os.readlink("/proc/self/ns/mnt"),
    ]
    return ComponentSpec(ns_component(paths.node), argv, None, stop_timeout=5.0)


def _enter(holder_pid: int) -> list[str]:
    return ["nsenter", f"--mount=/proc/{holder_pid}/ns/mnt", "--"]


def containerd_spec(paths: NodePaths, holder_pid: int, binary: Path, metrics_port: int) -> ComponentSpec:
    argv = [
        *_enter(holder_pid),
        str(binary),
        "--config",
        str(paths.containerd_config),
        "--log-level",
        "info",
    ]
    # the metrics listener doubles as the health endpoint (it answers once the daemon is up)
    return ComponentSpec(
        containerd_component(paths.node),
        argv,
        Health(f"http://127.0.0.1:{metrics_port}/v1/metrics"),
        env=node_env(binary.parent),
        stop_timeout=10.0,
    )


def kubelet_spec(paths: NodePaths, holder_pid: int, binary: Path, healthz_port: int) -> ComponentSpec:
    argv = [
        *_enter(holder_pid),
        str(binary),
        f"--config={paths.kubelet_config}",
        f"--kubeconfig={paths.kubelet_kubeconfig}",
        f"--root-dir={paths.kubelet_root}",
        f"--cert-dir={paths.pki_dir}",
        f"--hostname-override={paths.node}",
        # the kubelet refuses a loopback --node-ip and would publish the host's address; as
        # "external", it keeps addresses once set, and dralab sets 127.0.0.1 (lifecycle.patch_node)
        "--cloud-provider=external",
        "--v=2",
    ]
    return ComponentSpec(
        kubelet_component(paths.node),
        argv,
        Health(f"http://127.0.0.1:{healthz_port}/healthz"),
        env=node_env(binary.parent),
        stop_timeout=10.0,
    )
