"""Two webhook instances, each with two workers, against the real apiserver: one janitor among four candidates.

Every worker is a candidate for the same Lease; exactly one holds it and runs the janitor (its
``dralab_webhook_leader`` gauge is 1, everywhere else 0), and that one reaps an orphaned claim. When
the leading instance stops, it releases the Lease and the other instance takes over without waiting
for the lease to expire.
"""

from __future__ import annotations

import http.client
import os
import re
import signal
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from dralab.kube import Kube, KubeError
from dralab.kube.paths import claims_path
from dralab.util import free_port, wait_for
from dralab.webhook import certs
from dralab.webhook.controllers.janitor import CLAIM_SELECTOR
from dralab.webhook.controllers.lease import lease_path

from ..helpers import resource_claim

pytestmark = pytest.mark.integration

LEASE = "dralab-it-janitor"


class Instance:
    """One ``dralab webhook serve --workers 2`` (a supervisor and two workers), like one chart replica."""

    def __init__(self, name: str, workdir: Path, kubeconfig: str, namespace: str) -> None:
        self.name = name
        ca, cert, key = certs.write(workdir / name)
        self.ctx = ssl.create_default_context(cafile=str(ca))
        self.port = free_port()
        config = workdir / name / "config.yaml"
        # the test reads each worker's /metrics on loopback without a token
        config.write_text(yaml.safe_dump({"webhook": {"claimGracePeriodSeconds": 1, "metricsAuthorization": False}}))
        self.log = workdir / name / "webhook.log"
        argv = [sys.executable, "-m", "dralab.cli", "webhook", "serve", "--cert", str(cert), "--key", str(key),
                "--port", str(self.port), "--config", str(config), "--kubeconfig", kubeconfig,
                "--workers", "2", "--lease-name", LEASE, "--lease-namespace", namespace]
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                         env={**os.environ, "POD_NAME": name})

    def get(self, path: str) -> tuple[int, str]:
        if self.proc.poll() is not None:
            raise AssertionError(f"{self.name} exited {self.proc.returncode}: {self.log.read_text()[-3000:]}")
        try:
            conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=5)
            conn.request("GET", path)
            resp = conn.getresponse()
            return resp.status, resp.read().decode()
        except (OSError, ssl.SSLError):
            return 0, ""

    def leader(self) -> float | None:
        """The replica's ``dralab_webhook_leader`` (summed over its workers), None while it does not answer."""
        status, text = self.get("/metrics")
        if status != 200:
            return None
        found = re.search(r"^dralab_webhook_leader(?:\{[^}]*\})? ([0-9.e+-]+)$", text, re.M)
        return float(found.group(1)) if found else 0.0

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


@pytest.fixture
def instances(cluster, namespace: str, tmp_path: Path) -> Iterator[list[Instance]]:
    both = [Instance(n, tmp_path, str(cluster.kubeconfig), namespace) for n in ("replica-a", "replica-b")]
    yield both
    for inst in both:
        inst.stop()


def holder(api: Kube, namespace: str) -> str:
    try:
        return (api.get(lease_path(namespace, LEASE)).get("spec") or {}).get("holderIdentity") or ""
    except KubeError:
        return ""


def test_two_replicas_elect_one_janitor_and_hand_over_on_shutdown(cluster, namespace: str, instances) -> None:
    api = Kube.from_kubeconfig(cluster.kubeconfig)
    a, b = instances
    wait_for(lambda: a.leader() is not None and b.leader() is not None, 120, "both webhook replicas to serve")
    wait_for(lambda: holder(api, namespace), 60, "a worker to take the Lease")
    wait_for(lambda: (a.leader() or 0) + (b.leader() or 0) == 1, 60, "the leader's janitor to start")
    lead, other = (a, b) if a.leader() == 1 else (b, a)
    assert holder(api, namespace).startswith(f"{lead.name}_")
    assert other.leader() == 0
    lease = api.get(lease_path(namespace, LEASE))
    assert lease["spec"]["leaseDurationSeconds"] == 15

    # The janitor runs: an orphaned managed claim (no pod will ever use it) is reaped after the grace.
    labels = dict(kv.split("=") for kv in CLAIM_SELECTOR.split(","))
    orphan = resource_claim("orphan", "gpu.example.com")
    orphan["metadata"]["labels"] = labels
    api.create(claims_path(namespace), orphan)

    def reaped() -> bool:
        return api.get(claims_path(namespace, "orphan"), missing_ok=True) is None

    wait_for(reaped, 60, "the elected janitor to reap the orphaned claim")

    # The leader stops cleanly: it releases the Lease and the other replica leads without waiting
    # for expiry (its next try, every 2 s, finds the holder cleared).
    assert lead.stop() == 0
    wait_for(lambda: holder(api, namespace).startswith(f"{other.name}_"), 30, "the other replica to take the Lease")
    wait_for(lambda: other.leader() == 1, 30, "the new leader's janitor to start")
    assert api.get(lease_path(namespace, LEASE))["spec"]["leaseTransitions"] >= 1
    api.close()
