"""Process entry of the kubelet stand-in: arguments, /healthz /readyz /metrics, signals."""

from __future__ import annotations

import argparse
import signal
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, generate_latest

from dralab.kube import Kube
from dralab.util import get_logger
from dralab_kit.cluster.standin.runner import StandIn

log = get_logger("dralab.standin")


def _metrics(standin_ref: list[StandIn]) -> tuple[CollectorRegistry, object]:
    registry = CollectorRegistry()
    calls = Counter(
        "dralab_standin_events", "Stand-in events by kind (DRA calls and their outcome)", ["what"], registry=registry
    )
    plugins = Gauge("dralab_standin_registered_plugins", "DRA drivers registered on this node", registry=registry)
    prepared = Gauge("dralab_standin_prepared_claims", "Claims prepared on this node", registry=registry)
    plugins.set_function(lambda: len(standin_ref[0].plugins.snapshot()) if standin_ref else 0)
    prepared.set_function(lambda: len(standin_ref[0].checkpoint.claims) if standin_ref else 0)
    return registry, lambda what: calls.labels(what).inc()


def _server(port: int, registry: CollectorRegistry, standin_ref: list[StandIn]) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.startswith("/metrics"):
                body, ctype, code = generate_latest(registry), CONTENT_TYPE_LATEST, 200
            elif self.path.startswith("/healthz"):
                body, ctype, code = b"ok", "text/plain", 200
            elif self.path.startswith("/readyz"):
                ready = bool(standin_ref) and standin_ref[0].ready.is_set()
                body, ctype, code = (b"ok", "text/plain", 200) if ready else (b"starting", "text/plain", 503)
            else:
                body, ctype, code = b"not found", "text/plain", 404
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    return server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="dralab-kubelet-standin", description=__doc__)
    parser.add_argument("--node", required=True)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument(
        "--node-dir", required=True, type=Path, help="holds registry/, plugins/, the checkpoint and records"
    )
    parser.add_argument("--port", type=int, default=0, help="serve /healthz, /readyz, /metrics (0: none)")
    parser.add_argument("--slice-cleanup-seconds", type=float, default=30.0)
    args = parser.parse_args(argv)

    args.node_dir.mkdir(parents=True, exist_ok=True)
    (args.node_dir / "registry").mkdir(exist_ok=True)
    ref: list[StandIn] = []
    registry, hook = _metrics(ref)
    server = _server(args.port, registry, ref) if args.port else None
    kube = Kube.from_kubeconfig(args.kubeconfig)
    standin = StandIn(args.node, kube, args.node_dir, args.slice_cleanup_seconds, metrics=hook)
    ref.append(standin)

    def _stop(signum: int, frame: object) -> None:
        standin.stop()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    log.info("kubelet stand-in starting", extra={"fields": {"node": args.node, "dir": str(args.node_dir)}})
    try:
        standin.run()
    finally:
        if server is not None:
            server.shutdown()
        kube.close()
    log.info("kubelet stand-in stopped", extra={"fields": {"node": args.node}})


if __name__ == "__main__":
    main()
