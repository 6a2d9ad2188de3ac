"""The local cluster's own PKI: a CA, serving and client certificates, service-account keys.

ECDSA P-256 keys: generated in milliseconds and accepted by every component. Files are
written once and reused by later ``up`` calls so kubeconfigs and the webhook's caBundle stay
valid across restarts.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

from dralab import tls

VALIDITY = dt.timedelta(days=3650)
APISERVER_SANS = (
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
    "127.0.0.1",
    "10.96.0.1",
    "10.215.0.1",  # the apiserver's address on a cluster with a pod network (dralab_kit.cluster.node.podnet)
)
LOCAL_SANS = ("localhost", "127.0.0.1")


@dataclass(frozen=True)
class Pki:
    """Paths of every PKI file of a cluster."""

    root: Path

    def cert(self, name: str) -> Path:
        return self.root / f"{name}.crt"

    def key(self, name: str) -> Path:
        return self.root / f"{name}.key"

    @property
    def ca_cert(self) -> Path:
        return self.cert("ca")

    @property
    def ca_key(self) -> Path:
        return self.key("ca")

    @property
    def sa_key(self) -> Path:
        return self.root / "sa.key"

    @property
    def sa_pub(self) -> Path:
        return self.root / "sa.pub"


def make_ca(cn: str = "dralab-local-ca") -> tuple[bytes, bytes]:
    """A self-signed CA: (cert PEM, key PEM)."""
    cert, key = tls.make_ca(cn, VALIDITY)
    return tls.cert_pem(cert), tls.key_pem(key)


def issue(
    ca_cert_pem: bytes,
    ca_key_pem: bytes,
    cn: str,
    *,
    org: str | None = None,
    sans: tuple[str, ...] = (),
    server: bool = False,
    client: bool = False,
) -> tuple[bytes, bytes]:
    """A leaf certificate signed by the CA: (cert PEM, key PEM)."""
    ca_cert, ca_key = tls.load_ca(ca_cert_pem, ca_key_pem)
    cert, key = tls.issue(ca_cert, ca_key, cn, VALIDITY, org=org, hosts=sans, server=server, client=client)
    return tls.cert_pem(cert), tls.key_pem(key)


def make_service_account_keys() -> tuple[bytes, bytes]:
    """Service-account token signing key pair: (private PEM, public PEM)."""
    key = tls.new_key()
    return tls.key_pem(key), tls.public_pem(key)


def ensure_pki(root: Path) -> Pki:
    """Create whatever PKI file is missing under ``root`` (existing files are kept)."""
    pki = Pki(root)
    root.mkdir(parents=True, exist_ok=True)
    if not pki.ca_cert.is_file() or not pki.ca_key.is_file():
        cert, key = make_ca()
        tls.write_pem(pki.ca_cert, pki.ca_key, cert, key)
    ca_cert, ca_key = pki.ca_cert.read_bytes(), pki.ca_key.read_bytes()
    leaves = {
        "apiserver": {"cn": "kube-apiserver", "sans": APISERVER_SANS, "server": True},
        "admin": {"cn": "dralab-admin", "org": "system:masters", "client": True},
        "webhook": {"cn": "dralab-webhook", "sans": LOCAL_SANS, "server": True},
    }
    for name, spec in leaves.items():
        if pki.cert(name).is_file() and pki.key(name).is_file():
            continue
        cert, key = issue(
            ca_cert,
            ca_key,
            spec["cn"],  # type: ignore[arg-type]
            org=spec.get("org"),  # type: ignore[arg-type]
            sans=spec.get("sans", ()),  # type: ignore[arg-type]
            server=bool(spec.get("server")),
            client=bool(spec.get("client")),
        )
        tls.write_pem(pki.cert(name), pki.key(name), cert, key)
    if not pki.sa_key.is_file() or not pki.sa_pub.is_file():
        private, public = make_service_account_keys()
        tls.write_pem(pki.sa_pub, pki.sa_key, public, private)
    return pki
