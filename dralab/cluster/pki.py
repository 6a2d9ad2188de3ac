"""The local cluster's own PKI: a CA, serving and client certificates, service-account keys.

ECDSA P-256 keys: generated in milliseconds and accepted by every component. Files are
written once and reused by later ``up`` calls so kubeconfigs and the webhook's caBundle stay
valid across restarts.
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

VALIDITY = dt.timedelta(days=3650)
APISERVER_SANS = (
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
    "127.0.0.1",
    "10.96.0.1",
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


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _name(cn: str, org: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    if org:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


def _sans(names: tuple[str, ...]) -> x509.SubjectAlternativeName:
    entries: list[x509.GeneralName] = []
    for name in names:
        try:
            entries.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            entries.append(x509.DNSName(name))
    return x509.SubjectAlternativeName(entries)


def make_ca(cn: str = "dralab-local-ca") -> tuple[bytes, bytes]:
    """A self-signed CA: (cert PEM, key PEM)."""
    key = _new_key()
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(_name(cn))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


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
    ca_cert = x509.load_pem_x509_certificate(ca_cert_pem)
    ca_key = serialization.load_pem_private_key(ca_key_pem, password=None)
    key = _new_key()
    now = dt.datetime.now(dt.UTC)
    usages = []
    if server:
        usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
    if client:
        usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(cn, org))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_encipherment=False,
                key_cert_sign=False,
                crl_sign=False,
                content_commitment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_cert.public_key()),  # type: ignore[arg-type]
            critical=False,
        )
    )
    if sans:
        builder = builder.add_extension(_sans(sans), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def make_service_account_keys() -> tuple[bytes, bytes]:
    """Service-account token signing key pair: (private PEM, public PEM)."""
    key = _new_key()
    pub = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return _key_pem(key), pub


def ensure_pki(root: Path) -> Pki:
    """Create whatever PKI file is missing under ``root`` (existing files are kept)."""
    pki = Pki(root)
    root.mkdir(parents=True, exist_ok=True)
    if not pki.ca_cert.is_file() or not pki.ca_key.is_file():
        cert, key = make_ca()
        atomic_write(pki.ca_key, key, mode=0o600)
        atomic_write(pki.ca_cert, cert)
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
        atomic_write(pki.key(name), key, mode=0o600)
        atomic_write(pki.cert(name), cert)
    if not pki.sa_key.is_file() or not pki.sa_pub.is_file():
        private, public = make_service_account_keys()
        atomic_write(pki.sa_key, private, mode=0o600)
        atomic_write(pki.sa_pub, public)
    return pki
