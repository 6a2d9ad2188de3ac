"""The admin kubeconfig of a local cluster (rendered purely; written by the caller)."""

from __future__ import annotations

import base64
from typing import Any

import yaml


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def render_kubeconfig(
    cluster: str, server: str, ca_pem: bytes, cert_pem: bytes, key_pem: bytes, user: str = "admin"
) -> str:
    """A self-contained kubeconfig (certificates embedded) whose context is named ``cluster``."""
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster, "cluster": {"server": server, "certificate-authority-data": _b64(ca_pem)}}],
        "users": [
            {
                "name": f"{cluster}-{user}",
                "user": {"client-certificate-data": _b64(cert_pem), "client-key-data": _b64(key_pem)},
            }
        ],
        "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": f"{cluster}-{user}"}}],
        "current-context": cluster,
        "preferences": {},
    }
    return yaml.safe_dump(doc, sort_keys=False)
