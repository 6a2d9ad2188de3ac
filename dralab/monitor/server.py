"""The monitor's HTTP endpoint: /metrics, /healthz and /readyz on a small threaded stdlib server."""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest


class MonitorServer:
    """Serves one registry; ``port=0`` picks a free port (read it back from :attr:`port`)."""

    def __init__(self, registry: CollectorRegistry, ready: Callable[[], bool], host: str, port: int) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
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

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self._thread: threading.Thread | None = None

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, code: int, body: bytes, content_type: str) -> None:
        handler.send_response(code)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(body)))
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
