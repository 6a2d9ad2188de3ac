"""The driver's checkpoint: which claims it prepared, crash-safe and self-checking.

The file is JSON with a sha256 checksum over its canonical content and the boot id it was written
under. Writes are atomic (temp file, fsync, rename). A file that fails to parse or to verify is never
fatal: it is moved aside (``checkpoint.json.corrupt-<time>``) and the state is rebuilt from the
claim CDI specs on disk, whose annotations name the claim and its prepared devices.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from dralab.driver.cdi import ClaimRef, PreparedDevice, claim_uid_from_file_name, load_spec, parse_claim_spec
from dralab.util import atomic_write, get_logger

log = get_logger("dralab.driver.checkpoint")

VERSION = 1
PREPARE_STARTED = "PrepareStarted"
PREPARE_COMPLETED = "PrepareCompleted"
BOOT_ID_FILE = "/proc/sys/kernel/random/boot_id"


class CorruptCheckpoint(ValueError):
    """The checkpoint cannot be trusted (syntax, checksum or schema)."""


@dataclass(frozen=True)
class ClaimEntry:
    """One prepared (or half-prepared) claim."""

    claim: ClaimRef
    state: str
    devices: tuple[PreparedDevice, ...] = ()
    cdi_spec: str | None = None
    claim_dir: str | None = None
    boot_id: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.claim.namespace,
            "name": self.claim.name,
            "uid": self.claim.uid,
            "state": self.state,
            "devices": [d.to_dict() for d in self.devices],
            "cdiSpec": self.cdi_spec,
            "claimDir": self.claim_dir,
            "bootID": self.boot_id,
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> ClaimEntry:
        state = raw["state"]
        if state not in (PREPARE_STARTED, PREPARE_COMPLETED):
            raise ValueError(f"unknown claim state {state!r}")
        return cls(
            claim=ClaimRef(namespace=str(raw["namespace"]), name=str(raw["name"]), uid=str(raw["uid"])),
            state=state,
            devices=tuple(PreparedDevice.from_dict(d) for d in raw.get("devices") or ()),
            cdi_spec=raw.get("cdiSpec"),
            claim_dir=raw.get("claimDir"),
            boot_id=str(raw.get("bootID") or ""),
        )


@dataclass
class Checkpoint:
    """All claims of one driver, keyed by claim UID."""

    driver: str
    boot_id: str = ""
    claims: dict[str, ClaimEntry] = field(default_factory=dict)


def _digest(body: dict[str, Any]) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    return "sha256:" + hashlib.sha256(canonical).hexdigest()


def encode(cp: Checkpoint) -> bytes:
    """Serialize with a checksum over everything else (pure)."""
    body = {
        "version": VERSION,
        "driver": cp.driver,
        "bootID": cp.boot_id,
        "claims": {uid: entry.to_dict() for uid, entry in sorted(cp.claims.items())},
    }
    return (json.dumps({**body, "checksum": _digest(body)}, indent=1, sort_keys=True) + "\n").encode()


def decode(data: bytes, driver: str) -> Checkpoint:
    """Parse and verify (pure); raises CorruptCheckpoint with the reason."""
    try:
        raw = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CorruptCheckpoint(f"not valid JSON ({exc})") from None
    except RecursionError:
        # nesting deeper than the parser's stack: no checkpoint dralab writes is more than 4 levels deep
        raise CorruptCheckpoint("nested too deeply to be a checkpoint") from None
    if not isinstance(raw, dict):
        raise CorruptCheckpoint("not a JSON object")
    checksum = raw.pop("checksum", None)
    try:
        expected = _digest(raw)
    except RecursionError:
        raise CorruptCheckpoint("nested too deeply to be a checkpoint") from None
    if checksum != expected:
        raise CorruptCheckpoint("checksum mismatch")
    if raw.get("version") != VERSION:
        raise CorruptCheckpoint(f"unsupported version {raw.get('version')!r}")
    if raw.get("driver") != driver:
        raise CorruptCheckpoint(f"written by driver {raw.get('driver')!r}, not {driver!r}")
    try:
        claims = {uid: ClaimEntry.from_dict(entry) for uid, entry in (raw.get("claims") or {}).items()}
    except (KeyError, ValueError, TypeError, AttributeError) as exc:
        raise CorruptCheckpoint(f"bad claim entry ({exc})") from None
    return Checkpoint(driver=driver, boot_id=str(raw.get("bootID") or ""), claims=claims)


def read_boot_id(path: str = BOOT_ID_FILE) -> str:
    """This boot's id (empty where the kernel does not provide one)."""
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


class CheckpointStore:
    """The checkpoint file of one driver, with quarantine and rebuild."""

    def __init__(self, path: Path, driver: str, cdi_dir: Path, cdi_class: str, boot_id: str | None = None) -> None:
        self.path = Path(path)
        self.driver = driver
        self.cdi_dir = Path(cdi_dir)
        self.cdi_class = cdi_class
        self.boot_id = read_boot_id() if boot_id is None else boot_id
        self.quarantined: list[Path] = []

    def load(self) -> Checkpoint:
        """The checkpoint; a missing or corrupt one is rebuilt from the CDI specs (a corrupt one quarantined first)."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            cp = self.rebuild()  # first start: empty; a deleted checkpoint: what the specs say
            if cp.claims:
                log.warning(
                    "checkpoint missing: rebuilt from CDI specs", extra={"fields": {"claims": sorted(cp.claims)}}
                )
                self.save(cp)
            return cp
        try:
            cp = decode(data, self.driver)
        except CorruptCheckpoint as exc:
            moved = self.quarantine()
            cp = self.rebuild()
            log.error(
                "checkpoint corrupt: quarantined and rebuilt from CDI specs",
                extra={"fields": {"reason": str(exc), "quarantined": str(moved), "claims": sorted(cp.claims)}},
            )
            self.save(cp)
            return cp
        if cp.boot_id != self.boot_id:
            log.info(
                "checkpoint from an earlier boot: prepared claims are kept, missing CDI specs are rewritten on Prepare",
                extra={"fields": {"checkpointBoot": cp.boot_id, "boot": self.boot_id, "claims": len(cp.claims)}},
            )
            self.save(cp)
        return cp

    def save(self, cp: Checkpoint) -> None:
        cp.boot_id = self.boot_id
        atomic_write(self.path, encode(cp), mode=0o600)

    def quarantine(self) -> Path:
        """Move the current file aside so it can be inspected; never deleted."""
        target = self.path.with_name(f"{self.path.name}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}-{time.time_ns()}")
        with contextlib.suppress(FileNotFoundError):
            self.path.replace(target)
        self.quarantined.append(target)
        return target

    def rebuild(self) -> Checkpoint:
        """Prepared claims as the CDI specs on disk record them (specs that do not parse are skipped)."""
        cp = Checkpoint(driver=self.driver, boot_id=self.boot_id)
        if not self.cdi_dir.is_dir():
            return cp
        for path in sorted(self.cdi_dir.iterdir()):
            uid = claim_uid_from_file_name(path.name, self.driver, self.cdi_class)
            if uid is None:
                continue
            try:
                parsed = parse_claim_spec(load_spec(path.read_text()))
            except (OSError, yaml.YAMLError, RecursionError):
                parsed = None
            if parsed is None or parsed.claim.uid != uid:
                log.warning("CDI spec not readable during rebuild", extra={"fields": {"file": str(path)}})
                continue
            cp.claims[uid] = ClaimEntry(
                claim=parsed.claim,
                state=PREPARE_COMPLETED,
                devices=parsed.devices,
                cdi_spec=path.name,
                claim_dir=parsed.claim_dir,
                boot_id=self.boot_id,
            )
        return cp
