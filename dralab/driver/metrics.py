"""Driver metrics and the small HTTP endpoint that serves ``/metrics``, ``/healthz`` and ``/readyz``."""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class DriverMetrics:
    """All driver metrics, in their own registry (several drivers can live in one test process)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.calls = Counter(
            "dralab_driver_calls_total",
            "NodePrepare/NodeUnprepare claims handled",
            ["driver", "call", "result"],
            registry=r,
        )
        self.duration = Histogram(
            "dralab_driver_call_duration_seconds",
            "Duration of one NodePrepareResources/NodeUnprepareResources gRPC call",
            ["driver", "call"],
            buckets=_BUCKETS,
            registry=r,
        )
        self.errors = Counter(
            "dralab_driver_errors_total", "Claim errors by reason", ["driver", "call", "reason"], registry=r
        )
        self.prepared = Gauge("dralab_driver_prepared_claims", "Claims currently prepared", ["driver"], registry=r)
        self.quarantined = Counter(
            "dralab_driver_checkpoint_quarantined_total",
            "Corrupt checkpoints moved aside and rebuilt",
            ["driver"],
            registry=r,
        )
        self.publishes = Counter(
            "dralab_driver_slice_publishes_total", "ResourceSlice publications", ["driver", "result"], registry=r
        )
        self.generation = Gauge("dralab_driver_pool_generation", "Published pool generation", ["driver"], registry=r)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class StatusServer:
    """``/metrics`` (Prometheus text), ``/healthz`` (gRPC sockets answer) and ``/readyz`` (registered and published)."""

    def __init__(
        self,
        metrics: DriverMetrics,
        healthy: Callable[[], tuple[bool, str]],
        ready: Callable[[], tuple[bool, str]],
        port: int,
        host: str = "127.0.0.1",
    ) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/metrics":
                    self._send(200, outer.metrics.render(), CONTENT_TYPE_LATEST)
                elif self.path in ("/healthz", "/readyz"):
                    ok, detail = (outer.healthy if self.path == "/healthz" else outer.ready)()
                    self._send(200 if ok else 503, (detail + "\n").encode(), "text/plain")
                else:
                    self._send(404, b"not found\n", "text/plain")

            def _send(self, code: int, body: bytes, ctype: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return

        self.metrics = metrics
        self.healthy = healthy
        self.ready = ready
        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.port = int(self.httpd.server_address[1])
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.1}, name="driver-status", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
