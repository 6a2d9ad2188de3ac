"""The worker model: rate shares, the supervisor on one shared socket, leader-only background work."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap

import pytest

from dralab.config import default_config
from dralab.webhook import workers
from dralab.webhook.server import background, build


def test_rate_share_never_lets_a_replica_exceed_the_configured_rate() -> None:
    for n in (1, 2, 3, 8):
        rate, burst = workers.worker_rate(50.0, 500, n, 16)
        assert rate * n == pytest.approx(50.0)
        assert burst * n - 500 < n  # ceil only
    # The burst share still admits the biggest pod the claim cap allows.
    assert workers.worker_rate(50.0, 20, 4, 16) == (12.5, 16)
    with pytest.raises(ValueError, match="at least 1"):
        workers.worker_rate(50.0, 500, 0, 16)


def test_auto_workers_follow_the_cores_within_bounds() -> None:
    assert workers.auto_workers(1) == 1
    assert workers.auto_workers(2) == 2
    assert workers.auto_workers(64) == workers.MAX_AUTO_WORKERS


def test_workers_enforce_their_share_of_the_namespace_rate(fake_api) -> None:
    cfg = default_config()
    wh = build(cfg, fake_api, janitor=False, workers=4)
    rate = wh.handler.lifecycle.rate
    assert rate.rate == pytest.approx(cfg.webhook.claim_create_rate_per_second / 4)
    assert rate.burst == max(-(-cfg.webhook.claim_create_burst // 4), cfg.webhook.max_claims_per_pod)


def test_serve_argv_drops_workers_for_the_supervisor_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["dralab", "webhook", "serve", "--workers", "4", "--port", "9443",
                                      "--workers=2", "--cert", "c"])
    assert workers.serve_argv() == [sys.executable, "-m", "dralab.cli", "webhook", "serve", "--port", "9443",
                                    "--cert", "c"]


class Part:
    def __init__(self, log: list[str], name: str) -> None:
        self.log, self.name = log, name

    def start(self) -> None:
        self.log.append(f"start {self.name}")

    def stop(self) -> None:
        self.log.append(f"stop {self.name}")


def test_leadership_builds_fresh_parts_each_term_and_stops_them_in_reverse() -> None:
    log: list[str] = []
    built: list[list[Part]] = []
    published: list[int] = []

    def make() -> list[Part | None]:
        parts = [Part(log, f"janitor{len(built)}"), None, Part(log, f"budgets{len(built)}")]
        built.append([p for p in parts if p])
        return parts

    lead = workers.Leadership(make, lambda parts: published.append(len(parts)))
    lead.start()
    lead.start()  # already leading: nothing new
    lead.stop()
    lead.stop()  # not leading: nothing to stop
    lead.start()
    assert log == ["start janitor0", "start budgets0", "stop budgets0", "stop janitor0",
                   "start janitor1", "start budgets1"]
    assert published == [2, 0, 0, 2]
    assert len(built) == 2


def test_background_parts_are_what_build_would_run(fake_api) -> None:
    wh = build(default_config(), fake_api, janitor=False)
    assert (wh.janitor, wh.budgets, wh.adopter) == (None, None, None)
    assert wh.ready()  # a non-leader is ready without janitor caches
    jan, budgets, _ = background(wh)
    assert jan is not None and budgets is not None
    wh.publish([jan, budgets])
    assert wh.janitor is jan and wh.budgets is budgets
    assert wh.ready() is True  # a probe may reach any worker: leading never makes one unready
    assert build(default_config(), fake_api, janitor=True).ready() is False  # unelected: waits for its caches
    wh.publish(())
    assert wh.janitor is None


# Each worker accepts one connection on the inherited socket, answers with its --workers value and
# its pid, then exits; the first exit must end the whole group.
WORKER = textwrap.dedent("""
    import os, socket, sys
    args = sys.argv[1:]
    sock = socket.socket(fileno=int(args[args.index("--listen-fd") + 1]))
    conn, _ = sock.accept()
    conn.sendall(f"{args[args.index('--workers') + 1]} {os.getpid()}".encode())
    conn.close()
    sys.exit(3)
""")


def test_supervisor_shares_one_socket_and_a_dying_worker_ends_the_group() -> None:
    sock = workers.listen("127.0.0.1", 0)
    port = sock.getsockname()[1]
    sup = workers.Supervisor([sys.executable, "-c", WORKER], 3, "127.0.0.1", port)
    # Connected before any worker runs: the connection waits in the shared socket's backlog.
    client = socket.create_connection(("127.0.0.1", port), timeout=30)
    status = sup.run(sock)
    answer = client.recv(100).decode()
    client.close()
    assert status == 3  # the first worker's exit status ends the group
    assert answer.split()[0] == "3"  # the worker was told how many share the rate
    with pytest.raises(OSError):  # every worker is gone and the socket closed
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


def test_listen_names_a_taken_port() -> None:
    from dralab.errors import UserError

    taken = workers.listen("127.0.0.1", 0)
    try:
        with pytest.raises(UserError, match="pick a free --port"):
            workers.listen("127.0.0.1", taken.getsockname()[1])
    finally:
        taken.close()


def test_each_worker_gets_its_own_socket_and_connections_reach_all_of_them() -> None:
    """One shared socket let the first worker in the kernel's wait queue take nearly every connection."""
    first = workers.listen("127.0.0.1", 0)
    second = workers.sibling(first)
    clients = []
    try:
        assert second is not first and second.getsockname() == first.getsockname()
        for _ in range(64):
            clients.append(socket.create_connection(first.getsockname(), timeout=5))
        counts = []
        for sock in (first, second):
            sock.setblocking(False)
            n = 0
            while True:
                try:
                    conn, _ = sock.accept()
                except BlockingIOError:
                    break
                conn.close()
                n += 1
            counts.append(n)
        assert sum(counts) == 64
        assert min(counts) > 0  # the kernel spread them (all 64 on one socket: chance 2**-63)
    finally:
        for c in clients:
            c.close()
        second.close()
        first.close()


def test_a_socket_bound_without_reuse_port_is_shared() -> None:
    plain = workers.listen("127.0.0.1", 0, reuse_port=False)
    try:
        assert workers.sibling(plain) is plain
    finally:
        plain.close()


def test_several_workers_without_leader_election_are_refused(tmp_path) -> None:
    from click.testing import CliRunner

    from dralab.webhook import certs
    from dralab.webhook.cli import serve

    _, cert, key = certs.write(tmp_path)
    result = CliRunner().invoke(serve, ["--cert", str(cert), "--key", str(key), "--workers", "2",
                                        "--no-leader-elect", "--kubeconfig", str(tmp_path / "none")])
    assert result.exit_code != 0
    assert "would run 2 janitors" in str(result.exception or result.output)


def test_another_child_of_the_embedding_process_is_not_taken_for_a_worker() -> None:
    """A test runner or an embedding program may have children of its own: their exit ends nothing."""
    other = subprocess.Popen([sys.executable, "-c", "raise SystemExit(1)"])
    os.waitid(os.P_PID, other.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped: first in line for os.wait
    sock = workers.listen("127.0.0.1", 0)
    port = sock.getsockname()[1]
    sup = workers.Supervisor([sys.executable, "-c", WORKER], 2, "127.0.0.1", port)
    client = socket.create_connection(("127.0.0.1", port), timeout=30)
    try:
        assert sup.run(sock) == 3  # a worker's status, not the other child's 1
    finally:
        client.close()
        assert other.wait() == 1  # still ours to reap
