"""The device inventory: the fake devices of a cluster, node by node.

Used by ``dralab cluster up --devices FILE`` (which KWOK nodes to create) and by the driver's
fake backend (which devices to publish). The default inventory is Lab 20's host: two 310P3 with
the exact uuids and attributes of its ResourceSlice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from dralab import yamlio
from dralab.errors import UserError
from dralab.model.quantity import format_binary, to_int
from dralab.model.vendors import VendorTable, load_vendor_table

DEFAULT_INVENTORY = "lab20"


@dataclass(frozen=True)
class InventoryDevice:
    """One accelerator as the inventory describes it."""

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
    attributes: dict[str, Any] = field(default_factory=dict)
    # topology, where the host's inventory says it: the PCIe root complex and the NUMA node
    pcie_root: str | None = None
    numa_node: int | None = None

    @property
    def memory(self) -> str:
        """Memory as the slice publishes it (``21525Mi``)."""
        return format_binary(self.memory_bytes)


@dataclass(frozen=True)
class InventoryNode:
    """A node and its devices."""

    name: str
    devices: tuple[InventoryDevice, ...]
    labels: dict[str, str] = field(default_factory=dict)
    arch: str = "amd64"


@dataclass(frozen=True)
class Inventory:
    """All nodes of a device inventory."""

    nodes: tuple[InventoryNode, ...]
    source: str = "<memory>"

    def node(self, name: str) -> InventoryNode:
        for node in self.nodes:
            if node.name == name:
                return node
        known = ", ".join(n.name for n in self.nodes) or "none"
        raise UserError(f"node {name!r} is not in the device inventory {self.source} (its nodes: {known})")

    def vendors(self) -> list[str]:
        """Vendors that have at least one device, in first-seen order."""
        seen: dict[str, None] = {}
        for node in self.nodes:
            for dev in node.devices:
                seen.setdefault(dev.vendor, None)
        return list(seen)


def _device(raw: dict[str, Any], node: str, pos: int, table: VendorTable, source: str) -> InventoryDevice:
    where = f"{source}: node {node} device #{pos}"
    vendor_key = raw.get("vendor")
    if not vendor_key:
        raise UserError(f"{where}: 'vendor' is required (one of {', '.join(table.vendors)})")
    vendor = table.get(vendor_key)
    for key in ("uuid", "memory"):
        if key not in raw:
            raise UserError(f"{where}: '{key}' is required")
    index = int(raw.get("index", pos))
    chip_index = int(raw.get("chipIndex", 0))
    physical_id = int(raw.get("physicalID", index))
    name = raw.get("name") or vendor.device.name_pattern.format(
        index=index, chip_index=chip_index, physical_id=physical_id
    )
    product = str(raw.get("productName") or raw.get("model") or vendor.title)
    return InventoryDevice(
        vendor=vendor_key,
        name=name,
        uuid=str(raw["uuid"]),
        product_name=product,
        model=str(raw.get("model") or product),
        memory_bytes=to_int(raw["memory"], f"{where} memory"),
        cores=int(raw.get("cores", 100)),
        physical_id=physical_id,
        index=index,
        chip_index=chip_index,
        attributes=dict(raw.get("attributes") or {}),
        pcie_root=_pcie_root(raw.get("pcieRoot"), where),
        numa_node=to_int(raw["numaNode"], f"{where} numaNode") if raw.get("numaNode") is not None else None,
    )


def _pcie_root(value: object, where: str) -> str | None:
    """A PCIe root as DRA's standard attribute holds it (``pci0000:00``: domain and bus of the root)."""
    if value is None:
        return None
    text = str(value)
    if not re.fullmatch(r"pci[0-9a-f]{4}:[0-9a-f]{2}", text):
        raise UserError(f"{where} pcieRoot: {text!r} is not a PCIe root such as pci0000:00 (from /sys/devices)")
    return text


def parse_inventory(data: dict[str, Any], source: str = "<memory>", table: VendorTable | None = None) -> Inventory:
    """Validate and type an inventory document (``{nodes: [{name, devices: [...]}]}``)."""
    table = table or load_vendor_table()
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list) or not data["nodes"]:
        raise UserError(f"{source}: a device inventory needs a non-empty 'nodes' list")
    nodes = []
    for raw_node in data["nodes"]:
        name = raw_node.get("name")
        if not name:
            raise UserError(f"{source}: every node needs a 'name'")
        devices = tuple(
            _device(raw, name, pos, table, source) for pos, raw in enumerate(raw_node.get("devices") or [])
        )
        names = [d.name for d in devices]
        if len(set(names)) != len(names):
            raise UserError(f"{source}: node {name} has duplicate device names {names}")
        nodes.append(
            InventoryNode(
                name=name,
                devices=devices,
                labels=dict(raw_node.get("labels") or {}),
                arch=str(raw_node.get("arch", "amd64")),
            )
        )
    return Inventory(nodes=tuple(nodes), source=source)


def builtin_inventories() -> list[str]:
    """Names of the inventories shipped with dralab (usable instead of a file path)."""
    folder = resources.files("dralab.model").joinpath("inventories")
    return sorted(p.name.removesuffix(".yaml") for p in folder.iterdir() if p.name.endswith(".yaml"))


def load_inventory(path_or_name: str | Path | None = None, table: VendorTable | None = None) -> Inventory:
    """Load an inventory from a file path or a shipped name (default: Lab 20's host)."""
    ref = str(path_or_name or DEFAULT_INVENTORY)
    if ref in builtin_inventories():
        text = resources.files("dralab.model").joinpath("inventories", f"{ref}.yaml").read_text()
        source = f"inventory {ref}"
    else:
        path = Path(ref)
        if not path.is_file():
            raise UserError(
                f"device inventory {ref!r} not found: give a YAML file or one of {', '.join(builtin_inventories())}"
            )
        text, source = path.read_text(), str(path)
    try:
        data = yamlio.load(text, source)
    except yaml.YAMLError as exc:
        raise UserError(f"{source}: not valid YAML ({exc})") from None
    return parse_inventory(data, source, table)
