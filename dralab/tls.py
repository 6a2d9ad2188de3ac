"""Keys, CAs and CA-signed certificates (ECDSA P-256) for the components that serve TLS.

One place for the ``cryptography`` calls so the local cluster's PKI and the webhook's
self-signed serving certificate cannot drift apart. Everything returns PEM bytes; only
``write_pem`` touches the disk. Imported by the webhook and the cluster alike, so it depends on
nothing but ``dralab.util``.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Iterable
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from dralab.util import atomic_write

# certificates are valid from a little before "now" so a peer with a slightly late clock accepts them
CLOCK_SKEW = dt.timedelta(minutes=5)


def new_key() -> ec.EllipticCurvePrivateKey:
    """A fresh P-256 key: generated in milliseconds and accepted by every component."""
    return ec.generate_private_key(ec.SECP256R1())


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    """The private key as unencrypted PKCS#8 PEM."""
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def public_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    """The public half of ``key`` as SubjectPublicKeyInfo PEM."""
    return key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def name(cn: str, org: str | None = None) -> x509.Name:
    """A subject with a common name and, optionally, an organization (Kubernetes reads it as a group)."""
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    if org:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


def sans(hosts: Iterable[str]) -> x509.SubjectAlternativeName:
    """Subject alternative names: IP entries for addresses, DNS entries for everything else."""
    entries: list[x509.GeneralName] = []
    for host in hosts:
        try:
            entries.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            entries.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(entries)


def _key_usage(*, cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        encipher_only=False,
        decipher_only=False,
    )


def _builder(
    subject: x509.Name,
    issuer: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    validity: dt.timedelta,
    now: dt.datetime | None,
) -> x509.CertificateBuilder:
    """Subject, issuer, key, a random serial and a validity window from a little before ``now``."""
    start = (now or dt.datetime.now(dt.UTC)) - CLOCK_SKEW
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + CLOCK_SKEW + validity)
    )


def make_ca(
    cn: str,
    validity: dt.timedelta,
    *,
    path_length: int | None = None,
    now: dt.datetime | None = None,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A self-signed CA certificate and its key."""
    key = new_key()
    cert = (
        _builder(name(cn), name(cn), key, validity, now)
        .add_extension(x509.BasicConstraints(ca=True, path_length=path_length), critical=True)
        .add_extension(_key_usage(cert_sign=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def issue(
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    cn: str,
    validity: dt.timedelta,
    *,
    org: str | None = None,
    hosts: Iterable[str] = (),
    server: bool = False,
    client: bool = False,
    now: dt.datetime | None = None,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A leaf certificate signed by the CA, for serving (``server``) and/or client auth, and its key."""
    key = new_key()
    usages = []
    if server:
        usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
    if client:
        usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
    builder = (
        _builder(name(cn, org), ca_cert.subject, key, validity, now)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_cert.public_key()),  # type: ignore[arg-type]
            critical=False,
        )
    )
    hosts = tuple(hosts)
    if hosts:
        builder = builder.add_extension(sans(hosts), critical=False)
    return builder.sign(ca_key, hashes.SHA256()), key


def load_ca(cert_pem_bytes: bytes, key_pem_bytes: bytes) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A CA certificate and key read back from PEM (as written by ``make_ca``)."""
    cert = x509.load_pem_x509_certificate(cert_pem_bytes)
    key = serialization.load_pem_private_key(key_pem_bytes, password=None)
    return cert, key  # type: ignore[return-value]


def write_pem(cert_path: Path, key_path: Path, cert_bytes: bytes, key_bytes: bytes) -> None:
    """Write a certificate (or public key) and its private key atomically; the key readable by its owner only."""
    atomic_write(key_path, key_bytes, mode=0o600)
    atomic_write(cert_path, cert_bytes)
