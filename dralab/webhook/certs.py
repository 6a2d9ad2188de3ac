"""Self-signed serving certificates for the webhook where no cert-manager issues them.

The local cluster, the tests and the benchmark need a CA bundle for the webhook registration
and a serving certificate for the server; this makes both (ECDSA P-256, SANs for the names
and addresses given).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

from dralab import tls
from dralab.util import atomic_write


@dataclass(frozen=True)
class ServingCert:
    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes


def generate(hosts: list[str] | None = None, days: int = 365, common_name: str = "dralab-webhook") -> ServingCert:
    """A fresh CA and a serving certificate it signed for ``hosts`` (default: localhost, 127.0.0.1)."""
    hosts = hosts or ["localhost", "127.0.0.1"]
    validity = dt.timedelta(days=days)
    now = dt.datetime.now(dt.UTC)
    ca_cert, ca_key = tls.make_ca(f"{common_name}-ca", validity, path_length=0, now=now)
    cert, key = tls.issue(ca_cert, ca_key, common_name, validity, hosts=hosts, server=True, now=now)
    return ServingCert(ca_pem=tls.cert_pem(ca_cert), cert_pem=tls.cert_pem(cert), key_pem=tls.key_pem(key))


def write(directory: str | Path, hosts: list[str] | None = None) -> tuple[Path, Path, Path]:
    """Generate and write ``ca.crt``, ``tls.crt``, ``tls.key`` under ``directory``; returns their paths."""
    d = Path(directory)
    made = generate(hosts)
    paths = (d / "ca.crt", d / "tls.crt", d / "tls.key")
    atomic_write(paths[0], made.ca_pem)
    tls.write_pem(paths[1], paths[2], made.cert_pem, made.key_pem)
    return paths
