"""A scripted apiserver over real mutual TLS: it records every request and answers from a script.

Only the apiserver is replaced, and only by a small HTTP server: the client under test runs its real
loader, TLS context, connection pool and watch code against it.
"""

from __future__ import annotations

import contextlib
import json
import ssl
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from dralab_kit.cluster.kubeconfig import render_kubeconfig
from dralab_kit.cluster.pki import ensure_pki


@dataclass
class Seen:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes
    client_cn: str
    connection: int = 0  # the client's port: requests on one kept-alive connection share it


Answer = tuple[int, Any] | list[dict[str, Any]]  # (status, JSON body) or a watch stream of events


@dataclass
class Held:
    """A watch stream that sends ``events`` and then stays open until ``release`` is set."""

    events: list[dict[str, Any]]
    release: threading.Event = field(default_factory=threading.Event)


@dataclass
class Script:
    """Answers by (method, path): a list is consumed in order, its last entry then repeats."""

    routes: dict[tuple[str, str], list[Any]] = field(default_factory=dict)
    seen: list[Seen] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    close_connections: bool = False  # close each connection after its answer, as after the apiserver's idle 90 s

    def connections(self) -> int:
        """How many connections the requests seen so far came on."""
        with self.lock:
            return len({s.connection for s in self.seen})

    def on(self, method: str, path: str, *answers: Any) -> None:
        self.routes[(method, path)] = list(answers)

    def answer(self, method: str, path: str, query: dict[str, str]) -> Any:
        key = (method, path) if "watch" not in query else ("WATCH", path)
        with self.lock:
            answers = self.routes.get(key)
            if not answers:
                return (404, {"kind": "Status", "reason": "NotFound", "message": f"{path} not found", "code": 404})
            return answers.pop(0) if len(answers) > 1 else answers[0]

    def requests(self, method: str | None = None) -> list[Seen]:
        with self.lock:
            return [s for s in self.seen if method is None or s.method == method]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    script: Script

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that closed its stream (a stopped watch) is expected; anything else is reported."""
        import sys

        if not isinstance(sys.exc_info()[1], (OSError, ssl.SSLError)):
            super().handle_error(request, client_address)


def _handler() -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self) -> None:
            url = urlsplit(self.path)
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            peer = self.connection.getpeercert() or {}
            cn = next((v for rdn in peer.get("subject", ()) for k, v in rdn if k == "commonName"), "")
            server: _Server = self.server  # type: ignore[assignment]
            with server.script.lock:
                server.script.seen.append(Seen(self.command, url.path, query, dict(self.headers), body, cn,
                                               self.client_address[1]))
            answer = server.script.answer(self.command, url.path, query)
            if callable(answer):
                answer = answer(query)
            if isinstance(answer, (list, Held)):  # a watch stream, ended by the server
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for event in answer.events if isinstance(answer, Held) else answer:
                    data = json.dumps(event).encode() + b"\n"
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                    self.wfile.flush()
                if isinstance(answer, Held):
                    answer.release.wait(120)
                with contextlib.suppress(OSError):  # the client may have closed the stream first
                    self.wfile.write(b"0\r\n\r\n")
                return
            status, payload = answer
            data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if server.script.close_connections:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

        def log_message(self, *args: object) -> None:
            return

    return Handler


@dataclass
class FakeApiserver:
    script: Script
    url: str
    kubeconfig: Path
    ca: Path


@pytest.fixture
def apiserver(tmp_path: Path) -> Iterator[FakeApiserver]:
    """The scripted apiserver, requiring a client certificate, and an embedded-data kubeconfig for it."""
    pki = ensure_pki(tmp_path / "pki")
    with serving(tmp_path, pki.cert("apiserver"), pki.key("apiserver")) as served:
        yield served


@pytest.fixture
def misnamed_apiserver(tmp_path: Path) -> Iterator[FakeApiserver]:
    """The scripted apiserver at 127.0.0.1 with a certificate from the right CA for another name only."""
    from dralab import tls
    from dralab_kit.cluster.pki import VALIDITY

    pki = ensure_pki(tmp_path / "pki")
    ca_cert, ca_key = tls.load_ca(pki.ca_cert.read_bytes(), pki.ca_key.read_bytes())
    cert, key = tls.issue(ca_cert, ca_key, "elsewhere", VALIDITY, hosts=("elsewhere.invalid",), server=True)
    (tmp_path / "elsewhere.crt").write_bytes(tls.cert_pem(cert))
    (tmp_path / "elsewhere.key").write_bytes(tls.key_pem(key))
    with serving(tmp_path, tmp_path / "elsewhere.crt", tmp_path / "elsewhere.key") as served:
        yield served


@contextlib.contextmanager
def serving(tmp_path: Path, cert: Path, key: Path) -> Iterator[FakeApiserver]:
    """The scripted apiserver on 127.0.0.1 serving ``cert``, requiring a client certificate of the PKI's CA."""
    pki = ensure_pki(tmp_path / "pki")
    server = _Server(("127.0.0.1", 0), _handler())
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(cert), str(key))
    ctx.load_verify_locations(str(pki.ca_cert))
    ctx.verify_mode = ssl.CERT_REQUIRED
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    server.script = Script()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"https://127.0.0.1:{server.server_address[1]}"
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(render_kubeconfig(
        "t", url, pki.ca_cert.read_bytes(), pki.cert("admin").read_bytes(), pki.key("admin").read_bytes()))
    try:
        yield FakeApiserver(server.script, url, kubeconfig, pki.ca_cert)
    finally:
        server.shutdown()
        server.server_close()


Handler = Callable[[dict[str, str]], Answer]
