"""The monitor's HTTP endpoint: /metrics, /healthz and /readyz on a small threaded stdlib server.

The gauges name every namespace's and pod's device shares, so with an authorizer
(:mod:`dralab.kube.authz`, ``--metrics-authorization``) ``/metrics`` answers only callers the cluster
allows; the probes stay open (the kubelet sends no token). With a certificate and key it serves HTTPS
(the pair reloads when the files change, as the webhook's: :class:`dralab.webhook.tls.ReloadingTLS`);
without, plain HTTP, where a scraper's bearer token crosses the network unencrypted (SECURITY.md).
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from dralab.kube.authz import MetricsAuthorizer

REQUEST_TIMEOUT_S = 10.0  # a connection's TLS handshake and each read; an idle one is closed after this
RELOAD_INTERVAL_S = 1.0  # at most this often a connection checks whether the certificate files changed


class _Server(ThreadingHTTPServer):
    """Accepts plain sockets; with ``tls`` each is wrapped in its own thread (a slow handshake holds no one up)."""

    daemon_threads = True
    tls: Any = None
    _checked = 0.0
    _reload_lock = threading.Lock()

    def finish_request(self, request: Any, client_address: Any) -> None:
        if self.tls is None:
            super().finish_request(request, client_address)
            return
        self._maybe_reload()
        request.settimeout(REQUEST_TIMEOUT_S)
        try:
            conn = self.tls.listener.wrap_socket(request, server_side=True)
        except (OSError, ssl.SSLError):
            return  # not TLS, or gone: the socket is closed by shutdown_request
        try:
            self.RequestHandlerClass(conn, client_address, self)  # type: ignore[arg-type]  # typeshed: Self, unbound here
        finally:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()

    def _maybe_reload(self) -> None:
        now = time.monotonic()
        if now - self._checked < RELOAD_INTERVAL_S or not self._reload_lock.acquire(blocking=False):
            return
        try:
            self._checked = now
            self.tls.check()
        finally:
            self._reload_lock.release()


class MonitorServer:
    """Serves one registry; ``port=0`` picks a free port (read it back from :attr:`port`).

    ``metrics_auth``: who may read ``/metrics`` (None: anyone, ``--no-metrics-authorization``);
    ``tls_cert`` and ``tls_key``: serve HTTPS with this pair (reloaded when it changes).
    """

    def __init__(
        self,
        registry: CollectorRegistry,
        ready: Callable[[], bool],
        host: str,
        port: int,
        metrics_auth: MetricsAuthorizer | None = None,
        tls_cert: str | Path | None = None,
        tls_key: str | Path | None = None,
    ) -> None:
        outer = self
        self.metrics_auth = metrics_auth

        class Handler(BaseHTTPRequestHandler):
            timeout = REQUEST_TIMEOUT_S

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    auth = outer.metrics_auth
                    decision = None if auth is None else auth.check(self.headers.get("Authorization"))
                    if decision is not None and not decision.allowed:
                        outer._send(self, decision.status, (decision.reason + "\n").encode(), "text/plain",
                                    decision.headers())
                    else:
                        outer._send(self, 200, generate_latest(registry), CONTENT_TYPE_LATEST)
                elif path == "/healthz":
                    outer._send(self, 200, b"ok", "text/plain")
                elif path == "/readyz":
                    ok = ready()
                    outer._send(self, 200 if ok else 503, b"ok" if ok else b"not ready: caches syncing", "text/plain")
                else:
                    outer._send(self, 404, b"not found: try /metrics", "text/plain")

            def log_message(self, format: str, *args: object) -> None:
                return

        self.httpd = _Server((host, port), Handler)
        if tls_cert or tls_key:
            if not (tls_cert and tls_key):
                from dralab.errors import UserError

                raise UserError("serving HTTPS needs both a certificate and its key (--tls-cert and --tls-key)")
            from dralab.webhook.tls import ReloadingTLS

            self.httpd.tls = ReloadingTLS(tls_cert, tls_key)
            self.httpd._reload_lock = threading.Lock()
        self.scheme = "https" if self.httpd.tls is not None else "http"
        self.port = self.httpd.server_address[1]
        self._thread: threading.Thread | None = None

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, code: int, body: bytes, content_type: str,
              headers: dict[str, str] | None = None) -> None:
        handler.send_response(code)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(body)

    def serve_forever(self) -> None:
        self.httpd.serve_forever()

    def start_in_thread(self) -> None:
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="monitor-http", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
