"""Attacks on the driver's status endpoint (``/metrics``, ``/healthz``, ``/readyz``).

Before the fix every connection got its own thread and no timeout (200 idle connections left 202
threads), and ``/healthz`` sent an empty NodePrepareResources through the DRA socket, so it queued
behind the kubelet's calls on their worker pool and a busy driver looked dead to its probe.
"""

from __future__ import annotations

import http.client
import shutil
import socket
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from dralab.driver import metrics as metrics_module
from dralab.driver.claims import InMemoryClaimSource
from dralab.driver.library import stub_library
from dralab.driver.metrics import DriverMetrics, StatusServer
from dralab.driver.proto import dra_v1_pb2, dra_v1_pb2_grpc
from dralab.driver.runner import DriverProcess, RunOptions
from dralab_kit.fixtures.driver_claims import NODE, lab20_claim
from dralab_kit.fixtures.sandbox import Sandbox

IDLE = 200
# Long enough never to fire on a healthy run, short enough that a hung test fails instead of hanging.
GIVE_UP_S = 30.0


def _get(port: int, path: str) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=GIVE_UP_S)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read().decode()
    finally:
        conn.close()


@pytest.fixture
def status(monkeypatch) -> Iterator[StatusServer]:
    monkeypatch.setattr(metrics_module, "REQUEST_TIMEOUT_S", 0.5, raising=False)
    server = StatusServer(DriverMetrics(), lambda: (True, "ok"), lambda: (True, "ok"), port=0)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_idle_connections_do_not_take_a_thread_each(status: StatusServer) -> None:
    before = threading.active_count()
    idle = [socket.create_connection(("127.0.0.1", status.port), timeout=GIVE_UP_S) for _ in range(IDLE)]
    try:
        # Accepted in order: once a later connection is answered, the idle ones were all accepted.
        assert _get(status.port, "/metrics")[0] == 200
        grown = threading.active_count() - before
    finally:
        for s in idle:
            s.close()
    assert grown < 16, f"{IDLE} idle connections made {grown} threads"


@pytest.mark.parametrize("sent", [b"", b"GET /metrics HTTP/1.1\r\nHost: x\r\n"], ids=["idle", "trickle"])
def test_connection_that_never_completes_a_request_is_closed(status: StatusServer, sent: bytes) -> None:
    with socket.create_connection(("127.0.0.1", status.port), timeout=GIVE_UP_S) as conn:
        conn.sendall(sent)
        data = b""
        while chunk := conn.recv(4096):  # the server hangs up (a 408 at most) instead of waiting forever
            data += chunk
    assert data == b"" or data.startswith(b"HTTP/1.1 408"), data[:80]


class BlockingClaims(InMemoryClaimSource):
    """A claim source whose reads wait until released: the kubelet's calls occupy every DRA worker."""

    def __init__(self, claims: list[dict[str, Any]]) -> None:
        super().__init__(claims)
        self.release = threading.Event()
        self.entered = threading.Semaphore(0)

    def get_claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.entered.release()
        self.release.wait(GIVE_UP_S)
        return super().get_claim(namespace, name)


def test_healthz_answers_while_the_kubelets_pool_is_busy() -> None:
    root = Path(tempfile.mkdtemp(prefix="dhz", dir="/tmp"))
    workers = 8
    uids = [f"uid-busy-{i}" for i in range(workers)]
    source = BlockingClaims([lab20_claim(uid=u, name=u) for u in uids])
    try:
        with Sandbox(root):
            lib = root / "lib" / "libvcore.so"
            lib.parent.mkdir()
            lib.write_bytes(stub_library())  # an ELF header the driver accepts
            opts = RunOptions(node=NODE, backend="fake", plugin_dir=str(root / "p"), registry_dir=str(root / "r"),
                              cdi_dir=str(root / "cdi"), state_dir=str(root / "s"), enforcement_library=str(lib),
                              publish=False, metrics_port=0, metrics_authorization=False)
            proc = DriverProcess(opts, claims=source).start()  # type: ignore[arg-type]
            try:
                with grpc.insecure_channel(f"unix://{proc.served[0].server.paths.dra}") as ch:
                    stub = dra_v1_pb2_grpc.DRAPluginStub(ch)
                    calls = [
                        stub.NodePrepareResources.future(
                            dra_v1_pb2.NodePrepareResourcesRequest(
                                claims=[dra_v1_pb2.Claim(namespace="dra-ascend-e2e", name=u, uid=u)]
                            ),
                            timeout=GIVE_UP_S * 2,
                        )
                        for u in uids
                    ]
                    for _ in uids:  # every worker of the DRA pool is inside a Prepare
                        assert source.entered.acquire(timeout=GIVE_UP_S)
                    code, body = _get(proc.status.port, "/healthz")
                    source.release.set()
                    answers = [c.result() for c in calls]
            finally:
                source.release.set()
                proc.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    assert code == 200, body
    assert all(not a.claims[u].error for a, u in zip(answers, uids, strict=True))
