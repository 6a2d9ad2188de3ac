"""The ``ascend`` backend: Huawei Ascend NPUs discovered through ``npu-smi`` text output.

Parsing is pure (functions over the text) and tested against recorded outputs of Lab 20's host;
the command runner is the only I/O. Commands used:

- ``npu-smi info -l``: NPU ids and chip counts;
- ``npu-smi info -m``: chip mapping (logic id, physical id where the version prints it, chip name);
- ``npu-smi info -t board -i <id> -c <chip>``: chip name, VDie ID (the chip uuid), PCIe bus;
- ``npu-smi info -t memory -i <id> -c <chip>``: DDR/HBM capacity in MB;
- ``npu-smi info -t device-share``: whether each NPU may be shared (Lab 20's prerequisite check);
- ``npu-smi set -t device-share -i <id> -d 1`` (all chips of that NPU; asks for confirmation: fed ``Y``);
- ``npu-smi info -t health -i <id> -c <chip>``: the chip's health (``Health Status``: OK, Warning,
  Alarm, Critical; ``Error Code``), read by ``health``: Alarm and Critical make the chip unhealthy.

Device nodes ``/dev/davinci<phy>``, ``/dev/davinci_manager``, ``/dev/devmm_svm``, ``/dev/hisi_hdc`` are
added to CDI specs unless a runtime class injects them (config ``driver.injectDeviceNodes``).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dralab.driver.devices import (
    BackendEdits,
    BackendOptions,
    Device,
    DeviceNode,
    Health,
    Mount,
    device_node_paths,
    pcie_root,
)
from dralab.errors import UserError
from dralab.model.quantity import MIB
from dralab.model.vendors import Vendor, load_vendor_table
from dralab.util import get_logger

log = get_logger("dralab.driver.ascend")

Runner = Callable[[Sequence[str], str | None], str]
DRIVER_FILES = ("/usr/local/Ascend/driver/lib64", "/usr/local/Ascend/driver/version.info", "/usr/local/sbin/npu-smi")


class NpuSmiError(RuntimeError):
    """npu-smi failed or printed something this parser does not understand."""


def parse_key_values(text: str) -> list[dict[str, str]]:
    """``Key : Value`` blocks separated by blank lines (``npu-smi info -l`` / ``-t ...``)."""
    blocks: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if current:
                blocks.append(current)
                current = {}
            continue
        key, sep, value = line.partition(":")
        if sep:
            if key.strip() in current:
                blocks.append(current)
                current = {}
            current[key.strip()] = value.strip()
    if current:
        blocks.append(current)
    return blocks


def parse_one(text: str) -> dict[str, str]:
    """All ``Key : Value`` pairs of a single-chip query."""
    out: dict[str, str] = {}
    for block in parse_key_values(text):
        out.update(block)
    return out


def parse_list(text: str) -> list[tuple[int, int]]:
    """``npu-smi info -l`` -> [(npu id, chip count)]."""
    cards = []
    for block in parse_key_values(text):
        if "NPU ID" in block:
            cards.append((int(block["NPU ID"]), int(block.get("Chip Count", "1"))))
    if not cards:
        raise NpuSmiError("npu-smi info -l listed no NPU")
    return cards


def parse_device_share(text: str) -> dict[int, bool]:
    """``npu-smi info -t device-share`` -> {NPU id: enabled}; a status line belongs to the NPU above it."""
    out: dict[int, bool] = {}
    current: int | None = None
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "NPU ID" and value.isdigit():
            current = int(value)
        elif key == "Device-share Status" and current is not None:
            out[current] = value.lower() == "true"
    return out


@dataclass(frozen=True)
class ChipMap:
    npu_id: int
    chip_id: int
    logic_id: int
    phy_id: int
    chip_name: str


def parse_mapping(text: str) -> list[ChipMap]:
    """``npu-smi info -m``: a table whose columns are separated by runs of spaces; MCU rows (logic id -) skipped."""
    rows = [re.split(r"\s{2,}|\t+", line.strip()) for line in text.splitlines() if line.strip()]
    header_at = next((i for i, r in enumerate(rows) if "NPU ID" in r), None)
    if header_at is None:
        raise NpuSmiError("npu-smi info -m: no header line with 'NPU ID'")
    header = rows[header_at]
    col = {name: i for i, name in enumerate(header)}
    phy_col = col.get("Chip Phy-ID", col.get("Chip Logic ID"))
    out = []
    for row in rows[header_at + 1 :]:
        if len(row) < len(header):
            continue
        logic = row[col["Chip Logic ID"]]
        if not logic.isdigit():
            continue
        phy = row[phy_col] if phy_col is not None else logic
        out.append(
            ChipMap(
                npu_id=int(row[col["NPU ID"]]),
                chip_id=int(row[col["Chip ID"]]),
                logic_id=int(logic),
                phy_id=int(phy) if phy.isdigit() else int(logic),
                chip_name=row[col["Chip Name"]],
            )
        )
    return out


def chip_uuid(vdie_id: str) -> str:
    """The VDie ID's five words joined with dashes: the uuid Lab 20's slice shows."""
    words = vdie_id.split()
    if len(words) < 2 or not all(re.fullmatch(r"[0-9A-Fa-f]+", w) for w in words):
        raise NpuSmiError(f"unexpected VDie ID {vdie_id!r}")
    return "-".join(w.upper() for w in words)


def memory_mib(info: dict[str, str]) -> int:
    """Capacity in MiB from ``-t memory`` (HBM on 910 parts, DDR on 310 parts)."""
    for key in ("HBM Capacity(MB)", "DDR Capacity(MB)"):
        if info.get(key, "").isdigit() and int(info[key]) > 0:
            return int(info[key])
    raise NpuSmiError(f"no memory capacity in npu-smi output (keys: {', '.join(info)})")


# npu-smi's health levels: OK and Warning (a minor alarm) leave the chip schedulable; a major or
# critical alarm does not. A level this table does not know says nothing (the chip keeps its state).
HEALTHY_LEVELS = ("ok", "warning")
UNHEALTHY_LEVELS = ("alarm", "critical", "major", "error")


def parse_health(text: str) -> Health | None:
    """``npu-smi info -t health -i <id> -c <chip>`` -> the chip's health; None when the level is unknown."""
    info = parse_one(text)
    level = info.get("Health Status") or info.get("Health") or ""
    if level.lower() in HEALTHY_LEVELS:
        return Health()
    if level.lower() in UNHEALTHY_LEVELS:
        code = info.get("Error Code", "")
        codes = [c for c in re.split(r"[\s,]+", code) if c and c.upper() not in ("NA", "0", "N/A")]
        return Health(healthy=False, reason="-".join(["npu", level.lower(), *codes[:2]]))
    return None


def product_name(chip_name: str) -> str:
    """``Ascend 310P3`` / ``310P3`` -> ``310P3`` (the name the vendor table's chips map to)."""
    return chip_name.removeprefix("Ascend ").strip()


def subprocess_runner(binary: str) -> Runner:
    def run(args: Sequence[str], stdin: str | None = None) -> str:
        try:
            done = subprocess.run([binary, *args], input=stdin, capture_output=True, text=True, timeout=30, check=False)
        except FileNotFoundError:
            raise UserError(f"{binary} not found: install the Ascend driver or pass --npu-smi PATH") from None
        except subprocess.TimeoutExpired:
            raise NpuSmiError(f"{binary} {' '.join(args)} timed out") from None
        if done.returncode != 0:
            raise NpuSmiError(
                f"{binary} {' '.join(args)} exited {done.returncode}: {done.stderr.strip() or done.stdout}"
            )
        return done.stdout

    return run


def recorded_runner(folder: str | Path) -> Runner:
    """Answers from recorded outputs: ``<folder>/<args joined by _>.txt`` (tests, demos)."""

    def run(args: Sequence[str], stdin: str | None = None) -> str:
        path = Path(folder) / ("_".join(args) + ".txt")
        if not path.is_file():
            raise NpuSmiError(f"no recorded output for npu-smi {' '.join(args)} ({path.name})")
        return path.read_text()

    return run


@dataclass
class AscendBackend:
    """NPUs of this host, one device per chip, named ``npu-<card index>-<chip id>``."""

    run: Runner
    vendor: Vendor
    inject_device_nodes: bool = True
    sysfs: str = "/sys"
    enable_share: bool = False
    name: str = "ascend"
    _chips: dict[str, tuple[int, int]] = field(default_factory=dict)  # device name -> (NPU id, chip id)

    @classmethod
    def from_options(cls, options: BackendOptions) -> AscendBackend:
        table = options.table or load_vendor_table()
        return cls(
            run=subprocess_runner(options.npu_smi),
            vendor=table.get("ascend"),
            inject_device_nodes=options.inject_device_nodes,
            sysfs=options.sysfs,
        )

    def discover(self) -> list[Device]:
        """Query npu-smi; raises NpuSmiError when its output cannot be understood."""
        cards = parse_list(self.run(["info", "-l"], None))
        mapping = {(m.npu_id, m.chip_id): m for m in parse_mapping(self.run(["info", "-m"], None))}
        self._check_share([npu_id for npu_id, _ in cards])
        devices = []
        chips_by_name: dict[str, tuple[int, int]] = {}
        for index, (npu_id, _count) in enumerate(sorted(cards)):
            chips = sorted(m for (n, m) in mapping if n == npu_id)
            for chip in chips:
                chip_map = mapping[(npu_id, chip)]
                args = ["-i", str(npu_id), "-c", str(chip)]
                board = parse_one(self.run(["info", "-t", "board", *args], None))
                memory = parse_one(self.run(["info", "-t", "memory", *args], None))
                product = product_name(board.get("Chip Name") or chip_map.chip_name)
                attributes = {}
                root = pcie_root(board.get("PCIe Bus Info", ""), self.sysfs) if board.get("PCIe Bus Info") else None
                if root:
                    attributes["resource.kubernetes.io/pcieRoot"] = root
                name = self.vendor.device.name_pattern.format(index=index, chip_index=chip, physical_id=chip_map.phy_id)
                chips_by_name[name] = (npu_id, chip)
                devices.append(
                    Device(
                        vendor=self.vendor.key,
                        name=name,
                        uuid=chip_uuid(board["VDie ID"]) if "VDie ID" in board else f"npu-{npu_id}-{chip}",
                        product_name=product,
                        model=product,
                        memory_bytes=memory_mib(memory) * MIB,
                        cores=100,
                        physical_id=chip_map.phy_id,
                        index=index,
                        chip_index=chip,
                        attributes=attributes,
                    )
                )
        self._chips = chips_by_name
        return devices

    def _check_share(self, npu_ids: list[int]) -> None:
        """Warn about (or, when asked, enable) NPUs whose device-share is off: they cannot be shared."""
        try:
            status = parse_device_share(self.run(["info", "-t", "device-share"], None))
        except NpuSmiError as exc:
            log.warning("device-share status unknown", extra={"fields": {"error": str(exc)}})
            return
        for npu_id in sorted(npu_ids):
            if status.get(npu_id, False):
                continue
            if self.enable_share:
                self.run(["set", "-t", "device-share", "-i", str(npu_id), "-d", "1"], "Y\n")
                log.info("enabled device-share", extra={"fields": {"npu": npu_id}})
            else:
                log.warning(
                    "device-share is off: several containers cannot use this NPU at once; run "
                    f"`npu-smi set -t device-share -i {npu_id} -d 1` "
                    "and `npu-smi set -t device-share-cfg-recover -d 1` to persist it",
                    extra={"fields": {"npu": npu_id}},
                )

    def enumerate(self) -> list[Device]:
        """Discover again on every call, so the publisher's resync sees hardware changes."""
        try:
            return self.discover()
        except NpuSmiError as exc:
            raise UserError(f"Ascend discovery through npu-smi failed: {exc}") from None

    def health(self) -> dict[str, Health]:
        """Each chip's ``npu-smi info -t health``; a chip whose query fails or prints no known level is left out."""
        if not self._chips:
            self.enumerate()
        out: dict[str, Health] = {}
        for name, (npu_id, chip) in sorted(self._chips.items()):
            try:
                report = parse_health(self.run(["info", "-t", "health", "-i", str(npu_id), "-c", str(chip)], None))
            except (NpuSmiError, UserError) as exc:
                log.warning("npu-smi health query failed", extra={"fields": {"device": name, "error": str(exc)}})
                continue
            if report is not None:
                out[name] = report
        return out

    def edits(self, devices: Sequence[Device]) -> BackendEdits:
        if not self.inject_device_nodes:
            return BackendEdits()
        nodes: dict[str, DeviceNode] = {}
        for dev in devices:
            for path in device_node_paths(self.vendor.device.device_nodes, dev):
                if Path(path).exists():
                    nodes.setdefault(path, DeviceNode(path=path, host_path=path))
        return BackendEdits(device_nodes=tuple(nodes.values()))

    def common_edits(self) -> BackendEdits:
        """Driver files the Ascend runtime expects, read-only, where this host has them."""
        mounts = tuple(Mount(p, p, read_only=True) for p in DRIVER_FILES if Path(p).exists())
        return BackendEdits(mounts=mounts)
