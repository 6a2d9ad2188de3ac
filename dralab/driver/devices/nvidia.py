"""The ``nvidia`` backend: GPUs discovered through NVML (nvidia-ml-py).

Device nodes and driver libraries are not dralab's job on NVIDIA hosts: the NVIDIA container
toolkit's generated CDI spec (``nvidia-ctk cdi generate``, kind ``nvidia.com/gpu``) provides them.
Each prepared device therefore returns that spec's id (``nvidia.com/gpu=<uuid>``, or ``=<index>``
when the spec names devices by index) next to dralab's own. When no such spec exists the driver
says so (log, CDI spec note) and, if allowed, injects the host's ``/dev/nvidia*`` nodes itself.

Health (``health``), as NVIDIA's device plugin judges it: an XID critical error event
(``nvmlDeviceRegisterEvents`` with ``nvmlEventTypeXidCriticalError``, drained without waiting on
every call) makes its GPU unhealthy until the driver restarts, except the XIDs an application
causes (13, 31, 43, 45, 68, 109); a GPU whose handle or memory query answers ``GPU is lost`` is
unhealthy while it does.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from dralab.driver.devices import (
    BackendEdits,
    BackendOptions,
    Device,
    DeviceNode,
    Health,
    device_node_paths,
    pcie_root,
)
from dralab.errors import UserError
from dralab.model.quantity import MIB
from dralab.model.vendors import Vendor, load_vendor_table
from dralab.util import get_logger

log = get_logger("dralab.driver.nvidia")


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def model_of(name: str) -> str:
    """``NVIDIA L4`` -> ``L4``; ``Tesla V100-SXM2-16GB`` -> ``V100-SXM2-16GB``."""
    for prefix in ("NVIDIA ", "Tesla ", "GeForce "):
        name = name.removeprefix(prefix)
    return name.strip()


def discover(nvml: ModuleType, vendor: Vendor, sysfs: str = "/sys") -> list[Device]:
    """GPUs in NVML index order (pure over the ``nvml`` module, so a fake can stand in)."""
    nvml.nvmlInit()
    try:
        devices = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            name = _text(nvml.nvmlDeviceGetName(handle))
            total = int(nvml.nvmlDeviceGetMemoryInfo(handle).total)
            try:
                minor = int(nvml.nvmlDeviceGetMinorNumber(handle))
            except nvml.NVMLError:
                minor = index
            attributes: dict[str, Any] = {}
            try:
                bus = _text(nvml.nvmlDeviceGetPciInfo(handle).busId)
                root = pcie_root(bus, sysfs)
                if root:
                    attributes["resource.kubernetes.io/pcieRoot"] = root
            except nvml.NVMLError:
                pass
            devices.append(
                Device(
                    vendor=vendor.key,
                    name=vendor.device.name_pattern.format(index=index, chip_index=0, physical_id=minor),
                    uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
                    product_name=name,
                    model=model_of(name),
                    memory_bytes=total - total % MIB,
                    cores=100,
                    physical_id=minor,
                    index=index,
                    attributes=attributes,
                )
            )
        return devices
    finally:
        nvml.nvmlShutdown()


# XIDs an application causes (NVIDIA k8s-device-plugin's list): they say nothing about the GPU.
APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68, 109})
XID_CRITICAL = 0x8  # nvmlEventTypeXidCriticalError
ERROR_TIMEOUT = 10  # NVML_ERROR_TIMEOUT: no event waiting
ERROR_GPU_IS_LOST = 15  # NVML_ERROR_GPU_IS_LOST


def _code(exc: Exception) -> int | None:
    return getattr(exc, "value", None)


@dataclass
class XidWatch:
    """NVML kept initialised with one event set for XID critical errors of every GPU (pure over ``nvml``)."""

    nvml: ModuleType
    event_set: Any = None
    xids: dict[str, int] = field(default_factory=dict)  # uuid -> the last critical XID seen

    def start(self, uuids: Sequence[str]) -> None:
        nvml = self.nvml
        nvml.nvmlInit()  # reference-counted: discovery's init/shutdown pairs leave this one open
        try:
            self.event_set = nvml.nvmlEventSetCreate()
        except nvml.NVMLError as exc:
            log.warning("NVML events unavailable: XIDs are not watched", extra={"fields": {"error": str(exc)}})
            return
        for uuid in uuids:
            try:
                handle = nvml.nvmlDeviceGetHandleByUUID(uuid)
                nvml.nvmlDeviceRegisterEvents(handle, getattr(nvml, "nvmlEventTypeXidCriticalError", XID_CRITICAL),
                                              self.event_set)
            except nvml.NVMLError as exc:
                log.warning("XID events unavailable for a GPU", extra={"fields": {"uuid": uuid, "error": str(exc)}})

    def drain(self) -> dict[str, int]:
        """Read every waiting event (no wait); returns uuid -> critical XID for the GPUs that had one."""
        nvml = self.nvml
        while self.event_set is not None:
            try:
                event = nvml.nvmlEventSetWait(self.event_set, 0)
            except nvml.NVMLError as exc:
                if _code(exc) != getattr(nvml, "NVML_ERROR_TIMEOUT", ERROR_TIMEOUT):
                    log.warning("reading NVML events failed", extra={"fields": {"error": str(exc)}})
                break
            xid = int(event.eventData)
            if xid in APPLICATION_XIDS:
                continue
            try:
                uuid = _text(nvml.nvmlDeviceGetUUID(event.device))
            except nvml.NVMLError:
                continue
            log.warning("NVIDIA XID critical error", extra={"fields": {"uuid": uuid, "xid": xid}})
            self.xids[uuid] = xid
        return dict(self.xids)


def toolkit_device_names(cdi_dirs: Sequence[str], kind: str) -> set[str]:
    """Device names of every CDI spec of ``kind`` in ``cdi_dirs`` (unreadable files are skipped)."""
    names: set[str] = set()
    for folder in cdi_dirs:
        base = Path(folder)
        if not base.is_dir():
            continue
        for path in sorted(base.iterdir()):
            if path.suffix not in (".yaml", ".yml", ".json"):
                continue
            try:
                text = path.read_text()
                spec = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
            except (OSError, ValueError, yaml.YAMLError):
                continue
            if isinstance(spec, dict) and spec.get("kind") == kind:
                names |= {str(d.get("name")) for d in spec.get("devices") or [] if isinstance(d, dict)}
    return names


@dataclass
class NvidiaBackend:
    """GPUs of this host through NVML."""

    nvml: ModuleType
    vendor: Vendor
    cdi_dirs: tuple[str, ...] = ("/etc/cdi", "/var/run/cdi")
    inject_device_nodes: bool = True
    sysfs: str = "/sys"
    name: str = "nvidia"
    _known: dict[str, str] = field(default_factory=dict)  # device name -> uuid, from the last discovery
    _watch: XidWatch | None = None

    @classmethod
    def from_options(cls, options: BackendOptions) -> NvidiaBackend:
        try:
            import pynvml
        except ImportError:
            raise UserError("the nvidia backend needs nvidia-ml-py: pip install 'dralab[nvidia]'") from None
        table = options.table or load_vendor_table()
        return cls(
            nvml=pynvml,
            vendor=table.get("nvidia"),
            cdi_dirs=options.cdi_dirs,
            inject_device_nodes=options.inject_device_nodes,
            sysfs=options.sysfs,
        )

    def enumerate(self) -> list[Device]:
        """Discover again on every call, so the publisher's resync sees hardware changes."""
        try:
            devices = discover(self.nvml, self.vendor, self.sysfs)
        except self.nvml.NVMLError as exc:
            raise UserError(f"NVML discovery failed ({exc}): is the NVIDIA driver loaded?") from None
        self._known = {d.name: d.uuid for d in devices}
        return devices

    def health(self) -> dict[str, Health]:
        """XID critical errors since the driver started, and GPUs NVML has lost; other GPUs healthy."""
        nvml = self.nvml
        if not self._known:
            self.enumerate()
        if self._watch is None:
            watch = XidWatch(nvml)
            watch.start(list(self._known.values()))
            self._watch = watch
        xids = self._watch.drain()
        out: dict[str, Health] = {}
        for name, uuid in self._known.items():
            try:
                nvml.nvmlDeviceGetMemoryInfo(nvml.nvmlDeviceGetHandleByUUID(uuid))
            except nvml.NVMLError as exc:
                if _code(exc) == getattr(nvml, "NVML_ERROR_GPU_IS_LOST", ERROR_GPU_IS_LOST):
                    out[name] = Health(healthy=False, reason="gpu-lost")
                continue  # another failure says nothing about this GPU
            out[name] = Health(healthy=False, reason=f"xid-{xids[uuid]}") if uuid in xids else Health()
        return out

    def toolkit_id(self, device: Device, names: set[str]) -> str | None:
        kind = self.vendor.device.toolkit_cdi_kind
        if not kind:
            return None
        for candidate in (device.uuid, str(device.index)):
            if candidate in names:
                return f"{kind}={candidate}"
        return None

    def edits(self, devices: Sequence[Device]) -> BackendEdits:
        kind = self.vendor.device.toolkit_cdi_kind or "nvidia.com/gpu"
        names = toolkit_device_names(self.cdi_dirs, kind)
        ids, missing = [], []
        for dev in devices:
            found = self.toolkit_id(dev, names)
            if found:
                ids.append(found)
            else:
                missing.append(dev.uuid)
        notes: list[str] = []
        nodes: dict[str, DeviceNode] = {}
        if missing:
            note = (
                f"no NVIDIA container toolkit CDI spec of kind {kind} for {', '.join(missing)} in "
                f"{', '.join(self.cdi_dirs)}: run `nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`"
            )
            log.warning(note)
            notes.append(note)
            if self.inject_device_nodes:
                for dev in devices:
                    for path in device_node_paths(self.vendor.device.device_nodes, dev):
                        if Path(path).exists():
                            nodes.setdefault(path, DeviceNode(path=path, host_path=path))
        return BackendEdits(device_nodes=tuple(nodes.values()), extra_cdi_ids=tuple(ids), notes=tuple(notes))

    def common_edits(self) -> BackendEdits:
        return BackendEdits()
