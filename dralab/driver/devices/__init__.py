"""Device backends: the small protocol between the driver core and a vendor's hardware.

A backend answers three questions: which devices does this node have (``enumerate``), which
vendor-specific container edits do these allocated devices need (``edits``: device nodes, driver
files, ids of CDI specs written by someone else), and how healthy are they now (``health``: the
fake backend's fault file, npu-smi's health query, NVML's XID events). Everything vendor-neutral
(enforcement env, per-claim directories, CDI files, checkpoint, device taints) lives in the driver
core, so ``fake``, ``ascend`` and ``nvidia`` are interchangeable.

Modules: :mod:`.fake` (devices from an inventory file, faults injected through files), :mod:`.ascend`
(npu-smi), :mod:`.nvidia` (NVML).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from dralab.errors import UserError
from dralab.model.vendors import VendorTable

# The one list of backends: name -> (module, class). The CLI's choices, the config's check, the chart's
# values and `load_backend` all read it; a new vendor is one line here and its module.
BACKEND_CLASSES = {
    "fake": ("dralab.driver.devices.fake", "FakeBackend"),
    "ascend": ("dralab.driver.devices.ascend", "AscendBackend"),
    "nvidia": ("dralab.driver.devices.nvidia", "NvidiaBackend"),
}
BACKENDS = tuple(BACKEND_CLASSES)


@dataclass(frozen=True)
class DeviceNode:
    """A device node a container gets: ``path`` inside the container, ``host_path`` on the node."""

    path: str
    host_path: str


@dataclass(frozen=True)
class Mount:
    """A bind mount into the container."""

    host_path: str
    container_path: str
    read_only: bool = True


@dataclass(frozen=True)
class Device:
    """One accelerator of the node, as the driver publishes and prepares it."""

    vendor: str
    name: str
    uuid: str
    product_name: str
    model: str
    memory_bytes: int
    cores: int
    physical_id: int
    index: int
    chip_index: int = 0
    # Extra published attributes (name -> str|int|bool), e.g. resource.kubernetes.io/pcieRoot.
    attributes: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Health:
    """One device's health as its backend sees it now; ``reason`` is short (it becomes a taint's value)."""

    healthy: bool = True
    reason: str = ""


HEALTHY = Health()


@dataclass(frozen=True)
class BackendEdits:
    """Vendor-specific container edits for some allocated devices, plus notes worth recording in the spec."""

    device_nodes: tuple[DeviceNode, ...] = ()
    mounts: tuple[Mount, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    extra_cdi_ids: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


class Backend(Protocol):
    """What the driver core needs from a device backend."""

    name: str

    def enumerate(self) -> list[Device]:
        """The node's devices, in a stable order (index order)."""
        ...

    def edits(self, devices: Sequence[Device]) -> BackendEdits:
        """Vendor edits for a claim that was allocated ``devices`` (in allocation-result order)."""
        ...

    def common_edits(self) -> BackendEdits:
        """Node-wide edits for the ``common`` CDI device (driver files)."""
        ...

    def health(self) -> dict[str, Health]:
        """Device name -> health now. A device left out keeps its last known state (its query failed)."""
        ...


@dataclass(frozen=True)
class BackendOptions:
    """Everything a backend may need from the command line; each uses only its part."""

    node: str
    state_dir: Path
    devices_file: str | None = None
    inject_device_nodes: bool = True
    npu_smi: str = "npu-smi"
    cdi_dirs: tuple[str, ...] = ("/etc/cdi", "/var/run/cdi")
    sysfs: str = "/sys"
    # Offline previews: compute host paths but create nothing on the host.
    dry_run: bool = False
    # The vendor table in force (config overrides applied); None: the shipped table.
    table: VendorTable | None = None


def load_backend(name: str, options: BackendOptions) -> Backend:
    """Build the backend called ``name``; imports only that backend's module."""
    if name not in BACKEND_CLASSES:
        raise UserError(f"unknown device backend {name!r}: choose one of {', '.join(BACKENDS)}")
    module, cls = BACKEND_CLASSES[name]
    backend: Backend = getattr(importlib.import_module(module), cls).from_options(options)
    return backend


class _Missing(dict[str, Any]):
    """format_map helper: unknown placeholders make the pattern inapplicable."""

    def __missing__(self, key: str) -> str:
        raise KeyError(key)


def device_node_paths(patterns: Sequence[str], device: Device) -> list[str]:
    """Container device-node paths of ``device`` from the vendor table's patterns (pure)."""
    values = _Missing(
        index=device.index,
        physical_id=device.physical_id,
        chip_index=device.chip_index,
        render=128 + device.index,
    )
    out = []
    for pattern in patterns:
        try:
            out.append(pattern.format_map(values))
        except KeyError:
            continue
    return out


def pcie_root(bus_id: str, sysfs: str | Path = "/sys") -> str | None:
    """The PCIe root complex (``pci0000:80``) of a device's bus id, from sysfs; None when unknown.

    Published as ``resource.kubernetes.io/pcieRoot`` so claims can ask for devices under one root.
    """
    bdf = bus_id.strip().lower()
    if bdf.count(":") == 1:  # NVML may give 0000:81:00.0 or 00000000:81:00.0
        bdf = f"0000:{bdf}"
    elif len(bdf.split(":")[0]) > 4:
        bdf = bdf[-12:]
    link = Path(sysfs) / "bus" / "pci" / "devices" / bdf
    try:
        target = link.resolve(strict=True)
    except OSError:
        return None
    for part in target.parts:
        if part.startswith("pci") and ":" in part:
            return part
    return None
