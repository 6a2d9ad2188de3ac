"""Small I/O helpers shared by every component: atomic writes, condition waits, logs, ports."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def atomic_write(path: str | os.PathLike[str], data: str | bytes, mode: int = 0o644, durable: bool = True) -> None:
    """Write ``data`` to ``path`` so readers see the old file or the new one, never a torn one.

    Temp file in the same directory, fsync, rename, fsync of the directory: survives a crash
    or power loss at any point. ``durable=False`` skips both fsyncs (still atomic for readers) for
    files that are rebuilt from other state after a crash, where the fsyncs dominate the cost.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode() if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    if not durable:
        return
    dir_fd = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class WaitTimeout(TimeoutError):
    """A condition did not become true in time; the message says which."""


def wait_for(
    condition: Callable[[], T | None],
    timeout: float,
    what: str,
    interval: float = 0.05,
    max_interval: float = 1.0,
) -> T:
    """Poll ``condition`` until it returns a truthy value and return that value (never None, so typed ``T``).

    Used instead of sleeps: the wait ends as soon as the condition holds, and a timeout names
    ``what`` was awaited. Exceptions from ``condition`` propagate.
    """
    deadline = time.monotonic() + timeout
    delay = interval
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise WaitTimeout(f"timed out after {timeout:.1f}s waiting for {what}")
        time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
        delay = min(delay * 1.5, max_interval)


def spread_start(period: float, rand: Callable[[], float] = random.random) -> float:
    """The first wait of a periodic pass: a random point within ``period``, then ``period`` each time.

    Processes started together (a DaemonSet rollout, a fleet brought up at once) that each wait the
    full period fall due together ever after, and reach the apiserver as bursts: a 500-node fleet's
    reconciles made about 5,000 claim GETs inside one 3-minute window (README, Scale, item 16).
    Spread over the period, the same passes are a steady trickle."""
    return period * rand()


def _ephemeral_range() -> tuple[int, int]:
    """The kernel's range for outgoing connections' local ports (where a listener may collide)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port that is free right now on ``host``, outside the ephemeral range.

    A port handed out by the OS (bind to 0) lies in the ephemeral range, so between this call
    and the server's own bind an outgoing connection can take it as its local port: servers of
    a busy local cluster then fail with "address already in use". Picking below that range
    avoids the collision; the bind test guards against listeners already there.
    """
    low, _ = _ephemeral_range()
    top = max(low - 1, 12000)
    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.randint(10000, top)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class _JsonFormatter(logging.Formatter):
    """One JSON object per line: easy to grep, easy to collect as evidence."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        extra = getattr(record, "fields", None)
        if isinstance(extra, dict):
            entry.update(extra)
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def get_logger(name: str) -> logging.Logger:
    """A logger that writes structured JSON lines to stderr (configured once per process).

    Pass fields with ``log.info("msg", extra={"fields": {...}})``.
    """
    root = logging.getLogger("dralab")
    if not getattr(root, "_dralab_configured", False):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(_JsonFormatter())
        root.addHandler(handler)
        root.setLevel(os.environ.get("DRALAB_LOG_LEVEL", "INFO").upper())
        root.propagate = False
        root._dralab_configured = True  # type: ignore[attr-defined]
    return logging.getLogger(name if name.startswith("dralab") else f"dralab.{name}")
