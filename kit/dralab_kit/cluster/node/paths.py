"""Where the real node keeps its files: all under the node's folder of the cluster (pure paths).

Nothing of the real node lives in the host's /etc, /var/lib or /run: containerd's root and
state, the kubelet's root, pod logs, CNI config and IPAM data all sit under ``node_dir``. The
few paths containerd and libcni hard-code (``/run/containerd/s`` for shim sockets,
``/var/lib/cni/results``) are covered by tmpfs mounts inside the node's private mount namespace.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

SOCKET_BUDGET = 100
REG_SOCKET_NAME_MAX = 32  # "<driver>-reg.sock" of dralab's drivers


@dataclass(frozen=True)
class NodePaths:
    """Every path of one real node."""

    cluster: str
    node: str
    root: Path  # the node's folder (ClusterHandle.node_dir)

    @property
    def config_dir(self) -> Path:
        return self.root / "config"

    @property
    def containerd_config(self) -> Path:
        return self.config_dir / "containerd.toml"

    @property
    def kubelet_config(self) -> Path:
        return self.config_dir / "kubelet.yaml"

    @property
    def kubelet_kubeconfig(self) -> Path:
        return self.config_dir / "kubelet.kubeconfig"

    @property
    def manifests_dir(self) -> Path:
        """Stays empty: the kubelet_feature_gates role looks for static pods here."""
        return self.config_dir / "manifests"

    @property
    def roles_stamp(self) -> Path:
        return self.config_dir / "roles.json"

    @property
    def pki_dir(self) -> Path:
        return self.root / "pki"

    @property
    def containerd_root(self) -> Path:
        return self.root / "containerd"

    @property
    def containerd_state(self) -> Path:
        return self.root / "ctrd-state"

    @property
    def containerd_socket(self) -> Path:
        return self.root / "containerd.sock"

    @property
    def kubelet_root(self) -> Path:
        """The kubelet's --root-dir: ``<node>/k``, or a short temp folder when plugin sockets would be too long.

        Driver registration sockets live in ``<root-dir>/plugins_registry``; gRPC refused a 106-byte
        socket path there, so the budget is kept at 100 bytes.
        """
        inside = self.root / "k"
        if len(str(inside / "plugins_registry")) + 1 + REG_SOCKET_NAME_MAX <= SOCKET_BUDGET:
            return inside
        return Path(tempfile.gettempdir()) / f"dralab-{os.getuid()}" / f"k-{self.tag}"

    @property
    def plugins_registry(self) -> Path:
        """The kubelet's plugin registry (``<root-dir>/plugins_registry``): the driver registers here."""
        return self.kubelet_root / "plugins_registry"

    @property
    def tap_dir(self) -> Path:
        """The DRA sockets the kubelet is given (the tap forwards them to the drivers)."""
        return self.root / "tap"

    @property
    def pod_logs(self) -> Path:
        return self.root / "pod-logs"

    @property
    def cni_conf_dir(self) -> Path:
        return self.root / "cni" / "net.d"

    @property
    def cni_data_dir(self) -> Path:
        return self.root / "cni" / "networks"

    @property
    def sysctl_dir(self) -> Path:
        """Files bind-mounted over the kernel settings the kubelet writes."""
        return self.root / "sysctl"

    @property
    def images_dir(self) -> Path:
        return self.root / "images"

    @property
    def ns_ready(self) -> Path:
        """Written by the namespace holder once its mounts are in place."""
        return self.root / "ns-ready"

    @property
    def tag(self) -> str:
        """A short stable id of this node (names the bridge and the cgroup root)."""
        return hashlib.sha256(f"{self.root}".encode()).hexdigest()[:8]

    @property
    def bridge(self) -> str:
        return f"dlbr{self.tag}"  # interface names are at most 15 bytes

    @property
    def cgroup_root(self) -> str:
        return f"/dralab-{self.tag}"
