"""The ``fake`` backend: devices from a device inventory, device nodes that really exist on the host.

Each device node a vendor's containers expect (``/dev/davinci0``, ``/dev/davinci_manager``, ...) is
created under ``<state-dir>/dev/`` as a character device with ``/dev/null``'s major/minor, so a real
container runtime (kind) can inject it and the container sees ``/dev/davinci0`` as Lab 20 shows.
Where ``mknod`` is not permitted (no CAP_MKNOD), the CDI spec points at ``/dev/null`` itself and
says so in a note.

Health comes from a file in the state folder, ``fake-device-health.json`` (``{"gpu-0": {"healthy":
false, "reason": "xid-79"}}``), read on every ``health`` call: ``dralab cluster fault device-health``
writes it, so labs and tests make a device unhealthy and well again without touching the driver.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dralab.driver.devices import HEALTHY, BackendEdits, BackendOptions, Device, DeviceNode, Health, device_node_paths
from dralab.model.convert import PCIE_ROOT_ATTRIBUTE
from dralab.model.inventory import InventoryDevice, load_inventory
from dralab.model.vendors import VendorTable, load_vendor_table
from dralab.util import get_logger

log = get_logger("dralab.driver.fake")

NULL_DEVICE = "/dev/null"
# A claim annotated with a non-empty value fails NodePrepareResources with that text on the fake
# backend (and only there): labs and tests make one claim fail while others on the device proceed.
FAULT_ANNOTATION = "dralab.io/fake-prepare-fault"
# Injected device health (in the backend's state folder): device name -> {"healthy": bool, "reason": str}.
HEALTH_FILE = "fake-device-health.json"


def read_health_file(path: Path) -> dict[str, Health] | None:
    """The injected health of each named device; {} without the file, None when it cannot be read."""
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.warning("fake device health file unreadable", extra={"fields": {"path": str(path), "error": str(exc)}})
        return None
    if not isinstance(raw, dict):
        return None
    out = {}
    for name, entry in raw.items():
        if isinstance(entry, dict):
            out[str(name)] = Health(healthy=bool(entry.get("healthy", True)), reason=str(entry.get("reason") or ""))
    return out


def make_char_device(target: Path, like: str = NULL_DEVICE) -> str | None:
    """Create ``target`` as a character device with the major/minor of ``like``.

    Returns None on success, else the reason it could not be created (the caller falls back).
    """
    info = os.stat(like)
    if target.exists():
        st = os.lstat(target)
        if stat.S_ISCHR(st.st_mode) and st.st_rdev == info.st_rdev:
            return None
        target.unlink()
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mknod(target, 0o666 | stat.S_IFCHR, info.st_rdev)
        os.chmod(target, 0o666)
    except OSError as exc:
        with contextlib.suppress(OSError):
            target.unlink()
        return f"mknod {target} not permitted ({exc.strerror}); host path {like} is used instead"
    return None


@dataclass
class FakeBackend:
    """Devices of one inventory node; device nodes are real char devices under ``dev_root``."""

    node: str
    devices: list[Device]
    table: VendorTable
    dev_root: Path
    inject_device_nodes: bool = True
    dry_run: bool = False
    name: str = "fake"
    health_file: Path | None = None
    _host_nodes: dict[str, DeviceNode] = field(default_factory=dict)
    _fallback: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_options(cls, options: BackendOptions) -> FakeBackend:
        table = options.table or load_vendor_table()
        inventory = load_inventory(options.devices_file, table)
        node = inventory.node(options.node)
        return cls(
            node=options.node,
            devices=[from_inventory(d) for d in node.devices],
            table=table,
            dev_root=Path(options.state_dir) / "dev",
            inject_device_nodes=options.inject_device_nodes,
            dry_run=options.dry_run,
            health_file=Path(options.state_dir) / HEALTH_FILE,
        )

    def enumerate(self) -> list[Device]:
        return list(self.devices)

    def _host_node(self, path: str) -> DeviceNode:
        """The host side of container device node ``path``, created on first use."""
        if path not in self._host_nodes:
            target = self.dev_root / path.removeprefix("/dev/")
            reason = None if self.dry_run else make_char_device(target)
            if reason is None:
                self._host_nodes[path] = DeviceNode(path=path, host_path=str(target))
            else:
                log.warning("fake device node fallback", extra={"fields": {"path": path, "reason": reason}})
                self._fallback[path] = reason
                self._host_nodes[path] = DeviceNode(path=path, host_path=NULL_DEVICE)
        return self._host_nodes[path]

    def edits(self, devices: Sequence[Device]) -> BackendEdits:
        if not self.inject_device_nodes:
            return BackendEdits()
        nodes: dict[str, DeviceNode] = {}
        for dev in devices:
            patterns = self.table.get(dev.vendor).device.device_nodes
            for path in device_node_paths(patterns, dev):
                nodes.setdefault(path, self._host_node(path))
        notes = tuple(self._fallback[p] for p in nodes if p in self._fallback)
        return BackendEdits(device_nodes=tuple(nodes.values()), notes=notes)

    def common_edits(self) -> BackendEdits:
        return BackendEdits()

    def health(self) -> dict[str, Health]:
        """Every device healthy unless the health file says otherwise; nothing while the file is unreadable."""
        injected = read_health_file(self.health_file) if self.health_file is not None else {}
        if injected is None:
            return {}
        return {d.name: injected.get(d.name, HEALTHY) for d in self.devices}

    def prepare_fault(self, claim: dict[str, Any]) -> str | None:
        """The injected failure for ``claim`` (its ``FAULT_ANNOTATION``), None when it may be prepared."""
        value = ((claim.get("metadata") or {}).get("annotations") or {}).get(FAULT_ANNOTATION)
        if not value:
            return None
        return f"injected by the fake backend ({FAULT_ANNOTATION}): {str(value)[:200]}"


def from_inventory(dev: InventoryDevice) -> Device:
    """An inventory device as a driver device.

    The inventory's free-form ``attributes`` (npu-smi NPU id, PCIe bus id) describe the host for
    humans and fixtures; they are not published, so the slice matches Lab 20's exactly. Its
    topology is: ``pcieRoot`` as the standard ``resource.kubernetes.io/pcieRoot``, ``numaNode`` as
    the driver's ``numaNode`` (what ``dralab.io/align`` constrains on).
    """
    topology: dict[str, Any] = {}
    if dev.pcie_root is not None:
        topology[PCIE_ROOT_ATTRIBUTE] = dev.pcie_root
    if dev.numa_node is not None:
        topology["numaNode"] = dev.numa_node
    return Device(
        vendor=dev.vendor,
        name=dev.name,
        uuid=dev.uuid,
        product_name=dev.product_name,
        model=dev.model,
        memory_bytes=dev.memory_bytes,
        cores=dev.cores,
        physical_id=dev.physical_id,
        index=dev.index,
        chip_index=dev.chip_index,
        attributes=topology,
    )
