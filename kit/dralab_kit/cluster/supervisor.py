"""Starting, finding and stopping the local cluster's processes.

Each component runs detached in its own session (it outlives the ``dralab cluster up`` that
started it) with stdout and stderr appended to its log file. A process is identified by its pid
*and* its start time from /proc, so a recycled pid is never mistaken for a component and never
signalled. Nothing restarts a crashed component behind the user's back: ``status`` reports it,
``up`` or ``start`` brings it back.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from dralab.util import wait_for

# Popen objects of children started by this process: kept so they are not garbage-collected
# (and warned about) while running, and so their exit can be reaped.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


@dataclass(frozen=True)
class ProcRecord:
    """A started component process."""

    pid: int
    ticks: int
    argv: list[str]
    started: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> ProcRecord:
        return cls(pid=int(raw["pid"]), ticks=int(raw["ticks"]), argv=list(raw["argv"]), started=float(raw["started"]))


def parse_stat(text: str) -> tuple[str, int]:
    """(state letter, start time in clock ticks) from the text of /proc/<pid>/stat."""
    rest = text[text.rindex(")") + 2 :].split()
    # fields after "comm": state is field 3, starttime is field 22 (1-based over the whole line)
    return rest[0], int(rest[19])


def _stat(pid: int) -> tuple[str, int] | None:
    try:
        return parse_stat(Path(f"/proc/{pid}/stat").read_text())
    except (OSError, ValueError, IndexError):
        return None


def _reap(pid: int) -> None:
    child = _CHILDREN.get(pid)
    if child is not None and child.poll() is not None:
        _CHILDREN.pop(pid, None)


def reap_exited() -> int:
    """Reap every child of this process that has exited; how many. A child killed after the last
    :func:`is_alive` that looked at it would otherwise stay ``<defunct>`` in the process table for as long
    as this process runs (a bench bringing several fleets up and down in turn)."""
    gone = [pid for pid, child in list(_CHILDREN.items()) if child.poll() is not None]
    for pid in gone:
        _CHILDREN.pop(pid, None)
    return len(gone)


def is_alive(rec: ProcRecord) -> bool:
    """True when the recorded process still runs (same pid, same start time, not a zombie).

    /proc is read before the child is reaped, so a child seen exited is always reaped here: reaping
    first left one that died between the two steps a zombie that no later call looked at."""
    stat = _stat(rec.pid)
    if stat is not None and stat[1] == rec.ticks and stat[0] not in ("Z", "X"):
        return True
    _reap(rec.pid)
    return False


def start_process(argv: list[str], log_path: Path, env: dict[str, str] | None = None) -> ProcRecord:
    """Start ``argv`` detached, appending its output to ``log_path``."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        log.write(f"==== {stamp} starting: {' '.join(argv)}\n".encode())
        log.flush()
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, **(env or {})},
            close_fds=True,
        )
    _CHILDREN[proc.pid] = proc
    stat = wait_for(lambda: _stat(proc.pid), 5, f"/proc entry of {argv[0]}")
    return ProcRecord(pid=proc.pid, ticks=stat[1], argv=list(argv), started=time.time())


def stop_process(rec: ProcRecord, timeout: float = 15.0) -> bool:
    """SIGTERM the process group, SIGKILL after ``timeout``; False when it was not running."""
    if not is_alive(rec):
        return False
    signal_process(rec, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not is_alive(rec):
            return True
        time.sleep(0.05)
    signal_process(rec, signal.SIGKILL)
    with contextlib.suppress(TimeoutError):
        wait_for(lambda: not is_alive(rec), 5, f"process {rec.pid} to exit")
    return True


def signal_process(rec: ProcRecord, sig: signal.Signals) -> None:
    if not is_alive(rec):
        return
    try:
        os.killpg(rec.pid, sig)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            os.kill(rec.pid, sig)


def rss_bytes(rec: ProcRecord) -> int:
    """Resident memory of the process (0 when gone)."""
    if not is_alive(rec):
        return 0
    try:
        for line in Path(f"/proc/{rec.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return 0
    return 0


def log_tail(path: Path, lines: int = 8) -> str:
    """The last lines of a log file (empty when missing)."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 16384))
            text = fh.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])
