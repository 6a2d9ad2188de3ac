"""A small Kubernetes REST client for the local cluster's own needs (bootstrap, health, stand-in).

Plain JSON over httpx with the kubeconfig's client certificate: it imports fast (``dralab
cluster up`` and the stand-in start in well under a second) and speaks any API group, including
``resource.k8s.io/v1``, without generated models. Tests use the official ``kubernetes`` client.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import yaml

from dralab.errors import UserError


class ApiError(Exception):
    """A non-2xx answer; ``status`` is the HTTP code, ``reason`` the Status reason."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message


def _materialize(entry: dict[str, Any], data_key: str, file_key: str, folder: Path, name: str) -> str | None:
    if entry.get(file_key):
        return str(entry[file_key])
    if entry.get(data_key):
        path = folder / name
        path.write_bytes(base64.b64decode(entry[data_key]))
        os.chmod(path, 0o600)
        return str(path)
    return None


def load_kubeconfig(path: str | Path) -> tuple[str, str | None, str | None, str | None]:
    """(server, ca file, cert file, key file) of the current context; embedded data goes to a temp dir."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"kubeconfig {p} not found")
    doc = yaml.safe_load(p.read_text()) or {}
    ctx_name = doc.get("current-context")
    contexts = {c["name"]: c["context"] for c in doc.get("contexts") or []}
    ctx = contexts.get(ctx_name) or next(iter(contexts.values()), None)
    if ctx is None:
        raise UserError(f"kubeconfig {p} has no context")
    cluster = {c["name"]: c["cluster"] for c in doc.get("clusters") or []}[ctx["cluster"]]
    user = {u["name"]: u["user"] for u in doc.get("users") or []}.get(ctx.get("user"), {})
    folder = Path(tempfile.mkdtemp(prefix="dralab-kc-"))
    ca = _materialize(cluster, "certificate-authority-data", "certificate-authority", folder, "ca.crt")
    cert = _materialize(user, "client-certificate-data", "client-certificate", folder, "client.crt")
    key = _materialize(user, "client-key-data", "client-key", folder, "client.key")
    return cluster["server"], ca, cert, key


class Kube:
    """JSON REST calls against one API server."""

    def __init__(self, server: str, ca: str | None, cert: str | None, key: str | None, timeout: float = 30.0) -> None:
        ctx = ssl.create_default_context(cafile=ca) if ca else ssl.create_default_context()
        if cert and key:
            ctx.load_cert_chain(cert, key)
        self.server = server.rstrip("/")
        self._client = httpx.Client(base_url=self.server, verify=ctx, timeout=timeout)
        self._ssl = ctx

    @classmethod
    def from_kubeconfig(cls, path: str | Path, timeout: float = 30.0) -> Kube:
        return cls(*load_kubeconfig(path), timeout=timeout)

    def close(self) -> None:
        self._client.close()

    @staticmethod
    def _check(resp: httpx.Response) -> Any:
        if resp.status_code >= 400:
            try:
                body = resp.json()
                raise ApiError(resp.status_code, body.get("reason", ""), body.get("message", resp.text))
            except ValueError:
                raise ApiError(resp.status_code, "", resp.text) from None
        if not resp.content:
            return {}
        ctype = resp.headers.get("content-type", "")
        return resp.json() if "json" in ctype else resp.text

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        return self._check(self._client.request(method, path, **kwargs))

    def get(self, path: str, params: dict[str, Any] | None = None) -> Any | None:
        """GET; None when the object does not exist."""
        try:
            return self.request("GET", path, params=params)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def raw(self, path: str) -> str:
        """GET a non-JSON endpoint (``/metrics``)."""
        resp = self._client.get(path)
        if resp.status_code >= 400:
            raise ApiError(resp.status_code, "", resp.text)
        return resp.text

    def create(self, path: str, body: dict[str, Any], exist_ok: bool = False) -> Any:
        try:
            return self.request("POST", path, json=body)
        except ApiError as exc:
            if exist_ok and exc.status == 409:
                return None
            raise

    def apply(self, path: str, body: dict[str, Any], manager: str = "dralab") -> Any:
        """Server-side apply (create or update) of ``body`` at its object path."""
        return self.request(
            "PATCH",
            path,
            params={"fieldManager": manager, "force": "true"},
            content=json.dumps(body),
            headers={"Content-Type": "application/apply-patch+yaml"},
        )

    def patch(self, path: str, body: Any, kind: str = "merge") -> Any:
        ctype = {"merge": "application/merge-patch+json", "json": "application/json-patch+json"}[kind]
        return self.request("PATCH", path, content=json.dumps(body), headers={"Content-Type": ctype})

    def delete(self, path: str, params: dict[str, Any] | None = None) -> bool:
        """DELETE; False when it was already gone."""
        try:
            self.request("DELETE", path, params=params)
            return True
        except ApiError as exc:
            if exc.status == 404:
                return False
            raise

    def watch(self, path: str, params: dict[str, Any] | None = None, timeout: int = 300) -> Iterator[dict[str, Any]]:
        """Stream watch events (``{"type", "object"}``) until the server closes the watch."""
        query = {**(params or {}), "watch": "true", "timeoutSeconds": str(timeout), "allowWatchBookmarks": "true"}
        with self._client.stream("GET", path, params=query, timeout=httpx.Timeout(30.0, read=timeout + 30)) as resp:
            if resp.status_code >= 400:
                resp.read()
                self._check(resp)
            for line in resp.iter_lines():
                if line.strip():
                    yield json.loads(line)
