"""Scratch calibration: what a new TLS connection adds to one of the driver's API calls, in its own thread's CPU.

Why: the apiserver closes a connection idle for 90 s, and in a large fleet a node's driver calls it less
often than that, so each call may open a connection (README "Scale", item 23). This measures the
driver's client (``dralab.kube.Kube``: the shared TLS context, a client certificate, urllib3's pool)
GETting a claim from the unit tests' scripted apiserver on loopback (the kit's PKI, ECDSA P-256, mutual
TLS; ``tests/unit/kube/conftest.py``): calls on one
kept connection against calls whose answer closes the connection, so the next opens another, either with a
full handshake (the session of the closed one forgotten first) or resuming that session, as the client
does since ``dralab.kube.tls`` (the kinds ``full`` and ``resumed``; ``new`` in the run before it). The server
runs in this process but on its own threads; only the calling thread's CPU is counted. Rounds alternate,
kept first, so each kind is measured twice and the machine's drift shows. Not a `dralab bench`: no
target, one run, kept with its output for README "Scale".

    PYTHONPATH=. .venv/bin/python bench/scratch/handshake_cost.py --calls 300 \
        --out bench/results/scratch/handshake-cost.json   # PYTHONPATH: the repository root, for tests.unit
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from dralab.kube import Kube
from dralab.kube.paths import claim_path
from dralab.kube.tls import ResumingContext
from dralab_kit.cluster.pki import ensure_pki
from dralab_kit.fixtures.driver_claims import CLAIM_A, NAMESPACE, lab20_claim
from tests.unit.kube.conftest import FakeApiserver, serving  # the unit tests' scripted apiserver over mutual TLS

ROUNDS = ("kept", "full", "resumed", "kept", "full", "resumed")


def measure(kube: Kube, server: FakeApiserver, kind: str, calls: int) -> dict[str, Any]:
    """Thread CPU per GET of one claim, ``calls`` times, on kept connections or a new one each (the server
    closes each connection after its answer, as the apiserver does after 90 s idle); ``full`` forgets the
    closed connection's session before each call, outside the clock."""
    path = claim_path(NAMESPACE, CLAIM_A)
    server.script.close_connections = kind != "kept"
    shared = kube.config.ssl_context(verify_hostname=False)
    before = kube.config.handshakes(), kube.config.resumed_handshakes()
    spent = []
    for _ in range(calls):
        if kind == "full" and isinstance(shared, ResumingContext):
            shared.last_session = None
        t = time.thread_time()
        kube.get(path)
        spent.append(time.thread_time() - t)
    return {"kind": kind, "calls": calls, "handshakes": kube.config.handshakes() - before[0],
            "resumed": kube.config.resumed_handshakes() - before[1],
            "ms": {"mean": round(1e3 * statistics.mean(spent), 3), "p50": round(1e3 * statistics.median(spent), 3)}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="handshake", dir="/tmp"))
    try:
        pki = ensure_pki(root / "pki")
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
        result: dict[str, Any] = {"measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "commit": commit,
                                  "cpus": os.cpu_count(), "loadavg_before": os.getloadavg()}
        with serving(root, pki.cert("apiserver"), pki.key("apiserver")) as server:
            server.script.on("GET", claim_path(NAMESPACE, CLAIM_A), (200, lab20_claim()))
            with Kube.from_kubeconfig(str(server.kubeconfig), timeout=10.0, user_agent="dralab-driver") as kube:
                measure(kube, server, "kept", 20)  # warm: the first connection, the pool, the interpreter's caches
                result["runs"] = [measure(kube, server, kind, args.calls) for kind in ROUNDS]
        result["loadavg_after"] = os.getloadavg()
        p50 = {kind: statistics.mean(r["ms"]["p50"] for r in result["runs"] if r["kind"] == kind) for kind in ROUNDS}
        result["new_connection_adds_ms_p50"] = round(p50["full"] - p50["kept"], 3)
        result["resumed_connection_adds_ms_p50"] = round(p50["resumed"] - p50["kept"], 3)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: result[k] for k in ("runs", "new_connection_adds_ms_p50", "resumed_connection_adds_ms_p50")}))


if __name__ == "__main__":
    main()
