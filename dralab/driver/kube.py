"""A small JSON client for the few API calls the driver makes (claims, nodes, slices).

Plain dicts in and out: the driver needs fields of alpha features (consumedCapacity, shareID) that
typed client models may lag behind, and it must stay fast on the Prepare path. Credentials come from
a kubeconfig or the in-cluster service account, read by the kubernetes client's config loader. A
bearer token is looked up per request, never copied once: the kubelet rotates the service account's
projected token (bound tokens expire), and kubeconfig exec/OIDC credentials refresh through the
loader's hook.
"""

from __future__ import annotations

import json
import os
import ssl
import threading
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import httpx

from dralab.errors import UserError


class TokenFile:
    """A bearer token read from a file, read again whenever the file is replaced or rewritten.

    The kubelet swaps the projected token in atomically (a new inode behind the same path), so a
    ``stat`` per request (about a microsecond) notices a rotation without any timer.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._seen: tuple[int, int, int] | None = None
        self._token = ""

    def __call__(self) -> str:
        try:
            st = self.path.stat()
        except OSError:
            return self._token  # a rotation in progress: the last token is still the best guess
        sig = (st.st_ino, st.st_mtime_ns, st.st_size)
        with self._lock:
            if sig != self._seen:
                try:
                    self._token = self.path.read_text().strip()
                    self._seen = sig
                except OSError:
                    pass
            return self._token


class BearerAuth(httpx.Auth):
    """Adds ``Authorization: Bearer <token>`` with the token current at the time of each request."""

    def __init__(self, token: Callable[[], str | None]) -> None:
        self.token = token

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        value = self.token()
        if value:
            request.headers["Authorization"] = value if value.lower().startswith("bearer ") else f"Bearer {value}"
        yield request


class KubeError(RuntimeError):
    """An API call failed; ``status`` is the HTTP status (0: no answer)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class KubeClient:
    """JSON over HTTPS to one apiserver."""

    def __init__(self, kubeconfig: str | None = None, timeout: float = 10.0) -> None:
        from kubernetes import client, config
        from kubernetes.config import incluster_config

        cfg = client.Configuration()
        token: Callable[[], str | None] | None = None
        try:
            if kubeconfig:
                config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
            else:
                try:
                    config.load_incluster_config(client_configuration=cfg)
                    token = TokenFile(incluster_config.SERVICE_TOKEN_FILENAME)
                except config.ConfigException:
                    config.load_kube_config(client_configuration=cfg)
        except (config.ConfigException, OSError) as exc:
            where = kubeconfig or "the default kubeconfig / in-cluster service account"
            raise UserError(f"cannot load Kubernetes credentials from {where}: {exc}; pass --kubeconfig FILE") from None
        ctx = ssl.create_default_context(cafile=cfg.ssl_ca_cert) if cfg.ssl_ca_cert else ssl.create_default_context()
        if not cfg.verify_ssl:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if cfg.cert_file:
            ctx.load_cert_chain(cfg.cert_file, cfg.key_file)
        headers = {"Accept": "application/json", "User-Agent": "dralab-driver"}
        if token is None and (cfg.api_key or cfg.refresh_api_key_hook):
            # kubeconfig tokens; exec plugins and OIDC refresh through the loader's hook on each lookup
            token = lambda: cfg.get_api_key_with_prefix("BearerToken", alias="authorization")  # noqa: E731
        self.host = cfg.host
        self._settings: dict[str, Any] = {
            "base_url": cfg.host,
            "verify": ctx,
            "headers": headers,
            "timeout": timeout,
            "auth": BearerAuth(token) if token is not None else None,
        }
        self._http = httpx.Client(**self._settings)

    def clone(self) -> KubeClient:
        """A client with the same server and credentials and its own connections.

        For a long watch on its own thread: closing a client while another thread reads one of its
        sockets can hand the socket's number to a new connection that the reader then corrupts.
        """
        twin = object.__new__(KubeClient)
        twin.host = self.host
        twin._settings = self._settings
        twin._http = httpx.Client(**self._settings)
        return twin

    def close(self) -> None:
        self._http.close()

    def _check(self, resp: httpx.Response, what: str) -> None:
        if resp.status_code >= 400:
            try:
                message = resp.json().get("message", resp.text)
            except ValueError:
                message = resp.text
            raise KubeError(f"{what}: HTTP {resp.status_code}: {message}", resp.status_code)

    def request(self, method: str, path: str, body: Any = None, params: dict[str, Any] | None = None) -> Any:
        try:
            resp = self._http.request(method, path, json=body, params=params)
        except httpx.HTTPError as exc:
            raise KubeError(f"{method} {path}: {exc}") from None
        self._check(resp, f"{method} {path}")
        return resp.json() if resp.content else None

    def get(self, path: str, params: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """GET ``path``; None when it does not exist."""
        try:
            return self.request("GET", path, params=params)
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self.request("POST", path, body=body)

    def delete(self, path: str) -> bool:
        """DELETE ``path``; False when it was already gone."""
        try:
            self.request("DELETE", path)
        except KubeError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def watch(self, path: str, params: dict[str, Any], timeout_seconds: int = 60) -> Iterator[dict[str, Any]]:
        """Events of a watch on collection ``path`` until the server ends it (at most ``timeout_seconds``)."""
        query = {"allowWatchBookmarks": "false", **params, "watch": "true", "timeoutSeconds": str(timeout_seconds)}
        timeout = httpx.Timeout(10.0, read=timeout_seconds + 10)
        try:
            with self._http.stream("GET", path, params=query, timeout=timeout) as resp:
                if resp.status_code >= 400:
                    resp.read()
                    self._check(resp, f"WATCH {path}")
                for line in resp.iter_lines():
                    if line.strip():
                        yield json.loads(line)
        except httpx.HTTPError as exc:
            raise KubeError(f"WATCH {path}: {exc}") from None


def claim_path(namespace: str, name: str) -> str:
    return f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/{name}"


SLICES_PATH = "/apis/resource.k8s.io/v1/resourceslices"


def node_path(name: str) -> str:
    return f"/api/v1/nodes/{name}"
