"""The driver's checkpoint: which claims it prepared, crash-safe and self-checking.

A checkpoint is JSON with a sha256 checksum over its canonical content, the boot id it was written
under and a sequence number. It lives in two slot files, ``checkpoint.json`` and
``checkpoint.1.json``, written in turn: write n goes to slot n % 2, overwriting in place the older
of the two, then one ``fdatasync`` makes it durable. The slot keeps its size (trailing spaces pad
it), so the flush carries data only, about a third of the cost of the temp file, fsync, rename and
folder fsync that a single file needs; a slot is created (or grown) by that atomic path once.
Loading takes the valid slot with the higher sequence. A slot that fails to parse or to verify
(a nesting too deep for the parser included) is never fatal:

- one damaged slot is what a crash during its write leaves (or a damaged disk): the other slot is
  used, and every claim whose CDI spec is complete is added back, so no answered claim is lost;
- both damaged: they are moved aside (``checkpoint.json.corrupt-<time>``) and the state is rebuilt
  from the claim CDI specs on disk, whose annotations name the claim and its prepared devices.

Group commit (``GroupCommit``): concurrent kubelet calls share one durable write.

- A call changes the in-memory checkpoint under the driver's lock, after the claim's files exist,
  and takes a ticket (``stage``): the number of that change. It then releases the lock and waits
  (``wait``) until a write that contains its change is durable; only then does it answer.
- One waiter at a time is the writer. It reads the newest ticket T, then copies the checkpoint
  under the driver's lock. Every change numbered T or lower was made before its ticket was taken,
  so the copy contains it (and maybe later ones: they are durable too, just not yet counted). The
  writer writes the copy into the older slot and flushes it, marks everything up to T durable and
  wakes all waiters. Waiters whose tickets are above T (their changes arrived during the write) elect the
  next writer, so a burst of N calls costs about two writes instead of N, and the driver's lock
  is never held across an fsync.

Why a crash at any point is safe (the invariant: an answer that says "prepared" implies a durable
checkpoint entry, and a durable entry implies the claim's files were complete when it was copied):

- Before its write is durable a call has not answered. A crash leaves files without a durable
  entry; ``DriverState.open`` removes them, and the kubelet, which got no answer, calls again.
- A write only ever overwrites the older slot, so a crash during it leaves the newer one intact;
  the checksum marks the torn slot, and the claims the CDI specs record are added back to the
  newer one. The torn write's own claims may survive that way: their call never answered, so
  they are extra entries, which a repeated Prepare answers and reconcile releases.
- A failed write leaves its slot unknown: the next write to it recreates the whole file by the
  atomic path, so no leftover of the failed write can make a later checkpoint unreadable.
- A failed write fails every call whose ticket it covered; each removes its new claims from
  memory and from disk. A later copy may already hold such an entry and become durable: that is
  a checkpoint entry whose CDI spec is gone, the state a reboot leaves behind, which a repeated
  Prepare rewrites and a missing claim's reconcile releases. It never answers "prepared" wrongly.
- Unprepare removes the files, then the entry, then waits the same way: a crash in between leaves
  an entry without files, again the post-reboot state, which the kubelet's retried Unprepare clears.

Format versions, upgrade and rollback. A ``helm upgrade`` of the driver DaemonSet makes the new
release read the old one's checkpoint, and a rollback makes the old release read the new one's;
neither may lose a prepared claim. Two numbers say what a file needs:

- ``format``: the format the file was written in (``FORMAT`` here). A file without it is format 1.
- ``version``: the oldest reader format that reads the file right by ignoring what it does not know
  (SQLite's read version). Format 1 readers (releases up to commit f6cffda) accept ``version == 1``, and ignore
  unknown keys, top-level and in claim entries; their checksum covers every key but ``checksum``.

Format 1 had ``version: 1`` and nothing naming its writer. Format 2 adds ``format`` and ``writer``
(the dralab release that wrote the file): without them a release cannot tell a newer format from
an older one, nor name, when it cannot read a file, the release to roll forward to. Both are fields
format 1 readers ignore, so format 2 files say ``version: 1`` (``READABLE_SINCE``) and the release
before this one reads them unchanged. Writing ``version: 2`` would have made that rollback treat
both slots as corrupt and rebuild from the CDI specs, losing every claim whose spec a reboot
removed (``/var/run/cdi`` is a tmpfs). The rule for later formats: a write says the lowest
``version`` able to represent its content, so only files that use a feature older readers would
misread (say, a claim folder an older Unprepare would not unmount) stop a rollback.

Every format keeps the envelope with its meaning: ``checksum`` (sha256 over the canonical JSON of
all other top-level keys, so any release tells a torn file from a newer one), ``version``,
``format``, ``writer``, ``driver`` and ``sequence``. A reader of format R with a file of version V
and format F:

- F < R: the checksum is verified over the file as written, then ``MIGRATIONS[F]``, ``[F+1]``, ...
  (pure functions over the parsed document) bring it to format R. The next write is format R.
- F > R >= V: a newer release wrote it and declared it readable here: read ignoring unknown fields,
  with a warning; the next write is format R and drops them. So a format may declare ``version``
  below its own only when a rewrite by that older format loses nothing the newer release needs
  (its migration from the older format fills the defaults back in).
- V > R: ``IncompatibleCheckpoint``, which is not corruption. The slot is moved aside
  (``checkpoint.json.newer-format<F>-<time>``, counted with the quarantined), never overwritten
  or deleted, and the state is what a torn slot leaves: the other slot if it reads, plus every
  claim whose CDI spec is complete, else the CDI specs alone. One error line names both formats,
  both releases and the fix: roll forward to the writer's release (the file stays for
  inspection). Refusing to start would be worse: a driver that does not run answers no Prepare
  and no Unprepare, so no pod on the node could start or terminate, whereas the CDI specs record
  every answered claim.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from dralab import __version__
from dralab.driver.cdi import ClaimRef, PreparedDevice, claim_uid_from_file_name, load_spec, parse_claim_spec
from dralab.util import atomic_write, get_logger

log = get_logger("dralab.driver.checkpoint")

FORMAT = 2  # the format this release writes, and the newest it migrates to
READABLE_SINCE = 1  # the ``version`` its files say: format 2 only adds fields format 1 readers ignore
WRITER = f"dralab {__version__}"  # the ``writer`` its files say
SLOT_BYTES = 16384  # the smallest slot file: a few dozen claims before it first grows
PREPARE_STARTED = "PrepareStarted"
PREPARE_COMPLETED = "PrepareCompleted"
BOOT_ID_FILE = "/proc/sys/kernel/random/boot_id"


class CorruptCheckpoint(ValueError):
    """The checkpoint cannot be trusted (syntax, checksum or schema)."""


class IncompatibleCheckpoint(ValueError):
    """An intact checkpoint that a newer release wrote for readers newer than this one (not corrupt)."""

    def __init__(self, version: int, format: int, writer: str) -> None:
        self.version = version
        self.format = format
        self.writer = writer
        super().__init__(
            f"written in format {format} by {writer or 'an unknown release'} for readers of format {version} or"
            f" newer; {WRITER} reads formats up to {FORMAT}: roll forward to {writer or 'that release'} or newer"
        )


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
    sequence: int = 0  # which write this is: of two slots the higher is the newer
    # what the file said (set by ``decode``); ``encode`` always writes this release's FORMAT and WRITER
    format: int = FORMAT
    writer: str = ""  # "" when unknown: format 1 records no writer


def _digest(body: dict[str, Any]) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    return "sha256:" + hashlib.sha256(canonical).hexdigest()


def migrate_1_to_2(doc: dict[str, Any]) -> dict[str, Any]:
    """Format 1 to 2 (pure): name the format; the writer is unknown, since format 1 records none."""
    return {**doc, "format": 2, "writer": ""}


# format F -> the pure function that turns a verified format F document into format F + 1
MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: migrate_1_to_2}
assert set(MIGRATIONS) == set(range(1, FORMAT)), "every older format needs its migration"


def migrate(doc: dict[str, Any]) -> dict[str, Any]:
    """Bring a verified document of an older format to ``FORMAT`` (pure); newer formats are returned as they are."""
    fmt = doc.get("format", 1)
    while fmt < FORMAT:
        doc = MIGRATIONS[fmt](doc)
        fmt = doc["format"]
    return doc


def _level(raw: dict[str, Any], key: str, default: Any) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise CorruptCheckpoint(f"bad {key} {value!r}")
    return value


def encode(cp: Checkpoint) -> bytes:
    """Serialize with a checksum over everything else (pure), in this release's format."""
    body = {
        "version": READABLE_SINCE,
        "format": FORMAT,
        "writer": WRITER,
        "driver": cp.driver,
        "bootID": cp.boot_id,
        "sequence": cp.sequence,
        "claims": {uid: entry.to_dict() for uid, entry in sorted(cp.claims.items())},
    }
    # no indentation: the C encoder (indented JSON goes through the pure-Python one)
    return (json.dumps({**body, "checksum": _digest(body)}, sort_keys=True) + "\n").encode()


def decode(data: bytes, driver: str) -> Checkpoint:
    """Parse, verify and migrate (pure); raises CorruptCheckpoint with the reason, or IncompatibleCheckpoint.

    The checksum is checked over the document as written, before any migration: a migration changes
    the document, and what the disk holds is what must be intact.
    """
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
    version = _level(raw, "version", None)
    fmt = _level(raw, "format", 1)
    if fmt < version:
        raise CorruptCheckpoint(f"format {fmt} cannot need a reader of format {version}")
    writer = raw.get("writer") or ""
    if not isinstance(writer, str):
        raise CorruptCheckpoint(f"bad writer {writer!r}")
    if raw.get("driver") != driver:
        raise CorruptCheckpoint(f"written by driver {raw.get('driver')!r}, not {driver!r}")
    if version > FORMAT:
        raise IncompatibleCheckpoint(version, fmt, writer)
    doc = migrate(raw)
    try:
        claims = {uid: ClaimEntry.from_dict(entry) for uid, entry in (doc.get("claims") or {}).items()}
    except (KeyError, ValueError, TypeError, AttributeError) as exc:
        raise CorruptCheckpoint(f"bad claim entry ({exc})") from None
    sequence = doc.get("sequence", 0)
    if not isinstance(sequence, int) or sequence < 0:
        raise CorruptCheckpoint(f"bad sequence {sequence!r}")
    return Checkpoint(
        driver=driver,
        boot_id=str(doc.get("bootID") or ""),
        claims=claims,
        sequence=sequence,
        format=fmt,
        writer=writer,
    )


def slot_files(path: Path) -> tuple[Path, Path]:
    """The two slot files of the checkpoint at ``path``: ``checkpoint.json`` and ``checkpoint.1.json``."""
    path = Path(path)
    return path, path.with_name(f"{path.stem}.1{path.suffix}")


def newest_document(path: Path) -> dict[str, Any] | None:
    """The newest intact checkpoint among ``path``'s slots as plain JSON, for readers outside the driver.

    Read-only (no quarantine, no rebuild): tools and tests that inspect a node's driver state use
    this instead of reading ``checkpoint.json``, which may be the older slot.
    """
    docs = []
    for slot in slot_files(path):
        try:
            raw = json.loads(slot.read_bytes())
        except (OSError, ValueError, RecursionError):
            continue
        if not isinstance(raw, dict):
            continue
        body = {k: v for k, v in raw.items() if k != "checksum"}
        with contextlib.suppress(RecursionError):
            if raw.get("checksum") == _digest(body):
                docs.append(raw)
    return max(docs, key=lambda d: d.get("sequence", 0) if isinstance(d.get("sequence"), int) else 0, default=None)


# A file to read the boot id from instead of the kernel's: the local cluster's simulated node reboot
# (`dralab cluster reboot NODE`) writes a new id there, as a real reboot gives the kernel a new one.
BOOT_ID_ENV = "DRALAB_BOOT_ID_FILE"


def read_boot_id(path: str | None = None) -> str:
    """This boot's id: ``path``, else $DRALAB_BOOT_ID_FILE if it exists, else the kernel's (empty without one)."""
    for candidate in [path] if path else [os.environ.get(BOOT_ID_ENV), BOOT_ID_FILE]:
        if not candidate:
            continue
        try:
            return Path(candidate).read_text().strip()
        except OSError:
            continue
    return ""


class CheckpointStore:
    """The checkpoint files of one driver (two slots written in turn), with quarantine and rebuild."""

    def __init__(self, path: Path, driver: str, cdi_dir: Path, cdi_class: str, boot_id: str | None = None) -> None:
        self.path = Path(path)
        self.driver = driver
        self.cdi_dir = Path(cdi_dir)
        self.cdi_class = cdi_class
        self.boot_id = read_boot_id() if boot_id is None else boot_id
        self.quarantined: list[Path] = []  # slot files moved aside: corrupt, or a newer release's (keep_aside)
        self.sequence = 0  # of the newest durable write
        self._room: dict[int, tuple[int, int]] = {}  # slot -> (file size, bytes of it the last write used)

    def files(self) -> tuple[Path, Path]:
        """The two slot files: ``checkpoint.json`` and ``checkpoint.1.json``."""
        return slot_files(self.path)

    def _read(self, slot: int) -> Checkpoint | CorruptCheckpoint | IncompatibleCheckpoint | None:
        """One slot: its checkpoint, why it cannot be used, or None when the file does not exist."""
        try:
            data = self.files()[slot].read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            return CorruptCheckpoint(f"unreadable ({exc})")
        try:
            cp = decode(data, self.driver)
        except (CorruptCheckpoint, IncompatibleCheckpoint) as exc:
            return exc
        self._room[slot] = (len(data), len(data.rstrip()))
        return cp

    def load(self) -> Checkpoint:
        """The newest trustworthy checkpoint; see the module docstring for missing, damaged and newer slots."""
        self._room.clear()
        slots = [self._read(0), self._read(1)]
        good = [cp for cp in slots if isinstance(cp, Checkpoint)]
        bad = [(i, exc) for i, exc in enumerate(slots) if isinstance(exc, CorruptCheckpoint)]
        newer = [(i, exc) for i, exc in enumerate(slots) if isinstance(exc, IncompatibleCheckpoint)]
        kept = [self.keep_aside(i, exc) for i, exc in newer]  # before any save can overwrite one
        if not good and not bad and not newer:
            cp = self.rebuild()  # first start: empty; a deleted checkpoint: what the specs say
            if cp.claims:
                log.warning(
                    "checkpoint missing: rebuilt from CDI specs", extra={"fields": {"claims": sorted(cp.claims)}}
                )
                self.save(cp)
            return cp
        if not good:
            moved = [self.quarantine(i) for i, _ in bad]
            cp = self.rebuild()
            if bad:
                log.error(
                    "checkpoint corrupt: quarantined and rebuilt from CDI specs",
                    extra={
                        "fields": {
                            "reason": "; ".join(str(exc) for _, exc in bad),
                            "quarantined": [str(m) for m in moved],
                            "claims": sorted(cp.claims),
                        }
                    },
                )
            self._report_newer(newer, kept, cp, "state rebuilt from the CDI specs")
            self.save(cp)
            return cp
        cp = max(good, key=lambda c: c.sequence)
        self.sequence = cp.sequence
        if bad or newer:
            # a torn write (the call never answered), a damaged disk or a newer release's slot: the
            # claims whose specs are complete are kept as well, so a claim that was answered is never swept
            rebuilt = self.rebuild()
            added = sorted(set(rebuilt.claims) - set(cp.claims))
            cp.claims.update({uid: rebuilt.claims[uid] for uid in added})
            if bad:
                log.warning(
                    "one checkpoint slot damaged: using the other, plus the claims the CDI specs record",
                    extra={"fields": {"reason": str(bad[0][1]), "sequence": cp.sequence, "added": added}},
                )
            self._report_newer(newer, kept, cp, "using the other slot, plus the claims the CDI specs record")
            self.save(cp)
        elif cp.boot_id != self.boot_id:
            log.info(
                "checkpoint from an earlier boot: prepared claims are kept, missing CDI specs are rewritten on Prepare",
                extra={"fields": {"checkpointBoot": cp.boot_id, "boot": self.boot_id, "claims": len(cp.claims)}},
            )
            self.save(cp)
        self._report_format(cp)
        return cp

    def _report_newer(
        self, newer: list[tuple[int, IncompatibleCheckpoint]], kept: list[Path], cp: Checkpoint, how: str
    ) -> None:
        """The loud line of a rollback past a format this release cannot read (see the module docstring)."""
        if not newer:
            return
        exc = newer[0][1]
        log.error(
            f"checkpoint written by a newer dralab that this one cannot read: kept aside, {how};"
            f" roll forward to {exc.writer or 'the release that wrote it'} or newer",
            extra={
                "fields": {
                    "reason": "; ".join(str(e) for _, e in newer),
                    "fileFormat": exc.format,
                    "fileVersion": exc.version,
                    "writer": exc.writer,
                    "readerFormat": FORMAT,
                    "reader": WRITER,
                    "keptAside": [str(k) for k in kept],
                    "claims": sorted(cp.claims),
                }
            },
        )

    def _report_format(self, cp: Checkpoint) -> None:
        """Say when the newest slot was migrated up, or read from a newer format declared readable here."""
        fields = {"fileFormat": cp.format, "writer": cp.writer, "readerFormat": FORMAT, "reader": WRITER}
        if cp.format < FORMAT:
            log.info(f"checkpoint format {cp.format} read and migrated to {FORMAT}", extra={"fields": fields})
        elif cp.format > FORMAT:
            log.warning(
                f"checkpoint written in the newer format {cp.format} by {cp.writer or 'an unknown release'}, which"
                f" declares it readable by format {FORMAT}: read ignoring the fields this release does not know;"
                f" the next write is format {FORMAT} and drops them, roll forward to keep them",
                extra={"fields": fields},
            )

    def save(self, cp: Checkpoint) -> None:
        """Write ``cp`` durably into the slot not holding the newest checkpoint (one ``fdatasync``).

        The slot is overwritten in place and keeps its size (JSON allows the trailing spaces that pad
        it), so the flush carries data only: no rename, no folder fsync, no journal commit. A slot
        that does not exist yet or is too small is created by the atomic path, with room to grow.
        """
        cp.boot_id = self.boot_id
        cp.sequence = self.sequence + 1
        data = encode(cp)
        slot = cp.sequence % 2
        path = self.files()[slot]
        size, used = self._room.pop(slot, (0, 0))  # unknown content after a failure: recreated next time
        if len(data) > size:
            size = max(SLOT_BYTES, 1 << (2 * len(data) - 1).bit_length())
            atomic_write(path, data + b" " * (size - len(data)), mode=0o600)
        else:
            fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW)
            try:
                os.pwrite(fd, data + b" " * max(0, used - len(data)), 0)  # blank the older, longer text
                os.fdatasync(fd)
            finally:
                os.close(fd)
        self._room[slot] = (size, len(data))
        self.sequence = cp.sequence

    def quarantine(self, slot: int = 0) -> Path:
        """Move a slot file aside so it can be inspected; never deleted."""
        path = self.files()[slot]
        target = path.with_name(f"{path.name}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}-{time.time_ns()}")
        with contextlib.suppress(FileNotFoundError):
            path.replace(target)
        self._room.pop(slot, None)
        self.quarantined.append(target)
        return target

    def keep_aside(self, slot: int, exc: IncompatibleCheckpoint) -> Path:
        """Move a newer release's slot aside (``.newer-format<F>-<time>``) so no write of this one overwrites it."""
        path = self.files()[slot]
        stamp = f"{time.strftime('%Y%m%dT%H%M%S')}-{time.time_ns()}"
        target = path.with_name(f"{path.name}.newer-format{exc.format}-{stamp}")
        with contextlib.suppress(FileNotFoundError):
            path.replace(target)
        self._room.pop(slot, None)
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


class GroupCommit:
    """Makes checkpoint changes durable, one write for every change staged while the previous write ran.

    ``snapshot`` returns a copy of the current checkpoint taken under the owner's lock; ``stage`` is
    called under that same lock right after a change. The protocol and why it is crash-safe are in
    the module docstring.
    """

    def __init__(
        self,
        store: CheckpointStore,
        snapshot: Callable[[], Checkpoint],
        observe: Callable[[int], None] | None = None,
    ) -> None:
        self.store = store
        self.snapshot = snapshot
        self.observe = observe  # called with the number of changes each durable write carried
        self._cond = threading.Condition()
        self._staged = 0
        self._durable = 0
        self._writing = False
        self._failed: tuple[int, int, OSError] | None = None  # tickets (low, high] of the last failed write
        self.writes = 0  # durable writes made (a benchmark and test figure)
        self.last_batch = 0  # changes the last write made durable
        self.write_seconds: deque[float] = deque(maxlen=4096)  # recent durable writes, snapshot to flush

    @property
    def staged(self) -> int:
        """The newest ticket handed out (waiting for it waits for every change made so far)."""
        with self._cond:
            return self._staged

    def stage(self) -> int:
        """Number the change just made (call under the owner's lock); pass the ticket to ``wait``."""
        with self._cond:
            self._staged += 1
            return self._staged

    def wait(self, ticket: int) -> None:
        """Return once a checkpoint containing change ``ticket`` is durable; OSError when its write failed."""
        while True:
            with self._cond:
                while True:
                    if self._durable >= ticket:
                        return
                    failed = self._failed
                    if failed is not None and failed[0] < ticket <= failed[1]:
                        raise failed[2]
                    if not self._writing:
                        self._writing = True
                        low, high = self._durable, self._staged
                        break
                    self._cond.wait()
            self._write(low, high)

    def _write(self, low: int, high: int) -> None:
        """One durable write as the elected writer; wakes every waiter whatever the outcome."""
        error: OSError | None = None
        start = time.perf_counter()
        try:
            self.store.save(self.snapshot())
        except OSError as exc:
            error = exc
        took = time.perf_counter() - start
        with self._cond:
            self._writing = False
            if error is None:
                self._durable = max(self._durable, high)
                self.writes += 1
                self.last_batch = high - low
                self.write_seconds.append(took)
                if self.observe is not None:
                    self.observe(high - low)
            else:
                self._failed = (low, high, error)
            self._cond.notify_all()
