"""Scratch calibration: what a new TLS connection adds to one of the driver's API calls, in its own thread's CPU.

Why: the apiserver closes a connection idle for 90 s, and in a large fleet a node's driver calls it less
often than that, so each call may open a connection (README "Scale", item 23). This measures the
driver's client (``dralab.kube.Kube``: the shared TLS context, a client certificate, urllib3's pool)
GETting a claim from a TLS server on loopback (the kit's PKI, ECDSA P-256, mutual TLS): calls on one
kept connection against calls whose answer closes the connection, so the next opens another. The server
runs in this process but on its own threads; only the calling thread's CPU is counted. Rounds alternate,
kept first, so each kind is measured twice and the machine's drift shows. Not a `dralab bench`: no
target, one run, kept with its output for README "Scale".

    .venv/bin/python bench/scratch/handshake_cost.py --calls 300 --out bench/results/scratch/handshake-cost.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from dralab.jsonio import dumps
from dralab.kube import Kube
from dralab.kube.paths import claim_path
from dralab_kit.cluster.kubeconfig import render_kubeconfig
from dralab_kit.cluster.pki import ensure_pki
from dralab_kit.fixtures.driver_claims import CLAIM_A, NAMESPACE, lab20_claim

ROUNDS = ("kept", "new", "kept", "new")
CLOSING = "?close=1"  # the server ends the connection after this answer, as after the apiserver's idle 90 s


def _server(cert: Path, key: Path, ca: Path) -> ThreadingHTTPServer:
    import ssl

    body = dumps(lab20_claim())

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            if self.path.endswith(CLOSING):
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(cert), str(key))
    ctx.load_verify_locations(str(ca))
    ctx.verify_mode = ssl.CERT_REQUIRED
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def measure(kube: Kube, kind: str, calls: int) -> dict[str, Any]:
    """Thread CPU per GET of one claim, ``calls`` times, on kept connections or a new one each."""
    path = claim_path(NAMESPACE, CLAIM_A) + (CLOSING if kind == "new" else "")
    before = kube.config.handshakes()
    spent = []
    for _ in range(calls):
        t = time.thread_time()
        kube.get(path)
        spent.append(time.thread_time() - t)
    return {"kind": kind, "calls": calls, "handshakes": kube.config.handshakes() - before,
            "ms": {"mean": round(1e3 * statistics.mean(spent), 3), "p50": round(1e3 * statistics.median(spent), 3)}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="handshake", dir="/tmp"))
    try:
        pki = ensure_pki(root / "pki")
        server = _server(pki.cert("apiserver"), pki.key("apiserver"), pki.ca_cert)
        kubeconfig = root / "kubeconfig"
        kubeconfig.write_text(render_kubeconfig("scratch", f"https://127.0.0.1:{server.server_address[1]}",
                                                pki.ca_cert.read_bytes(), pki.cert("admin").read_bytes(),
                                                pki.key("admin").read_bytes()))
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
        result: dict[str, Any] = {"measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "commit": commit,
                                  "cpus": os.cpu_count(), "loadavg_before": os.getloadavg()}
        with Kube.from_kubeconfig(str(kubeconfig), timeout=10.0, user_agent="dralab-driver") as kube:
            measure(kube, "kept", 20)  # warm: the first connection, the pool, the interpreter's caches
            result["runs"] = [measure(kube, kind, args.calls) for kind in ROUNDS]
        server.shutdown()
        result["loadavg_after"] = os.getloadavg()
        p50 = {kind: statistics.mean(r["ms"]["p50"] for r in result["runs"] if r["kind"] == kind) for kind in ROUNDS}
        result["new_connection_adds_ms_p50"] = round(p50["new"] - p50["kept"], 3)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: result[k] for k in ("runs", "new_connection_adds_ms_p50")}))


if __name__ == "__main__":
    main()
