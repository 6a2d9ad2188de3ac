"""The webhook's process model: N symmetric server workers on one listening socket, background work once.

Python serves one request at a time per process, and the apiserver shares the machine, so one process
cannot use every core. ``dralab webhook serve --workers N`` starts a small supervisor that binds the
port and starts N copies of ``dralab webhook serve``, each inheriting its own listening socket on that
port (``SO_REUSEPORT``: the kernel spreads new connections evenly over the workers' sockets; with one
shared socket, every idle worker is woken for each connection and the first in the kernel's wait queue
takes nearly all of them, so one worker served most requests while the other idled). Every worker
answers admissions; each also runs a
:class:`~dralab.webhook.controllers.lease.LeaderElector` on one Lease, and only the leader (one worker across
all workers *and* all replicas) runs the janitor, the budget status writer and HAMi-DRA adoption
(:class:`Leadership`).

Shared state that must stay right across workers:
- Metrics: the supervisor gives every worker one ``PROMETHEUS_MULTIPROC_DIR``, so ``/metrics`` from any
  worker sums counters and histograms over all of them.
- The namespace claim rate (``webhook.claimCreateRatePerSecond``/``claimCreateBurst``): each worker
  enforces ``1/N`` of the rate and of the burst (:func:`worker_rate`), so what one replica lets a
  namespace create never exceeds the configured figures, whichever worker a request reaches. The
  burst share is never below one pod's claim cap, or a pod with many claims could never be admitted;
  then the replica's burst may exceed the configured one by at most ``N x maxClaimsPerPod``. Like
  before, each replica has its own buckets (R replicas: up to R times the rate).
- Certificates: each worker reloads them itself (the reload is atomic per process).
"""

from __future__ import annotations

import math
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from dralab.util import get_logger

log = get_logger("dralab.webhook.workers")

MAX_AUTO_WORKERS = 8


def auto_workers(cores: int | None = None) -> int:
    """Workers for ``--workers 0``: one per usable core, at most :data:`MAX_AUTO_WORKERS`."""
    cores = cores if cores is not None else len(os.sched_getaffinity(0))
    return max(1, min(cores, MAX_AUTO_WORKERS))


def worker_rate(rate: float, burst: int, workers: int, max_claims_per_pod: int) -> tuple[float, int]:
    """One worker's share ``(rate, burst)`` of the namespace claim rate (see the module docstring)."""
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    return rate / workers, max(math.ceil(burst / workers), max_claims_per_pod)


def listen(host: str, port: int, backlog: int = 2048, reuse_port: bool = True) -> socket.socket:
    """The first worker's listening TCP socket; :func:`sibling` adds the others' on the same port.

    A port clash fails here, before any worker: the port is first bound without ``SO_REUSEPORT``, which
    fails while anything (another dralab webhook included) listens there; only then is it bound for
    sharing between this server's workers. Linux lets only the same user join such a group.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        if reuse_port and hasattr(socket, "SO_REUSEPORT"):
            port = sock.getsockname()[1]  # the port the check got (port 0: the kernel's pick)
            sock.close()
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind((host, port))
    except OSError as exc:
        sock.close()
        from dralab.errors import UserError

        raise UserError(f"cannot listen on {host}:{port} ({exc.strerror}); pick a free --port") from None
    sock.listen(backlog)
    sock.set_inheritable(True)
    return sock


def sibling(sock: socket.socket, backlog: int = 2048) -> socket.socket:
    """Another listening socket on ``sock``'s address in its ``SO_REUSEPORT`` group, or ``sock`` itself
    when it was bound without one (then the workers share it)."""
    reuse = hasattr(socket, "SO_REUSEPORT") and sock.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT)
    if not reuse:
        return sock
    other = socket.socket(sock.family, socket.SOCK_STREAM)
    try:
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        other.bind(sock.getsockname()[:2])
        other.listen(backlog)
    except OSError:
        other.close()
        raise
    other.set_inheritable(True)
    return other


class Leadership:
    """What only the leader runs: built fresh each time leadership starts (threads cannot restart)."""

    def __init__(self, build: Callable[[], Sequence[Any]], publish: Callable[[Sequence[Any]], None] | None = None):
        self._build = build
        self._publish = publish  # tells the server which parts run (readiness, metrics)
        self._parts: Sequence[Any] = ()
        self._lock = threading.Lock()

    @property
    def parts(self) -> Sequence[Any]:
        return self._parts

    def start(self) -> None:
        with self._lock:
            if self._parts:
                return
            self._parts = [p for p in self._build() if p is not None]
            for part in self._parts:
                part.start()
            if self._publish:
                self._publish(self._parts)

    def stop(self) -> None:
        with self._lock:
            parts, self._parts = self._parts, ()
            if self._publish:
                self._publish(())
            for part in reversed(parts):
                try:
                    part.stop()
                except Exception:
                    log.exception("stopping background work failed")


@dataclass
class Supervisor:
    """Starts ``workers`` copies of ``argv`` (a ``dralab webhook serve`` command) on one inherited socket.

    A worker that exits ends the whole group with its status: the pod restarts cleanly instead of
    serving with fewer workers than configured. SIGTERM/SIGINT are passed to the workers.
    """

    argv: list[str]
    workers: int
    host: str
    port: int

    def run(self, sock: socket.socket | None = None) -> int:
        """Start the workers and wait; ``sock``: the first worker's listening socket (else bound here); the
        others get siblings of it (:func:`sibling`)."""
        sock = sock or listen(self.host, self.port)
        socks = [sock]
        try:
            socks += [sibling(sock) for _ in range(self.workers - 1)]
        except OSError:
            for extra in socks[1:]:
                extra.close()
            raise
        metrics_dir = tempfile.mkdtemp(prefix="dralab-webhook-metrics-")
        env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": metrics_dir}
        procs: list[subprocess.Popen[bytes]] = []
        stopping = threading.Event()

        def forward(signum: int, _frame: Any) -> None:
            stopping.set()
            for proc in procs:
                if proc.poll() is None:
                    proc.send_signal(signum)

        previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)}
        for own in socks:
            cmd = [*self.argv, "--workers", str(self.workers), "--listen-fd", str(own.fileno())]
            procs.append(subprocess.Popen(cmd, pass_fds=(own.fileno(),), env=env, preexec_fn=_die_with_parent))
        log.info("webhook workers started", extra={"fields": {"workers": self.workers, "port": self.port,
                                                              "pids": [p.pid for p in procs]}})
        status = 0
        try:
            first = _first_to_end(procs)  # the first worker to end ends the group
            pid, status = first.pid, first.returncode
            if not stopping.is_set():
                log.error("a webhook worker exited; stopping the others", extra={"fields": {"pid": pid,
                                                                                        "status": status}})
        finally:
            for proc in procs:  # when stopping, each worker already has the signal and drains on its own
                if proc.poll() is None and not stopping.is_set():
                    proc.terminate()
            for proc in procs:
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
            for own in set(socks):
                own.close()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            import shutil

            shutil.rmtree(metrics_dir, ignore_errors=True)
        return 0 if stopping.is_set() else (status or 1)


def _first_to_end(procs: list[subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    """Block until one of ``procs`` ends and return it (reaped).

    Waits on the workers' pidfds, never on "any child" (``os.wait``): a process embedding the
    supervisor may have other children, whose exit must not be taken for a worker's.
    """
    fds = {os.pidfd_open(proc.pid): proc for proc in procs}
    try:
        ready, _, _ = select.select(list(fds), [], [])
        proc = fds[ready[0]]
        proc.wait()
        return proc
    finally:
        for fd in fds:
            os.close(fd)


def _die_with_parent() -> None:
    """In the worker before it runs: SIGTERM when the supervisor dies, even by SIGKILL (Linux), so no
    orphaned worker keeps serving, or leading, on its own. The supervisor has no threads when it forks."""
    import contextlib
    import ctypes

    pr_set_pdeathsig = 1
    with contextlib.suppress(OSError, AttributeError):  # not Linux: the supervisor's cleanup still ends them
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def serve_argv() -> list[str]:
    """This process's ``dralab webhook serve`` command for the workers (the supervisor adds ``--workers``)."""
    args = sys.argv[1:]
    out: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg == "--workers":
            skip = True
            continue
        if arg.startswith("--workers="):
            continue
        out.append(arg)
    return [sys.executable, "-m", "dralab.cli", *out]
