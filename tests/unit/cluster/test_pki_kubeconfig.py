"""The local cluster's PKI and kubeconfig."""

from __future__ import annotations

import ipaddress
import stat
from pathlib import Path

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from dralab.kube import load_kubeconfig
from dralab_kit.cluster.kubeconfig import render_kubeconfig
from dralab_kit.cluster.pki import ensure_pki


def _cert(path):
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_pki_chain_and_identities(tmp_path):
    pki = ensure_pki(tmp_path / "pki")
    ca = _cert(pki.ca_cert)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    for name in ("apiserver", "admin", "webhook"):
        leaf = _cert(pki.cert(name))
        assert leaf.issuer == ca.subject
        leaf.verify_directly_issued_by(ca)
    api_sans = _cert(pki.cert("apiserver")).extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("127.0.0.1") in api_sans.get_values_for_type(x509.IPAddress)
    assert "kubernetes.default.svc" in api_sans.get_values_for_type(x509.DNSName)
    admin = _cert(pki.cert("admin"))
    assert admin.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == "system:masters"
    usages = admin.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.CLIENT_AUTH in usages
    webhook = _cert(pki.cert("webhook")).extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("127.0.0.1") in webhook.get_values_for_type(x509.IPAddress)
    for key in (pki.ca_key, pki.key("admin"), pki.sa_key):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600


def test_pki_is_reused(tmp_path):
    pki = ensure_pki(tmp_path / "pki")
    before = {p.name: p.read_bytes() for p in (tmp_path / "pki").iterdir()}
    ensure_pki(tmp_path / "pki")
    assert {p.name: p.read_bytes() for p in (tmp_path / "pki").iterdir()} == before
    pki.cert("webhook").unlink()
    ensure_pki(tmp_path / "pki")
    assert pki.cert("webhook").is_file() and pki.ca_cert.read_bytes() == before["ca.crt"]


def test_kubeconfig_round_trip(tmp_path):
    pki = ensure_pki(tmp_path / "pki")
    text = render_kubeconfig(
        "dralab-x", "https://127.0.0.1:6443", pki.ca_cert.read_bytes(),
        pki.cert("admin").read_bytes(), pki.key("admin").read_bytes(),
    )  # fmt: skip
    path = tmp_path / "kubeconfig"
    path.write_text(text)
    loaded = load_kubeconfig(path).configuration
    assert loaded.host == "https://127.0.0.1:6443"
    assert Path(loaded.ssl_ca_cert).read_bytes() == pki.ca_cert.read_bytes()
    assert Path(loaded.cert_file).read_bytes() == pki.cert("admin").read_bytes()
    assert Path(loaded.key_file).read_bytes() == pki.key("admin").read_bytes()
