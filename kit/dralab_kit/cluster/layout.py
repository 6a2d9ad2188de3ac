"""Where a local cluster keeps its files (pure path arithmetic, no I/O).

``${DRALAB_HOME:-~/.dralab}/clusters/<name>/`` holds the PKI, kubeconfig, component logs, the
state file and one folder per node whose children are fixed by contract (cdi/, plugins/,
registry/, driver-state/, kubelet-records.jsonl). Unix socket paths are limited to 108 bytes,
so ``check_socket_paths`` refuses a home that is too deep before anything starts.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from dralab.errors import UserError

DEFAULT_NAME = "dralab"
SOCKET_PATH_MAX = 107  # sun_path is 108 bytes including the terminating NUL
# Node folders hold unix sockets: when the cluster folder is deeper than this, they move to a
# short folder under the system temp dir (derived from the cluster folder, so stable).
NODES_ROOT_MAX = 40
_NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$")


def dralab_home() -> Path:
    """``$DRALAB_HOME`` or ``~/.dralab``."""
    return Path(os.environ.get("DRALAB_HOME") or Path.home() / ".dralab")


def check_name(name: str) -> str:
    """Cluster names are short DNS labels (they become directory names)."""
    if not _NAME_RE.match(name):
        raise UserError(f"cluster name {name!r} is invalid: use 1-32 lower-case letters, digits and '-'")
    return name


def component_log_name(component: str) -> str:
    """Log file name of a component (``driver/node-a`` -> ``driver-node-a.log``)."""
    return component.replace("/", "-") + ".log"


@dataclass(frozen=True)
class Layout:
    """All paths of one cluster."""

    name: str
    root: Path

    @classmethod
    def of(cls, name: str = DEFAULT_NAME, home: Path | None = None) -> Layout:
        return cls(name=check_name(name), root=(home or dralab_home()) / "clusters" / name)

    @property
    def state_file(self) -> Path:
        return self.root / "state.json"

    @property
    def lock_file(self) -> Path:
        return self.root.parent / f".{self.name}.lock"

    @property
    def kubeconfig(self) -> Path:
        return self.root / "kubeconfig"

    @property
    def pki_dir(self) -> Path:
        return self.root / "pki"

    @property
    def logs_dir(self) -> Path:
        return self.root / "logs"

    @property
    def etcd_dir(self) -> Path:
        return self.root / "etcd"

    @property
    def config_dir(self) -> Path:
        return self.root / "config"

    @property
    def run_dir(self) -> Path:
        """Scratch space of components (controller-manager and scheduler serving certs)."""
        return self.root / "run"

    def log_path(self, component: str) -> Path:
        return self.logs_dir / component_log_name(component)

    @property
    def nodes_root(self) -> Path:
        """Parent of the node folders: inside the cluster folder, or a short temp path when that is deep."""
        inside = self.root / "nodes"
        if len(str(inside)) <= NODES_ROOT_MAX:
            return inside
        digest = hashlib.sha256(str(self.root).encode()).hexdigest()[:10]
        return Path(tempfile.gettempdir()) / f"dralab-{os.getuid()}" / digest

    def node_dir(self, node: str) -> Path:
        return self.nodes_root / node

    def cdi_dir(self, node: str) -> Path:
        return self.node_dir(node) / "cdi"

    def plugins_dir(self, node: str) -> Path:
        return self.node_dir(node) / "plugins"

    def registry_dir(self, node: str) -> Path:
        return self.node_dir(node) / "registry"

    def driver_state_dir(self, node: str) -> Path:
        return self.node_dir(node) / "driver-state"

    def boot_id_path(self, node: str) -> Path:
        """The node's simulated boot id (written by ``dralab cluster reboot``; absent: the kernel's)."""
        return self.node_dir(node) / "boot_id"

    def records_path(self, node: str) -> Path:
        return self.node_dir(node) / "kubelet-records.jsonl"

    def standin_checkpoint(self, node: str) -> Path:
        return self.node_dir(node) / "kubelet-checkpoint.json"


def socket_paths(layout: Layout, node: str, drivers: Iterable[str]) -> list[str]:
    """The unix sockets a node's drivers will create."""
    paths = []
    for driver in drivers:
        paths.append(str(layout.registry_dir(node) / f"{driver}-reg.sock"))
        paths.append(str(layout.plugins_dir(node) / driver / "dra.sock"))
    return paths


def check_socket_paths(layout: Layout, nodes: Iterable[str], drivers: Iterable[str]) -> None:
    """UserError when a driver socket of any node would exceed the unix socket path limit."""
    drivers = list(drivers)
    for node in nodes:
        for path in socket_paths(layout, node, drivers):
            if len(path.encode()) > SOCKET_PATH_MAX:
                raise UserError(
                    f"socket path {path} is {len(path.encode())} bytes, over the unix limit of {SOCKET_PATH_MAX}; "
                    "set DRALAB_HOME to a shorter directory (e.g. /tmp/dl) or use shorter node names"
                )
