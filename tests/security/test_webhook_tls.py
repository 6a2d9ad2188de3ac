"""Attack 9 (webhook part): certificate reload is atomic, and the webhook's API token is re-read.

A renewal that has written the new certificate but not yet the new key must leave the server serving
the old pair; once both are in place the new pair is served. The in-cluster bearer token is rotated by
the kubelet; the webhook must send the current one, not the one it read at start.
"""

from __future__ import annotations

import datetime
import http.server
import socket
import ssl
import threading
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509

from dralab.util import free_port
from dralab.webhook import certs
from dralab.webhook.tls import ReloadingTLS

from ._webhook import serve


def _served_cert(port: int) -> x509.Certificate:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, ctx.wrap_socket(raw) as tls:
        der = tls.getpeercert(binary_form=True)
    return x509.load_der_x509_certificate(der)


def test_half_written_renewal_keeps_serving_the_old_pair(tmp_path: Path) -> None:
    with serve(tmp_path / "a") as s:
        old = x509.load_pem_x509_certificate(s.cert.read_bytes())
        _, new_cert, new_key = certs.write(tmp_path / "b")
        s.cert.write_bytes(new_cert.read_bytes())  # the key is not written yet
        assert s.server.tls.check() is False
        for _ in range(3):  # every new handshake still works and presents the old certificate
            assert _served_cert(s.port).serial_number == old.serial_number
        s.key.write_bytes(new_key.read_bytes())
        assert s.server.tls.check() is True
        assert _served_cert(s.port).serial_number == x509.load_pem_x509_certificate(new_cert.read_bytes()).serial_number


def test_reload_builds_a_fresh_context(tmp_path: Path) -> None:
    _, cert, key = certs.write(tmp_path / "a")
    tls = ReloadingTLS(cert, key)
    before = tls.context
    _, new_cert, new_key = certs.write(tmp_path / "b")
    cert.write_bytes(new_cert.read_bytes())
    assert tls.check() is False and tls.context is before  # mismatched pair: untouched
    key.write_bytes(new_key.read_bytes())
    assert tls.check() is True and tls.context is not before


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: list[str] = []

    def do_GET(self) -> None:
        type(self).seen.append(self.headers.get("Authorization", ""))
        body = b'{"kind":"Status","apiVersion":"v1","metadata":{}}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def fake_service_account(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """An in-cluster environment (service host, CA, token file) pointing at a local HTTPS recorder."""
    ca, cert, key = certs.write(tmp_path)
    port = free_port()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), _Recorder)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(cert), str(key))
    httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    token = tmp_path / "token"
    token.write_text("first-token")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(port))
    from kubernetes.config import incluster_config  # dralab.kube's in-cluster loader reads these

    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(ca))
    _Recorder.seen = []
    yield token, _Recorder.seen
    httpd.shutdown()
    httpd.server_close()


def test_webhook_api_sends_the_rotated_token(fake_service_account) -> None:
    from dralab.kube import Kube

    token, seen = fake_service_account
    api = Kube.from_kubeconfig(None)
    try:
        api.get("/api/v1/namespaces/default")
        token.write_text("rotated-token")
        api.get("/api/v1/namespaces/default")
    finally:
        api.close()
    assert [h.lower() for h in seen] == ["bearer first-token", "bearer rotated-token"], seen


def test_webhook_async_api_sends_the_rotated_token(fake_service_account) -> None:
    import anyio

    from dralab.kube import AsyncKube

    token, seen = fake_service_account

    async def go() -> None:
        api = AsyncKube(None)
        try:
            await api.get("/api/v1/namespaces/default")
            token.write_text("rotated-token")
            await api.get("/api/v1/namespaces/default")
        finally:
            await api.close()

    anyio.run(go)
    assert [h.lower() for h in seen] == ["bearer first-token", "bearer rotated-token"], seen


def test_client_ca_requires_the_apiservers_certificate(tmp_path: Path) -> None:
    """Optional mutual TLS: with --client-ca only a caller holding a certificate from that CA is answered."""
    import httpx

    from dralab import tls as pki

    client_dir = tmp_path / "client"
    client_dir.mkdir()
    day = datetime.timedelta(days=1)
    ca_cert, ca_key = pki.make_ca("apiserver-client-ca", day, path_length=0)
    cert, key = pki.issue(ca_cert, ca_key, "kube-apiserver", day, client=True)
    client_ca = client_dir / "ca.crt"
    client_ca.write_bytes(pki.cert_pem(ca_cert))
    pki.write_pem(client_dir / "tls.crt", client_dir / "tls.key", pki.cert_pem(cert), pki.key_pem(key))
    with serve(tmp_path / "server", server_kwargs={"client_ca": client_ca}) as s:
        with pytest.raises((httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError)), s.client(timeout=5) as c:
            c.get(f"{s.url}/healthz")
        ctx = ssl.create_default_context(cafile=str(s.ca))
        ctx.load_cert_chain(str(client_dir / "tls.crt"), str(client_dir / "tls.key"))
        with httpx.Client(verify=ctx, timeout=5) as c:
            assert c.get(f"{s.url}/healthz").text == "ok"


def test_client_ca_reload_applies_to_the_next_handshake(tmp_path: Path) -> None:
    """The listener moves every handshake onto the current context: a rotated client CA is the one checked."""
    import httpx

    from dralab import tls as pki

    day = datetime.timedelta(days=1)

    def client_pair(name: str) -> tuple[bytes, Path, Path]:
        ca_cert, ca_key = pki.make_ca(f"{name}-ca", day, path_length=0)
        cert, key = pki.issue(ca_cert, ca_key, "kube-apiserver", day, client=True)
        folder = tmp_path / name
        folder.mkdir()
        pki.write_pem(folder / "tls.crt", folder / "tls.key", pki.cert_pem(cert), pki.key_pem(key))
        return pki.cert_pem(ca_cert), folder / "tls.crt", folder / "tls.key"

    old_ca, old_cert, old_key = client_pair("old")
    new_ca, new_cert, new_key = client_pair("new")
    client_ca = tmp_path / "client-ca.crt"
    client_ca.write_bytes(old_ca)

    def answered(s: Any, cert: Path, key: Path) -> bool:
        ctx = ssl.create_default_context(cafile=str(s.ca))
        ctx.load_cert_chain(str(cert), str(key))
        try:
            with httpx.Client(verify=ctx, timeout=5) as c:
                return c.get(f"{s.url}/healthz").text == "ok"
        except (httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError):
            return False

    with serve(tmp_path / "server", server_kwargs={"client_ca": client_ca}) as s:
        assert answered(s, old_cert, old_key) and not answered(s, new_cert, new_key)
        client_ca.write_bytes(new_ca)
        assert s.server.tls.check() is True
        assert answered(s, new_cert, new_key) and not answered(s, old_cert, old_key)


def test_the_server_runs_on_uvloop(tmp_path: Path) -> None:
    """uvloop is a dependency on Linux; the handshake deadline above is uvloop's (the transport tests run on it)."""
    with serve(tmp_path) as s:
        assert type(s.server.server.servers[0]).__module__.startswith("uvloop")
