"""Attack surface: a driver that keeps a service-account token after the kubelet rotated it.

Bound service-account tokens expire (an hour by default); the kubelet writes a new one into the
projected volume. Before the fix the driver's client copied the token once at start, so an
in-cluster driver kept sending the old (eventually expired or revoked) token. The apiserver here is
a small TLS server that records the Authorization header of each request.
"""

from __future__ import annotations

import json
import os
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from kubernetes.config import incluster_config

from dralab.kube import Kube
from dralab.webhook import certs


class Recorder(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, cert: Path, key: Path) -> None:
        self.seen: list[str] = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.server.seen.append(self.headers.get("Authorization", ""))  # type: ignore[attr-defined]
                body = json.dumps({"kind": "Status", "ok": True}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return

        super().__init__(("127.0.0.1", 0), Handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(cert), str(key))
        self.socket = ctx.wrap_socket(self.socket, server_side=True)


@pytest.fixture
def apiserver(tmp_path: Path) -> Iterator[tuple[Recorder, Path]]:
    ca, cert, key = certs.write(tmp_path / "pki", ["127.0.0.1"])
    server = Recorder(cert, key)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server, ca
    finally:
        server.shutdown()
        server.server_close()


def _rotate(path: Path, token: str) -> None:
    """What the kubelet does: a new file swapped in atomically."""
    tmp = path.with_name(path.name + ".new")
    tmp.write_text(token)
    os.replace(tmp, path)


def test_in_cluster_client_sends_the_rotated_token(apiserver, tmp_path: Path, monkeypatch) -> None:
    server, ca = apiserver
    token = tmp_path / "token"
    token.write_text("first-token")
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(ca))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(server.server_address[1]))

    client = Kube.from_kubeconfig()  # no kubeconfig: the in-cluster service account
    try:
        client.get("/version")
        _rotate(token, "second-token")
        client.get("/version")
    finally:
        client.close()

    assert server.seen == ["Bearer first-token", "Bearer second-token"]
