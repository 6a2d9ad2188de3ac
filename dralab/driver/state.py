"""Driver state: owns the checkpoint and every prepare/unprepare transition of one driver name.

Prepare: read the claim (from the node's claim cache when it holds the claim's uid, else a GET),
check uid and allocation, take this driver's results, build the container
edits (enforcement env from the vendor's profile, library + ld.so.preload + per-claim and shared
directories, the backend's device nodes), write one CDI spec per claim atomically, then record the
call's claims in the checkpoint with one durable write. Files a crash leaves without a checkpoint
entry are removed at the next start (the kubelet, which got no answer, prepares again). A completed
claim is answered from the checkpoint (no API call), rewriting its CDI spec if a reboot emptied the
CDI directory. Unprepare uses the checkpoint only and always succeeds for unknown claims. One lock
serializes all transitions of a driver.

Enforcement fails closed (``library``): a claim whose vendor profile enforces is refused, before
any file is written, while the enforcement library is missing, unreadable or not loadable on this
node; only the operator's ``enforcement: none`` prepares it without the library.

Host paths (the threat model: tenants of other claims, and other users of the host): the state
root and ``claims/`` are 0700, so a claim's files are reachable only through the mounts its own CDI
spec gives its containers. A claim's directory is 0770 (owner and the claim group, ``claim_gid``:
non-root containers join that group to write their accounting file). Claims share only what their
profile's layout declares, one file per device, mounted as that file into the claims allocated that
device (0660, same group); nothing is world-writable, and no claim can create files in a folder
another claim sees.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from dralab.driver import cdi, limits
from dralab.driver import library as libcheck
from dralab.driver.cdi import ClaimRef, ContainerEdits, PreparedDevice
from dralab.driver.checkpoint import PREPARE_COMPLETED, Checkpoint, CheckpointStore, ClaimEntry, GroupCommit
from dralab.driver.claims import ClaimCache, ClaimSource
from dralab.driver.devices import Backend, Device, Mount
from dralab.driver.dirstamp import UnchangedSince
from dralab.driver.library import LibraryStatus
from dralab.driver.metrics import DriverMetrics
from dralab.driver.status import StatusUpdate, device_entries
from dralab.errors import UserError
from dralab.kube import KubeError
from dralab.model import enforcement
from dralab.model.enforcement import DeviceShare
from dralab.model.quantity import to_int
from dralab.model.vendors import Vendor
from dralab.util import atomic_write, get_logger

log = get_logger("dralab.driver.state")

SPARE_DIRS = 16  # empty claim directories kept ready (one batch of the kubelet's largest usual call)
PRIVATE_DIR = 0o700  # the state root, claims/, shared/, .spare/: only the driver enters
CLAIM_DIR = 0o770  # a claim's own directory: the driver and the claim group
SHARED_FILE = 0o660  # a device's shared file: the driver and the claim group


class ClaimError(Exception):
    """Preparing one claim failed; the message goes back to the kubelet for that claim only."""

    def __init__(self, message: str, reason: str = "invalid") -> None:
        super().__init__(message)
        self.reason = reason


# What reading a ResourceClaim of the wrong shape raises (a field of the wrong JSON type or missing):
# the apiserver never sends one, but a broken claim source must fail that claim alone, not the call.
MALFORMED = (AttributeError, TypeError, KeyError, ValueError)


def malformed(ref: ClaimRef, exc: Exception) -> ClaimError:
    """The one claim's error for a ResourceClaim document that could not be read."""
    return ClaimError(
        f"ResourceClaim {ref.namespace}/{ref.name} is malformed ({type(exc).__name__}: {exc})", "malformed"
    )


# A Kubernetes object UID (a UUID in practice): it names a claim's CDI spec file and folder, so
# anything else (path separators, dots, NUL, the common spec's name) is refused before any path is built.
MAX_UID_LENGTH = 128
_UID = re.compile(r"[A-Za-z0-9-]+")


def claim_uid_problem(uid: str) -> str:
    """Why ``uid`` cannot be a claim UID ('' when it can); the text is one claim's error for the kubelet."""
    if not uid:
        return "claim uid is empty: expected the ResourceClaim's metadata.uid"
    if len(uid) > MAX_UID_LENGTH:
        return f"claim uid is {len(uid)} characters long, over the limit of {MAX_UID_LENGTH}"
    if not _UID.fullmatch(uid):
        return f"claim uid {uid[:64]!r} is not a Kubernetes UID: only letters, digits and '-' are allowed"
    if uid == cdi.COMMON:
        return f"claim uid {uid!r} is reserved for the driver's common CDI spec"
    return ""


def _child(folder: Path, name: str) -> Path:
    """``folder / name`` when that is a direct child of ``folder``; ClaimError for anything else."""
    path = folder / name
    if not name or name in (".", "..") or "\x00" in name or path.parent != folder:
        raise ClaimError(f"refusing claim path {name!r}: it is not a single name inside {folder}")
    return path


def default_library() -> Path:
    """dralab's own enforcement library (vcore), wherever dralab.vcore says it is."""
    try:
        from dralab.vcore import library_path

        return Path(library_path())
    except ImportError:
        return Path(__file__).resolve().parents[2] / "vcore" / "build" / "libvcore.so"


def read_library_head(path: Path) -> bytes:
    """The first bytes of the enforcement library (all the check needs); OSError when it cannot be read."""
    with open(path, "rb") as f:
        return f.read(libcheck.HEAD_BYTES)


@dataclass(frozen=True)
class PrepareResult:
    """The answer for one claim: devices, or an error."""

    devices: tuple[PreparedDevice, ...] = ()
    error: str = ""


def shares_of(results: Sequence[dict[str, Any]], devices: dict[str, Device]) -> list[DeviceShare]:
    """Enforcement shares from allocation results (consumedCapacity as ``8Gi`` / ``50``), in result order.

    Consumed cores become a percent of the device's published ``cores`` (100 for percent-counted
    devices, the compute units of the card for Hygon), rounded up.
    """
    shares = []
    for res in results:
        dev = devices[res["device"]]
        consumed = res.get("consumedCapacity") or {}
        try:
            memory = to_int(consumed["memory"], "consumedCapacity.memory") if "memory" in consumed else None
            cores = to_int(consumed["cores"], "consumedCapacity.cores") if "cores" in consumed else None
        except UserError as exc:
            raise ClaimError(str(exc)) from None
        if cores is not None and dev.cores and dev.cores != 100:
            # capacity counted in compute units (Hygon): the enforcement env speaks percent of the device
            cores = -(-cores * 100 // dev.cores)
        shares.append(
            DeviceShare(
                index=dev.index,
                physical_id=dev.physical_id,
                total_memory_bytes=dev.memory_bytes,
                memory_bytes=memory,
                cores=cores,
            )
        )
    return shares


class DriverState:
    """Prepared claims of one driver name on one node."""

    def __init__(
        self,
        vendor: Vendor,
        node: str,
        backend: Backend,
        claims: ClaimSource,
        cdi_dir: Path,
        state_dir: Path,
        library: Path | None = None,
        metrics: DriverMetrics | None = None,
        boot_id: str | None = None,
        claim_gid: int | None = None,
        cache: ClaimCache | None = None,
        claim_dir_bytes: int | None = None,
        enforcement_mode: str = libcheck.REQUIRED,
        machine: str | None = None,
        read_library: Callable[[Path], bytes] = read_library_head,
        status_sink: Callable[[StatusUpdate], None] | None = None,
    ) -> None:
        self.vendor = vendor
        self.driver = vendor.driver
        self.node = node
        self.backend = backend
        self.claims = claims
        self.cdi_dir = Path(cdi_dir)
        self.root = Path(state_dir) / self.driver
        self.library = Path(library) if library else default_library()
        self.mode = libcheck.check_mode(enforcement_mode)
        self.machine = machine or libcheck.node_machine()  # the architecture the library must be built for
        self._read_library = read_library
        self.status_sink = status_sink  # claim device status after a fresh Prepare (status.StatusWriter.submit)
        self.metrics = metrics or DriverMetrics()
        self.claim_gid = claim_gid
        self.cache = cache
        self.claim_dir_bytes = claim_dir_bytes  # a tmpfs of this size on every claim folder (limits.py)
        self.kind = vendor.device.cdi_kind
        self.cdi_class = vendor.device.cdi_class
        self.profile = vendor.enforcement
        self.layout = enforcement.layout(self.profile)
        self.devices = {d.name: d for d in backend.enumerate() if d.vendor == vendor.key}
        self._lock = threading.Lock()
        self._spares: list[Path] = []  # under _lock: empty claim directories, ready to be renamed into place
        self._specs_seen = UnchangedSince(self.cdi_dir)  # restore_specs skips a pass while this holds
        self.store = CheckpointStore(self.root / "checkpoint.json", self.driver, self.cdi_dir, self.cdi_class, boot_id)
        self.checkpoint = Checkpoint(driver=self.driver)
        self.commit = GroupCommit(self.store, self._snapshot, self.metrics.commits.labels(self.driver).observe)

    def open(self) -> DriverState:
        """Load (or repair) the checkpoint and write the host files; nothing before this touches the disk."""
        for folder in (self.root, self.root / "claims"):
            private_dir(folder)
        self.cdi_dir.mkdir(parents=True, exist_ok=True)
        with self._lock:
            self.checkpoint = self.store.load()
            self._sweep_orphans()
        if self.store.quarantined:
            self.metrics.quarantined.labels(self.driver).inc(len(self.store.quarantined))
        self._write_host_files()
        self._update_gauge()
        self._announce_mode()
        return self

    # -- enforcement library ------------------------------------------------------------------------

    @property
    def effective_mode(self) -> str:
        """``required``: claims are enforced or refused; ``none``: prepared without the library."""
        return libcheck.effective_mode(self.mode, self.profile)

    def library_status(self) -> LibraryStatus:
        """Read the library's header now and check it (a few bytes: every Prepare call and probe rechecks)."""
        try:
            head: bytes | OSError = self._read_library(self.library)
        except OSError as exc:
            head = exc
        return libcheck.check(str(self.library), head, self.machine)

    def enforcement_ready(self) -> tuple[bool, str]:
        """Readiness of enforcement: False with the refusal while claims of this driver would be refused."""
        if self.effective_mode == libcheck.NONE:
            return True, f"{self.driver}: enforcement {self.effective_mode}"
        status = self.library_status()
        if not status.usable:
            return False, f"{self.driver}: {status.refusal(self.profile)}"
        return True, f"{self.driver}: enforcement library {self.library} ok"

    def _announce_mode(self) -> None:
        self.metrics.enforcement_mode.labels(self.driver, self.effective_mode, self.profile).set(1)
        fields = {"driver": self.driver, "profile": self.profile, "library": str(self.library)}
        if self.profile == libcheck.NONE:
            return
        if self.mode == libcheck.NONE:
            log.warning(
                "enforcement is off (driver.enforcement: none): claims are prepared without the enforcement "
                "library, so their memory and compute shares are not enforced",
                extra={"fields": fields},
            )
            return
        status = self.library_status()
        if not status.usable:
            log.error(
                "enforcement library unusable: claims will be refused until it is fixed",
                extra={"fields": {**fields, "reason": status.reason, "error": status.refusal(self.profile)}},
            )

    def _library_gate(self, status: LibraryStatus | None) -> str:
        """The decision for one claim (``status``: a check made for this call, else one made now)."""
        needed = self.effective_mode != libcheck.NONE
        if needed and status is None:
            status = self.library_status()
        decision = libcheck.decide(self.mode, self.profile, status)
        if decision == libcheck.REFUSE:
            assert status is not None
            self.metrics.enforcement_refusals.labels(self.driver, status.reason).inc()
            raise ClaimError(status.refusal(self.profile), "enforcement_library")
        return decision

    # -- host files -------------------------------------------------------------------------------

    @property
    def preload_file(self) -> Path:
        return self.root / "ld.so.preload"

    @property
    def shared_dir(self) -> Path:
        return self.root / "shared"

    def shared_file(self, device: Device) -> Path | None:
        """The host file the claims on ``device`` share (None when the profile shares nothing)."""
        name = self.layout.shared_file_name(device.physical_id)
        return self.shared_dir / name if name else None

    def claim_dir(self, uid: str) -> Path:
        """The claim's own folder; ClaimError for a uid that would name anything else."""
        return _child(self.root / "claims", uid)

    def spec_path(self, uid: str) -> Path:
        """The claim's CDI spec; ClaimError for a uid that would name a file elsewhere or the common spec."""
        if uid == cdi.COMMON:
            raise ClaimError(claim_uid_problem(uid))
        _child(self.cdi_dir, uid)  # the uid itself must be a single plain name, as for claim_dir
        return _child(self.cdi_dir, cdi.spec_file_name(self.driver, self.cdi_class, uid))

    def _sweep_orphans(self) -> None:
        """Remove claim specs and directories the checkpoint does not know: a Prepare that never answered."""
        known = set(self.checkpoint.claims)
        orphans: set[str] = set()
        for path in self.cdi_dir.iterdir():
            uid = cdi.claim_uid_from_file_name(path.name, self.driver, self.cdi_class)
            if uid is not None and uid not in known:
                orphans.add(uid)
        claims_root = self.root / "claims"
        if claims_root.is_dir():
            orphans |= {p.name for p in claims_root.iterdir() if p.name not in known}
        for uid in sorted(orphans):
            try:
                self._remove_files(uid)
            except ClaimError as exc:
                fields = {"driver": self.driver, "error": str(exc)}
                log.warning("left an unexpected entry alone", extra={"fields": fields})
        if orphans:
            log.info(
                "removed files of unfinished prepares",
                extra={"fields": {"driver": self.driver, "uids": sorted(orphans)}},
            )

    def _write_host_files(self) -> None:
        """The preload file, the shared directory and the common CDI spec (rewritten at every start)."""
        if self.profile != "none":
            atomic_write(self.preload_file, enforcement.preload_entry(self.library.name))
            self._write_shared_files()
        self._tighten_claim_dirs()
        # spares from an earlier run are not trusted: a fresh set, made by this process
        shutil.rmtree(self.root / ".spare", ignore_errors=True)
        private_dir(self.root / ".spare")
        if self.claim_dir_bytes:
            self._probe_limit()
        self._refill_spares()
        common = cdi.render_common_spec(self.kind, _as_cdi_edits(self.backend.common_edits()), self.driver)
        atomic_write(self.cdi_dir / cdi.spec_file_name(self.driver, self.cdi_class, cdi.COMMON), cdi.dump_spec(common))

    def _write_shared_files(self) -> None:
        """One file per device for the profiles that share one (it must exist: it is bind-mounted as a file)."""
        files = [f for f in map(self.shared_file, self.devices.values()) if f is not None]
        if not files:
            return
        private_dir(self.shared_dir)
        for path in files:
            fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_NOFOLLOW, SHARED_FILE)
            try:
                os.fchmod(fd, SHARED_FILE)
                if self.claim_gid is not None:
                    os.fchown(fd, -1, self.claim_gid)
            finally:
                os.close(fd)

    def _tighten_claim_dirs(self) -> None:
        """Give directories an earlier version made world-writable the current mode (they are the driver's)."""
        if self.shared_dir.is_dir() and not self.layout.shared_file_name(0):
            self.shared_dir.chmod(PRIVATE_DIR)  # no longer mounted anywhere
        claims_root = self.root / "claims"
        for path in claims_root.iterdir():
            if path.is_dir() and not path.is_symlink():
                path.chmod(CLAIM_DIR)

    def _update_gauge(self) -> None:
        done = sum(1 for e in self.checkpoint.claims.values() if e.state == PREPARE_COMPLETED)
        self.metrics.prepared.labels(self.driver).set(done)

    # -- prepare ----------------------------------------------------------------------------------

    def prepare(self, refs: Sequence[ClaimRef], repeat_only: bool = False) -> dict[str, PrepareResult]:
        """Prepare every claim of one kubelet call; each claim succeeds or fails on its own.

        ``repeat_only`` answers only claims that are prepared already (rewriting a lost spec) and
        refuses the rest: the driver's own restore must never prepare a claim the kubelet unprepared.

        The CDI specs of the call are written first, then the call's checkpoint changes are staged
        and it answers once they are durable (group commit: the only fsync'd write, shared with the
        calls that overlap it; see ``checkpoint``). A crash in between leaves specs without
        checkpoint entries: ``open`` removes them, and the kubelet, which got no answer, calls again.
        """
        out: dict[str, PrepareResult] = {}
        with self._lock:
            need = [] if repeat_only else [r for r in refs if not self._completed(r.uid)]
        fetched = self._fetch_many(need)  # API reads in parallel, outside the lock
        status = self.library_status() if self.effective_mode != libcheck.NONE else None  # once per call
        with self._lock:
            fresh: list[str] = []
            updates: list[StatusUpdate] = []
            changed = False
            repeated: list[str] = []
            for ref in refs:
                entry = self.checkpoint.claims.get(ref.uid)
                try:
                    if entry is not None and entry.state == PREPARE_COMPLETED:
                        devices, rewritten = self._repeat(entry, status)
                        out[ref.uid] = PrepareResult(devices=devices)
                        repeated.append(ref.uid)
                        changed |= rewritten
                        continue
                    if repeat_only:  # unprepared since the caller looked: not an error, nothing to restore
                        out[ref.uid] = PrepareResult(error=f"claim {ref.uid} is no longer prepared")
                        continue
                    claim = fetched.get(ref.uid) or self._fetch(ref)
                    if isinstance(claim, ClaimError):
                        raise claim
                    out[ref.uid] = PrepareResult(devices=self._prepare_new(ref, claim, status))
                    fresh.append(ref.uid)
                    if self.status_sink is not None:
                        updates.extend(self._status_update(ref, claim, out[ref.uid].devices))
                except ClaimError as exc:
                    out[ref.uid] = self._failed("prepare", exc)
                except MALFORMED as exc:
                    out[ref.uid] = self._failed("prepare", malformed(ref, exc))
                except OSError as exc:
                    self.checkpoint.claims.pop(ref.uid, None)
                    with contextlib.suppress(OSError, ClaimError):
                        self._remove_files(ref.uid)
                    out[ref.uid] = self._failed("prepare", ClaimError(f"writing the claim's files: {exc}", "io"))
            # a repeat may answer for an entry another call staged and is still writing: it waits too
            ticket = self.commit.stage() if (fresh or changed) else self.commit.staged
        try:
            self.commit.wait(ticket)  # outside the lock: calls arriving meanwhile join the next write
        except OSError as exc:
            with self._lock:
                for uid in fresh:
                    self.checkpoint.claims.pop(uid, None)
                    with contextlib.suppress(OSError, ClaimError):
                        self._remove_files(uid)
                # the removal (and whatever the failed write carried) rides on the next write, which
                # any later call, a repeat included, now makes instead of inheriting this error
                self.commit.stage()
                self._update_gauge()
            for uid in fresh + repeated:
                out[uid] = self._failed("prepare", ClaimError(f"writing the checkpoint: {exc}", "io"))
            return out
        for _ in fresh:
            self._count("prepare", "ok")
        for update in updates:  # durable now: tell the claim what was applied (written on another thread)
            assert self.status_sink is not None
            self.status_sink(update)
        for _ in repeated:
            self._count("prepare", "repeat")
        if fresh or changed:
            with self._lock:
                self._update_gauge()
        return out

    def _snapshot(self) -> Checkpoint:
        """A copy of the checkpoint for the group commit's writer (entries are immutable: a shallow copy)."""
        with self._lock:
            return Checkpoint(driver=self.checkpoint.driver, claims=dict(self.checkpoint.claims))

    def _completed(self, uid: str) -> bool:
        entry = self.checkpoint.claims.get(uid)
        return entry is not None and entry.state == PREPARE_COMPLETED

    def _fetch_many(self, refs: Sequence[ClaimRef]) -> dict[str, dict[str, Any] | ClaimError]:
        """Read several claims: cache hits first, the misses with concurrent GETs (one round trip, not 16)."""

        def one(ref: ClaimRef) -> dict[str, Any] | ClaimError:
            try:
                return self._fetch(ref)
            except ClaimError as exc:
                return exc
            except MALFORMED as exc:
                return malformed(ref, exc)

        out: dict[str, dict[str, Any] | ClaimError] = {}
        misses = []
        for ref in refs:
            if self._cached(ref) is not None:
                out[ref.uid] = one(ref)
            else:
                misses.append(ref)
        if len(misses) <= 1:
            out.update((r.uid, one(r)) for r in misses)
            return out
        with ThreadPoolExecutor(max_workers=min(8, len(misses)), thread_name_prefix="claim-get") as pool:
            out.update(zip((r.uid for r in misses), pool.map(one, misses), strict=True))
        return out

    def _cached(self, ref: ClaimRef) -> dict[str, Any] | None:
        """The claim from the node's claim cache when it has this uid and an allocation; None: GET it."""
        if self.cache is None:
            return None
        claim = self.cache.lookup(ref.namespace, ref.name, ref.uid)
        if claim is not None and not ((claim.get("status") or {}).get("allocation")):
            return None
        return claim

    def _fetch(self, ref: ClaimRef) -> dict[str, Any]:
        """Read the claim (cache, else GET) and check it is the allocated claim the kubelet means."""
        claim: Any = self._cached(ref)
        if claim is not None:
            self.metrics.cache.labels(self.driver, "hit").inc()
        else:
            if self.cache is not None:
                self.metrics.cache.labels(self.driver, "miss").inc()
            try:
                claim = self.claims.get_claim(ref.namespace, ref.name)
            except KubeError as exc:
                raise ClaimError(f"reading ResourceClaim {ref.namespace}/{ref.name}: {exc}", "api") from None
        if claim is None:
            raise ClaimError(f"ResourceClaim {ref.namespace}/{ref.name} not found", "not_found")
        if not isinstance(claim, dict):
            raise ClaimError(f"ResourceClaim {ref.namespace}/{ref.name} is not an object", "malformed")
        uid = (claim.get("metadata") or {}).get("uid")
        if uid != ref.uid:
            raise ClaimError(
                f"ResourceClaim {ref.namespace}/{ref.name} has uid {uid}, not {ref.uid}: it was replaced",
                "uid_mismatch",
            )
        if not ((claim.get("status") or {}).get("allocation")):
            raise ClaimError(f"ResourceClaim {ref.namespace}/{ref.name} is not allocated", "not_allocated")
        return claim

    def own_results(self, claim: dict[str, Any]) -> list[dict[str, Any]]:
        """This driver's allocation results, checked against this node's devices."""
        results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
        mine = [r for r in results if r.get("driver") == self.driver]
        for res in mine:
            if res.get("pool") != self.node:
                raise ClaimError(
                    f"result {res.get('device')} is in pool {res.get('pool')!r}, not this node's pool {self.node!r}"
                )
            if res.get("device") not in self.devices:
                raise ClaimError(
                    f"allocated device {res.get('device')!r} is not a device of node {self.node}", "unknown_device"
                )
        return mine

    def render(
        self, ref: ClaimRef, claim: dict[str, Any], status: LibraryStatus | None = None
    ) -> tuple[dict[str, Any], tuple[PreparedDevice, ...]]:
        """The claim's CDI spec and the devices to report (pure apart from the backend's device nodes).

        A claim that needs the enforcement library is refused (ClaimError) while the library is
        unusable: ``status`` is the check made for this call, or None to check now.
        """
        results = self.own_results(claim)
        devices = [self.devices[r["device"]] for r in results]
        decision = self._library_gate(status) if devices else libcheck.SKIP
        claim_id = cdi.qualified_id(self.kind, ref.uid)
        prepared = tuple(
            PreparedDevice(
                # the claim's request, without the "/<subrequest>" a firstAvailable result names: the
                # kubelet matches a container's resources.claims[].request to it (as kubeletplugin does)
                request_names=(str(r.get("request", "")).partition("/")[0],),
                pool_name=str(r["pool"]),
                device_name=str(r["device"]),
                cdi_device_ids=(claim_id, *self.backend.edits([dev]).extra_cdi_ids),
                share_id=r.get("shareID"),
            )
            for r, dev in zip(results, devices, strict=True)
        )
        env = enforcement.enforcement_env(self.profile, shares_of(results, self.devices), ref.uid)
        backend_edits = self.backend.edits(devices)
        common = self.backend.common_edits()
        notes = list(backend_edits.notes)
        mounts: list[Mount] = []
        if self.profile != "none" and devices:
            if decision == libcheck.ENFORCE:
                mounts += [
                    Mount(str(self.library.parent), enforcement.LIBRARY_DIR, read_only=True),
                    Mount(str(self.preload_file), enforcement.LD_SO_PRELOAD, read_only=True),
                ]
            else:  # the operator's enforcement: none
                notes.append("driver.enforcement is none: no enforcement library mounted, quotas not enforced")
            if self.layout.claim_dir:
                mounts.append(Mount(str(self.claim_dir(ref.uid)), self.layout.claim_dir, read_only=False))
            for dev in devices:
                host, target = self.shared_file(dev), self.layout.shared_path(dev.physical_id)
                if host is not None and target is not None:
                    mounts.append(Mount(str(host), target, read_only=False))
        edits = cdi.merge_edits(
            [
                ContainerEdits(env=tuple(env.items())),
                ContainerEdits(env=backend_edits.env, device_nodes=backend_edits.device_nodes),
                ContainerEdits(mounts=tuple(mounts) + backend_edits.mounts + common.mounts),
            ]
        )
        spec = cdi.render_claim_spec(
            cdi.ClaimSpecInput(
                kind=self.kind,
                claim=ref,
                edits=edits,
                devices=prepared,
                claim_dir=str(self.claim_dir(ref.uid)),
                notes=tuple(dict.fromkeys(notes)),
            )
        )
        return spec, prepared

    def _prepare_new(
        self, ref: ClaimRef, claim: dict[str, Any], status: LibraryStatus | None = None
    ) -> tuple[PreparedDevice, ...]:
        fault = getattr(self.backend, "prepare_fault", None)  # test backends only (fake): injected failures
        if fault is not None and (why := fault(claim)):
            raise ClaimError(why, "injected")
        spec, prepared = self.render(ref, claim, status)  # refuses before any file is written
        claim_dir = self.claim_dir(ref.uid)
        self._make_claim_dir(claim_dir)
        # Not fsynced: the checkpoint is, and a spec lost or emptied by a crash is rewritten on the next Prepare.
        atomic_write(self.spec_path(ref.uid), cdi.dump_spec(spec), durable=False)
        self.checkpoint.claims[ref.uid] = ClaimEntry(
            claim=ref,
            state=PREPARE_COMPLETED,
            devices=prepared,
            cdi_spec=self.spec_path(ref.uid).name,
            claim_dir=str(claim_dir),
            boot_id=self.store.boot_id,
        )
        log.info(
            "prepared",
            extra={"fields": {"driver": self.driver, "claim": f"{ref.namespace}/{ref.name}", "uid": ref.uid}},
        )
        return prepared

    def _status_update(
        self, ref: ClaimRef, claim: dict[str, Any], devices: Sequence[PreparedDevice]
    ) -> list[StatusUpdate]:
        """The claim's device status entries of this driver (none when it has no devices here)."""
        if not devices:
            return []
        try:
            shares = shares_of(self.own_results(claim), self.devices)
            entries = device_entries(self.driver, devices, shares, self.profile, self.effective_mode, time.time())
        except Exception as exc:  # the claim is prepared: a status that cannot be rendered is only logged
            log.warning("claim device status not rendered", extra={"fields": {"uid": ref.uid, "error": str(exc)}})
            return []
        return [StatusUpdate(driver=self.driver, claim=ref, entries=tuple(entries))]

    def _make_claim_dir(self, path: Path) -> None:
        """The claim's directory: a spare renamed into place (a rename is cheaper than a mkdir), else a mkdir."""
        if not path.exists():
            while self._spares:
                try:
                    os.rename(self._spares.pop(), path)
                    self._limit(path)
                    return
                except FileNotFoundError:
                    continue  # removed behind our back: try the next one
        path.mkdir(mode=CLAIM_DIR, exist_ok=True)
        self._claim_mode(path)
        self._limit(path)

    def _probe_limit(self) -> None:
        """Fail at start, not on the kubelet's first call, when claim folders cannot be size-limited."""
        probe = self.root / ".spare" / "probe"
        probe.mkdir()
        try:
            limits.mount_tmpfs(probe, self.claim_dir_bytes or 0, CLAIM_DIR)
            limits.unmount(probe)
        except OSError as exc:
            raise UserError(
                f"--claim-dir-size needs a driver that may mount (CAP_SYS_ADMIN, and the state folder shared "
                f"with the host by bidirectional mount propagation): {exc}; or leave --claim-dir-size unset"
            ) from None
        finally:
            probe.rmdir()

    def _limit(self, path: Path) -> None:
        """Mount the claim's size-limited tmpfs on its folder, unless it is already there."""
        if self.claim_dir_bytes and not limits.is_mount(path):
            limits.mount_tmpfs(path, self.claim_dir_bytes, CLAIM_DIR, self.claim_gid)

    def _claim_mode(self, path: Path) -> None:
        path.chmod(CLAIM_DIR)  # mkdir's mode is masked by the umask
        if self.claim_gid is not None:
            os.chown(path, -1, self.claim_gid)

    def _refill_spares(self) -> None:
        """Make empty claim directories ahead of time, outside the lock (Unprepare and start pay the mkdirs).

        A folder that cannot be made (a full disk) is simply not made: Prepare then makes its own.
        """
        with self._lock:
            need = SPARE_DIRS - len(self._spares)
        made = []
        for _ in range(need):
            path = self.root / ".spare" / os.urandom(8).hex()
            try:
                path.mkdir(mode=CLAIM_DIR)
                self._claim_mode(path)
            except OSError as exc:
                log.warning("cannot make a spare claim directory", extra={"fields": {"error": str(exc)}})
                break
            made.append(path)
        with self._lock:
            self._spares.extend(made)

    def _repeat(
        self, entry: ClaimEntry, status: LibraryStatus | None = None
    ) -> tuple[tuple[PreparedDevice, ...], bool]:
        """A repeated Prepare: the same answer; a spec lost to a reboot or crash is rewritten (one GET).

        Returns the devices and whether the entry was rewritten.
        """
        if self._spec_intact(entry.claim.uid):
            claim_dir = self.claim_dir(entry.claim.uid)
            if self.claim_dir_bytes and claim_dir.is_dir():
                self._limit(claim_dir)  # a reboot took the tmpfs, not the folder
            return entry.devices, False
        prepared = self._prepare_new(entry.claim, self._fetch(entry.claim), status)
        log.info("rewrote missing CDI spec", extra={"fields": {"driver": self.driver, "uid": entry.claim.uid}})
        return prepared, True

    def _spec_intact(self, uid: str) -> bool:
        """The claim's spec exists and names the claim (a crash may leave an empty file behind)."""
        try:
            parsed = cdi.parse_claim_spec(cdi.load_spec(self.spec_path(uid).read_text()))
        except (OSError, yaml.YAMLError, RecursionError):
            return False
        return parsed is not None and parsed.claim.uid == uid

    def restore_specs(self) -> list[str]:
        """Rewrite CDI specs that vanished under running claims (a wiped ``/var/run/cdi``).

        The real kubelet does not call Prepare again for running pods, not even after its own
        restart, so a lost spec would stay lost until a container restarts and fails its CDI lookup.
        A pass costs one ``stat`` while the spec folder is as the last good pass left it
        (:mod:`dralab.driver.dirstamp`); otherwise one listing, compared with the checkpoint. A
        missing claim spec goes through Prepare's repeat path (same answer, one claim read,
        group-committed checkpoint), and only while its claim is still prepared: a claim unprepared
        meanwhile is never brought back. Returns the uids rewritten.
        """
        unchanged, before = self._specs_seen.unchanged()
        if unchanged:
            return []
        try:
            present = set(os.listdir(self.cdi_dir))
        except FileNotFoundError:
            present = set()
        common = cdi.spec_file_name(self.driver, self.cdi_class, cdi.COMMON)
        if common not in present:
            self.cdi_dir.mkdir(parents=True, exist_ok=True)
            spec = cdi.render_common_spec(self.kind, _as_cdi_edits(self.backend.common_edits()), self.driver)
            atomic_write(self.cdi_dir / common, cdi.dump_spec(spec))
            log.info("rewrote missing common CDI spec", extra={"fields": {"driver": self.driver}})
        with self._lock:
            lost = [
                e.claim
                for e in self.checkpoint.claims.values()
                if e.state == PREPARE_COMPLETED
                and cdi.spec_file_name(self.driver, self.cdi_class, e.claim.uid) not in present
            ]
        if common in present and not lost:
            self._specs_seen.checked(before)
            return []
        self._specs_seen.forget()
        if not lost:
            return []
        results = self.prepare(lost, repeat_only=True)
        return [ref.uid for ref in lost if not results[ref.uid].error]

    # -- unprepare --------------------------------------------------------------------------------

    def unprepare(self, refs: Sequence[ClaimRef]) -> dict[str, str]:
        """Undo Prepare from the checkpoint only; unknown claims succeed. Returns uid -> error ('' = ok)."""
        out: dict[str, str] = {}
        with self._lock:
            removed: list[str] = []
            for ref in refs:
                try:
                    self._remove_files(ref.uid)
                except ClaimError as exc:
                    out[ref.uid] = str(exc)
                    self._count("unprepare", "error")
                    self.metrics.errors.labels(self.driver, "unprepare", exc.reason).inc()
                    continue
                except OSError as exc:
                    out[ref.uid] = f"removing files of claim {ref.uid}: {exc}"
                    self._count("unprepare", "error")
                    self.metrics.errors.labels(self.driver, "unprepare", "io").inc()
                    continue
                if self.checkpoint.claims.pop(ref.uid, None) is not None:
                    removed.append(ref.uid)
                else:
                    self._count("unprepare", "unknown")
                out[ref.uid] = ""
            ticket = self.commit.stage() if removed else 0
            self._update_gauge()
        try:
            self.commit.wait(ticket)
        except OSError as exc:
            # the files are gone and the entry is out of memory: the kubelet's retry finds an unknown claim
            with self._lock:
                self.commit.stage()  # the next call writes again instead of inheriting this error
            for uid in removed:
                out[uid] = f"writing the checkpoint after removing claim {uid}: {exc}"
                self._count("unprepare", "error")
                self.metrics.errors.labels(self.driver, "unprepare", "io").inc()
            return out
        for _ in removed:
            self._count("unprepare", "ok")
        if removed:
            self._refill_spares()  # the next Prepare renames instead of paying a mkdir
        return out

    def _remove_files(self, uid: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.spec_path(uid).unlink()
        claim_dir = self.claim_dir(uid)
        if limits.is_mount(claim_dir):
            limits.unmount(claim_dir)
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(claim_dir)

    # -- reconcile --------------------------------------------------------------------------------

    def reconcile(self) -> list[str]:
        """Unprepare prepared claims whose ResourceClaim is gone or was replaced (the kubelet missed them).

        A claim that is still reserved cannot be deleted (its finalizer), so a missing claim means its
        pods are gone. Returns the uids released.
        """
        with self._lock:
            entries = list(self.checkpoint.claims.values())
        stale = []
        for entry in entries:
            try:
                claim = self.claims.get_claim(entry.claim.namespace, entry.claim.name)
            except KubeError:
                continue
            if claim is None or (claim.get("metadata") or {}).get("uid") != entry.claim.uid:
                stale.append(entry.claim)
        if stale:
            log.info(
                "releasing claims that no longer exist",
                extra={"fields": {"driver": self.driver, "uids": [c.uid for c in stale]}},
            )
            self.unprepare(stale)
        return [c.uid for c in stale]

    # -- helpers ----------------------------------------------------------------------------------

    def _count(self, call: str, result: str) -> None:
        self.metrics.calls.labels(self.driver, call, result).inc()

    def refused(self, call: str, problems: dict[str, str]) -> None:
        """Count and log claims refused before reaching this state (uids that cannot name files)."""
        for problem in problems.values():
            self._failed(call, ClaimError(problem, "invalid_uid"))

    def _failed(self, call: str, exc: ClaimError) -> PrepareResult:
        self._count(call, "error")
        self.metrics.errors.labels(self.driver, call, exc.reason).inc()
        log.warning(f"{call} failed", extra={"fields": {"driver": self.driver, "error": str(exc)}})
        return PrepareResult(error=str(exc))

    def prepared_claims(self) -> dict[str, ClaimEntry]:
        with self._lock:
            return dict(self.checkpoint.claims)


def private_dir(path: Path) -> None:
    """Create ``path`` (and missing parents) 0700, or make the driver's existing folder 0700."""
    path.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    path.chmod(PRIVATE_DIR)


def _as_cdi_edits(edits: Any) -> ContainerEdits:
    return ContainerEdits(env=edits.env, device_nodes=edits.device_nodes, mounts=edits.mounts)


def preview_spec(state: DriverState, claim: dict[str, Any]) -> dict[str, Any]:
    """The CDI spec ``state`` would write for an allocated ``claim`` (no files written)."""
    meta = claim.get("metadata") or {}
    uid = meta.get("uid")
    if not uid:
        raise UserError(
            "the claim has no metadata.uid: use a claim read from the cluster (kubectl get resourceclaim -o yaml)"
        )
    if not ((claim.get("status") or {}).get("allocation")):
        raise UserError("the claim has no status.allocation: preview an allocated claim")
    ref = ClaimRef(namespace=meta.get("namespace", "default"), name=meta.get("name", ""), uid=uid)
    try:
        spec, _ = state.render(ref, claim)  # refused like Prepare while the library is unusable
    except ClaimError as exc:
        raise UserError(str(exc)) from None
    return spec


def load_yaml_claim(text: str, source: str) -> dict[str, Any]:
    """A ResourceClaim document from YAML/JSON text."""
    try:
        claim = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise UserError(f"{source}: not valid YAML ({exc})") from None
    if not isinstance(claim, dict) or claim.get("kind") not in (None, "ResourceClaim"):
        raise UserError(f"{source}: expected a ResourceClaim")
    return claim
