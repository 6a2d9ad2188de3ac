"""Kubernetes API access for the webhook and janitor, through the official client.

The webhook needs a handful of raw JSON calls (create/get/delete/patch claims, list and watch
pods), so this wraps the official client's transport (kubeconfig or in-cluster credentials,
TLS, auth headers) and skips its typed models: objects stay plain dicts end to end, which is
what conversion produces and what is cheapest per admission request.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from dralab.errors import UserError

RESOURCE_GROUP = "/apis/resource.k8s.io/v1"


class ApiError(Exception):
    """A non-2xx answer from the apiserver (``status`` 0: no answer at all)."""

    def __init__(self, status: int, reason: str, body: dict[str, Any] | None = None) -> None:
        self.status = status
        self.reason = reason
        self.body = body or {}
        message = self.body.get("message") or reason
        super().__init__(f"{status}: {message}")

    @property
    def message(self) -> str:
        return str(self.body.get("message") or self.reason)


def segment(value: str) -> str:
    """One URL path segment: every reserved character escaped (``/`` included), ``.`` and ``..`` refused.

    Namespaces and names reach here from admission requests; an unescaped ``x/../kube-system`` would be
    normalised into another namespace's path.
    """
    if value in ("", ".", ".."):
        raise ValueError(f"{value!r} is not a valid object or namespace name")
    return quote(value, safe="")


def claims_path(namespace: str, name: str | None = None) -> str:
    base = f"{RESOURCE_GROUP}/namespaces/{segment(namespace)}/resourceclaims"
    return f"{base}/{segment(name)}" if name else base


def templates_path(namespace: str, name: str | None = None) -> str:
    base = f"{RESOURCE_GROUP}/namespaces/{segment(namespace)}/resourceclaimtemplates"
    return f"{base}/{segment(name)}" if name else base


def pods_path(namespace: str | None = None, name: str | None = None) -> str:
    if namespace is None:
        return "/api/v1/pods"
    base = f"/api/v1/namespaces/{segment(namespace)}/pods"
    return f"{base}/{segment(name)}" if name else base


class RotatingToken:
    """The service account token file, read again whenever the kubelet rotates it (a new file or content).

    Installed as the client configuration's ``refresh_api_key_hook``, which the client calls before every
    request; a ``stat`` per request is the whole cost. The client's own in-cluster loader re-reads only
    once a minute, so requests after a rotation would carry a token the apiserver may already reject.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._seen: tuple[int, int, int] | None = None
        self._token = ""

    def __call__(self, configuration: Any) -> None:
        try:
            st = os.stat(self.path)
            seen = (st.st_ino, st.st_mtime_ns, st.st_size)
            if seen != self._seen:
                text = Path(self.path).read_text().strip()
                if text:  # an empty file is a rotation in progress: keep the last token
                    self._token, self._seen = text, seen
        except OSError:
            pass  # keep the last token; the apiserver's 401 says what is wrong
        if self._token:
            configuration.api_key["BearerToken"] = f"bearer {self._token}"


def _rotating_token(configuration: Any, loader_module: Any) -> None:
    """Replace the in-cluster loader's once-a-minute token refresh with :class:`RotatingToken`."""
    hook = RotatingToken(loader_module.SERVICE_TOKEN_FILENAME)
    hook(configuration)
    configuration.refresh_api_key_hook = hook


class KubeApi:
    """Raw JSON requests to the apiserver; thread-safe (the client's connection pool is)."""

    def __init__(self, api_client: k8s_client.ApiClient) -> None:
        self.api_client = api_client

    @classmethod
    def from_kubeconfig(cls, kubeconfig: str | Path | None = None, pool_size: int = 32) -> KubeApi:
        """Credentials from ``kubeconfig``, else in-cluster, else the default kubeconfig."""
        configuration = k8s_client.Configuration()
        try:
            if kubeconfig:
                k8s_config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
            else:
                try:
                    k8s_config.load_incluster_config(client_configuration=configuration)
                    from kubernetes.config import incluster_config

                    _rotating_token(configuration, incluster_config)
                except k8s_config.ConfigException:
                    k8s_config.load_kube_config(client_configuration=configuration)
        except (k8s_config.ConfigException, OSError) as exc:
            raise UserError(f"cannot load Kubernetes credentials ({exc}); pass --kubeconfig FILE") from None
        configuration.connection_pool_maxsize = pool_size
        return cls(k8s_client.ApiClient(configuration))

    def close(self) -> None:
        self.api_client.close()

    def _send(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | tuple[float, float] | None = 10.0,
        accept: str = "application/json",
    ):
        headers = {"Accept": accept}
        if body is not None:
            headers["Content-Type"] = content_type
        req = self.api_client.param_serialize(
            method, path, query_params=query or [], header_params=headers, body=body, auth_settings=["BearerToken"]
        )
        try:
            return self.api_client.call_api(*req, _request_timeout=timeout)
        except k8s_client.ApiException as exc:
            raise ApiError(exc.status or 0, str(exc.reason)) from None
        except Exception as exc:  # connection refused, reset, timeout
            raise ApiError(0, f"{type(exc).__name__}: {exc}") from None

    def request(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float = 10.0,
    ) -> dict[str, Any]:
        """One call; the decoded JSON answer, or :class:`ApiError`."""
        resp = self._send(method, path, query=query, body=body, content_type=content_type, timeout=timeout)
        return _decoded(resp)

    # -- the calls the webhook makes -------------------------------------------------------

    def create(self, path: str, body: dict[str, Any], dry_run: bool = False) -> dict[str, Any]:
        query = [("dryRun", "All")] if dry_run else None
        return self.request("POST", path, body=body, query=query)

    def get(self, path: str) -> dict[str, Any]:
        return self.request("GET", path)

    def delete(self, path: str, uid: str | None = None) -> dict[str, Any]:
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
        if uid:
            body["preconditions"] = {"uid": uid}
        return self.request("DELETE", path, body=body)

    def merge_patch(self, path: str, patch: dict[str, Any]) -> dict[str, Any]:
        return self.request("PATCH", path, body=patch, content_type="application/merge-patch+json")

    def list(self, path: str, label_selector: str | None = None, accept: str = "application/json") -> dict[str, Any]:
        """A list; ``accept`` may ask for PartialObjectMetadata (the list form of it is asked for here)."""
        query = [("labelSelector", label_selector)] if label_selector else None
        if "as=PartialObjectMetadata;" in accept:
            accept = accept.replace("as=PartialObjectMetadata;", "as=PartialObjectMetadataList;")
        resp = self._send("GET", path, query=query, timeout=60.0, accept=accept)
        return _decoded(resp)

    def watch(
        self,
        path: str,
        resource_version: str,
        label_selector: str | None = None,
        timeout_seconds: int = 300,
        stop: threading.Event | None = None,
        on_open=None,
        accept: str = "application/json",
    ) -> Iterator[dict[str, Any]]:
        """Watch events (``{"type", "object"}``) from ``resource_version`` until the server ends the watch.

        ``on_open`` receives the open response so another thread can close it to end the watch early.
        """
        query = [
            ("watch", "true"),
            ("resourceVersion", resource_version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(timeout_seconds)),
        ]
        if label_selector:
            query.append(("labelSelector", label_selector))
        resp = self._send("GET", path, query=query, timeout=(10.0, timeout_seconds + 30.0), accept=accept)
        if not 200 <= resp.status < 300:
            data = resp.read()
            try:
                body = json.loads(data)
            except ValueError:
                body = None
            raise ApiError(resp.status, str(resp.reason), body)
        raw = resp.response
        if on_open is not None:
            on_open(raw)
        buffer = b""
        try:
            for chunk in raw.stream(65536, decode_content=True):
                if stop is not None and stop.is_set():
                    return
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        yield json.loads(line)
        finally:
            raw.release_conn()


class AsyncKubeApi:
    """The admission path's calls (create/get/delete) on the official client's asyncio transport.

    Same answers and errors as :class:`KubeApi`, without a thread per call: under load the event
    loop and a pool of worker threads fight over the GIL, which costs throughput and tail latency.
    The aiohttp session belongs to the running event loop, so it is made on first use.
    """

    def __init__(self, kubeconfig: str | Path | None = None, pool_size: int = 64) -> None:
        self.kubeconfig = kubeconfig
        self.pool_size = pool_size
        self._client: Any = None
        self._session: Any = None
        self._lock: Any = None

    async def _api(self) -> Any:
        if self._client is not None:
            return self._client
        import asyncio

        from kubernetes.aio import client as aio_client
        from kubernetes.aio import config as aio_config

        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._client is None:
                configuration = aio_client.Configuration()
                if self.kubeconfig:
                    await aio_config.load_kube_config(
                        config_file=str(self.kubeconfig), client_configuration=configuration
                    )
                else:
                    try:
                        aio_config.load_incluster_config(client_configuration=configuration)
                        from kubernetes.aio.config import incluster_config

                        _rotating_token(configuration, incluster_config)
                    except aio_config.ConfigException:
                        await aio_config.load_kube_config(client_configuration=configuration)
                configuration.connection_pool_maxsize = self.pool_size
                # The client's session trusts the environment by default: every request then looks up
                # ~/.netrc and proxy variables in worker threads (two thread hops per claim create).
                # The apiserver is reached directly (an explicit configuration.proxy still applies).
                configuration.client_session_kwargs = {"trust_env": False}
                self._client = aio_client.ApiClient(configuration)
        return self._client

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._client is not None:
            await self._client.close()
            self._client = None

    async def _pool(self) -> Any:
        """The kept-alive connection pool to the apiserver (the client's TLS settings, no environment lookups).

        The official client stays the source of the configuration (kubeconfig or in-cluster, TLS context,
        rotating token); requests skip its per-call model serialization, which walks every claim field.
        """
        if self._session is None:
            import aiohttp

            api = await self._api()
            connector = aiohttp.TCPConnector(limit=self.pool_size, ssl=api.rest_client.ssl_context,
                                             keepalive_timeout=60)
            self._session = aiohttp.ClientSession(connector=connector, trust_env=False)
        return self._session

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float = 10.0,
    ) -> dict[str, Any]:
        import aiohttp

        session = await self._pool()
        configuration = self._client.configuration
        headers = {"Accept": "application/json"}
        auth = (await configuration.auth_settings()).get("BearerToken")  # also runs the token refresh hook
        if auth:
            headers["Authorization"] = auth["value"]
        data: bytes | None = None
        if body is not None:
            headers["Content-Type"] = content_type
            data = json.dumps(body, separators=(",", ":")).encode()
        try:
            async with session.request(
                method, configuration.host + path, params=query or None, data=data, headers=headers,
                timeout=aiohttp.ClientTimeout(total=timeout),
            ) as resp:
                raw = await resp.read()
                status, reason = resp.status, resp.reason
        except Exception as exc:  # connection refused, reset, timeout
            raise ApiError(0, f"{type(exc).__name__}: {exc}") from None
        try:
            decoded = json.loads(raw) if raw else {}
        except ValueError:
            decoded = {"message": bytes(raw[:200]).decode(errors="replace")}
        if not 200 <= status < 300:
            raise ApiError(status, str(reason), decoded if isinstance(decoded, dict) else None)
        return decoded

    async def create(self, path: str, body: dict[str, Any], dry_run: bool = False) -> dict[str, Any]:
        return await self.request("POST", path, body=body, query=[("dryRun", "All")] if dry_run else None)

    async def get(self, path: str) -> dict[str, Any]:
        return await self.request("GET", path)

    async def delete(self, path: str, uid: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
        if uid:
            body["preconditions"] = {"uid": uid}
        return await self.request("DELETE", path, body=body)


def _decoded(resp: Any) -> dict[str, Any]:
    """The JSON body of a finished call, or :class:`ApiError` for a non-2xx answer."""
    data = resp.read()
    try:
        decoded = json.loads(data) if data else {}
    except ValueError:
        decoded = {"message": data[:200].decode(errors="replace")}
    if not 200 <= resp.status < 300:
        raise ApiError(resp.status, str(resp.reason), decoded if isinstance(decoded, dict) else None)
    return decoded
