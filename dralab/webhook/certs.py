"""Self-signed serving certificates for the webhook where no cert-manager issues them.

The local cluster, the tests and the benchmark need a CA bundle for the webhook registration
and a serving certificate for the server; this makes both (ECDSA P-256, SANs for the names
and addresses given).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from dralab.util import atomic_write


@dataclass(frozen=True)
class ServingCert:
    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _san(hosts: list[str]) -> x509.SubjectAlternativeName:
    entries: list[x509.GeneralName] = []
    for host in hosts:
        try:
            entries.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            entries.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(entries)


def generate(hosts: list[str] | None = None, days: int = 365, common_name: str = "dralab-webhook") -> ServingCert:
    """A fresh CA and a serving certificate it signed for ``hosts`` (default: localhost, 127.0.0.1)."""
    hosts = hosts or ["localhost", "127.0.0.1"]
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(_name(f"{common_name}-ca"))
        .issuer_name(_name(f"{common_name}-ca"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(_san(hosts), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return ServingCert(
        ca_pem=ca_cert.public_bytes(serialization.Encoding.PEM),
        cert_pem=cert.public_bytes(serialization.Encoding.PEM),
        key_pem=key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ),
    )


def write(directory: str | Path, hosts: list[str] | None = None) -> tuple[Path, Path, Path]:
    """Generate and write ``ca.crt``, ``tls.crt``, ``tls.key`` under ``directory``; returns their paths."""
    d = Path(directory)
    made = generate(hosts)
    paths = (d / "ca.crt", d / "tls.crt", d / "tls.key")
    atomic_write(paths[0], made.ca_pem)
    atomic_write(paths[1], made.cert_pem)
    atomic_write(paths[2], made.key_pem, mode=0o600)
    return paths
