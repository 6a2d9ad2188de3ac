"""The synchronous client: raw API paths in, plain dicts out, over the official client's connection pool.

Every call is one HTTP request on ``kubernetes.client``'s urllib3 pool, which the official
``RESTClientObject`` builds from the loaded configuration (CA, client certificate, verification,
proxy, pool size). The generated request serializer and typed models are skipped: objects stay
dicts end to end (dralab reads fields of alpha features the models may lag behind, and walking a
claim through the serializer on every call costs time on the Prepare path). The bearer token is
looked up per request, so rotation (see :mod:`dralab.kube.config`) takes effect on the next call.
"""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, overload
from urllib.parse import urlencode

from dralab.jsonio import dumps, loads
from dralab.kube.config import KubeConfig, load_config
from dralab.kube.errors import KubeError

Params = Mapping[str, Any] | Sequence[tuple[str, Any]] | None

JSON = "application/json"
Objects = list[dict[str, Any]]  # a list answer's items (``list`` itself is a method name inside Kube)
# A watch read longer than this waited for the apiserver; a read from buffers takes tens of microseconds
WAITED_SECONDS = 0.0005
clock = time.perf_counter  # the watch reader's (tests replace it)
PATCH_TYPES = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
    "apply": "application/apply-patch+yaml",
}
PARTIAL_METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"


def query_string(params: Params) -> str:
    """``?a=b&...`` of ``params`` (a mapping or pairs; None values dropped, booleans as true/false)."""
    if not params:
        return ""
    pairs = params.items() if isinstance(params, Mapping) else params
    items = [(k, ("true" if v else "false") if isinstance(v, bool) else str(v)) for k, v in pairs if v is not None]
    return "?" + urlencode(items) if items else ""


def encode_body(body: Any) -> bytes | None:
    """A request body: bytes as given, anything else compact JSON; None for no body."""
    if body is None:
        return None
    return body if isinstance(body, bytes) else dumps(body)


def request_headers(
    config: KubeConfig, user_agent: str, accept: str, content_type: str | None, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The headers of one call; the authorization is read per call, so a rotated token is used at once."""
    headers = {**(extra or {}), "Accept": accept, "User-Agent": user_agent}
    if content_type:
        headers["Content-Type"] = content_type
    auth = config.authorization()
    if auth:
        headers["Authorization"] = auth
    return headers


def patch_args(kind: str, manager: str | None, force: bool) -> tuple[str, dict[str, Any]]:
    """The content type and query of a PATCH of ``kind``; ValueError naming the kinds for an unknown one."""
    try:
        content_type = PATCH_TYPES[kind]
    except KeyError:
        raise ValueError(f"patch kind {kind!r}: use one of {', '.join(PATCH_TYPES)}") from None
    return content_type, {"fieldManager": manager, "force": True if force else None}


def decode(data: bytes, status: int, reason: str, what: str) -> Any:
    """The JSON answer of a finished call (``{}`` when empty); :class:`KubeError` for a non-2xx answer."""
    try:
        decoded = loads(data) if data else {}
    except ValueError:
        decoded = {"message": data[:200].decode(errors="replace")}
    if not 200 <= status < 300:
        body = decoded if isinstance(decoded, dict) else {}
        raise KubeError(status, str(body.get("reason") or reason), body, what=what)
    return decoded


def list_accept(accept: str) -> str:
    """The list form of a PartialObjectMetadata ``Accept`` (a list call asks for the list kind)."""
    return accept.replace("as=PartialObjectMetadata;", "as=PartialObjectMetadataList;")


def watch_params(
    resource_version: str,
    timeout_seconds: int,
    bookmarks: bool,
    label_selector: str | None,
    field_selector: str | None,
) -> list[tuple[str, str]]:
    """The query of a watch request (shared by the sync and async clients)."""
    query = [("watch", "true"), ("timeoutSeconds", str(timeout_seconds))]
    if resource_version:
        query.append(("resourceVersion", resource_version))
    if bookmarks:
        query.append(("allowWatchBookmarks", "true"))
    if label_selector:
        query.append(("labelSelector", label_selector))
    if field_selector:
        query.append(("fieldSelector", field_selector))
    return query


def delete_options(uid: str | None, grace_period_seconds: int | None, propagation: str | None) -> dict[str, Any]:
    body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
    if propagation:
        body["propagationPolicy"] = propagation
    if uid:
        body["preconditions"] = {"uid": uid}
    if grace_period_seconds is not None:
        body["gracePeriodSeconds"] = grace_period_seconds
    return body


def shares_tls(configuration: Any, pool: Any) -> bool:
    """Whether a client's new connections can take the credentials' one TLS context: HTTPS straight to the
    apiserver (no proxy), a CA of its own, and no ``assert_hostname`` (urllib3 would turn the shared
    context's own name check off for it)."""
    import urllib3

    return (type(pool) is urllib3.PoolManager and str(configuration.host).startswith("https://")
            and bool(configuration.ssl_ca_cert) and configuration.assert_hostname is None)


class Kube:
    """Raw JSON calls to one apiserver; thread-safe (the connection pool is)."""

    def __init__(
        self,
        config: KubeConfig,
        *,
        timeout: float = 30.0,
        pool_size: int = 32,
        user_agent: str = "dralab",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """``headers``: sent with every request (e.g. ``Impersonate-User`` to act as another identity)."""
        from kubernetes import client

        self.config = config
        self.timeout = timeout
        self.pool_size = pool_size
        self.user_agent = user_agent
        self.headers = dict(headers or {})
        config.configuration.connection_pool_maxsize = pool_size
        self._api = client.ApiClient(config.configuration)
        self._pool = self._api.rest_client.pool_manager
        self._shares_tls = shares_tls(config.configuration, self._pool)
        self._tls: ssl.SSLContext | None = None

    @classmethod
    def from_kubeconfig(
        cls,
        kubeconfig: str | Path | None = None,
        *,
        context: str | None = None,
        timeout: float = 30.0,
        pool_size: int = 32,
        user_agent: str = "dralab",
    ) -> Kube:
        """Credentials from ``kubeconfig``, else in-cluster, else $KUBECONFIG / ~/.kube/config."""
        return cls(load_config(kubeconfig, context), timeout=timeout, pool_size=pool_size, user_agent=user_agent)

    @property
    def host(self) -> str:
        return self.config.host

    def clone(self) -> Kube:
        """Same server and credentials, its own connections: for a long watch on a thread of its own.

        Closing a client while another thread reads one of its sockets can hand the socket's number
        to a new connection that the reader then corrupts; a clone is closed by its own thread.
        """
        return Kube(self.config, timeout=self.timeout, pool_size=self.pool_size, user_agent=self.user_agent,
                    headers=self.headers)

    def close(self) -> None:
        self._api.rest_client.close()

    def __enter__(self) -> Kube:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- transport --------------------------------------------------------------------------------

    def open(
        self,
        method: str,
        path: str,
        *,
        params: Params = None,
        body: Any = None,
        content_type: str = JSON,
        accept: str = JSON,
        timeout: float | tuple[float, float] | None = None,
    ) -> Any:
        """Send one request; the unread urllib3 response (the caller reads and releases it)."""
        import urllib3

        if self._shares_tls:
            self._use_tls(self.config.ssl_context(verify_hostname=False))
        data = encode_body(body)
        limit = self.timeout if timeout is None else timeout
        if isinstance(limit, tuple):
            spec = urllib3.Timeout(connect=limit[0], read=limit[1])
        else:
            spec = urllib3.Timeout(total=limit)
        try:
            return self._pool.request(
                method,
                self.host + path + query_string(params),
                body=data,
                headers=request_headers(self.config, self.user_agent, accept,
                                        content_type if data is not None else None, self.headers),
                timeout=spec,
                preload_content=False,
            )
        except Exception as exc:  # refused, reset, timed out, TLS failure
            raise KubeError(0, f"{type(exc).__name__}: {exc}", what=f"{method} {path}") from None

    def _use_tls(self, ctx: ssl.SSLContext) -> None:
        """New connections take the credentials' shared TLS context (:meth:`KubeConfig.ssl_context`) instead of
        building one each from the files; after a rotation the pools are dropped, so the next connect uses
        the new one (requests in flight finish on their connections)."""
        if ctx is self._tls:
            return
        kw = self._pool.connection_pool_kw
        for key in ("ca_certs", "cert_file", "key_file"):  # what the context now carries
            kw.pop(key, None)
        kw["ssl_context"] = ctx
        if self._tls is not None:
            self._pool.clear()
        self._tls = ctx

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Params = None,
        body: Any = None,
        content_type: str = JSON,
        accept: str = JSON,
        timeout: float | None = None,
    ) -> Any:
        """One call; its decoded JSON answer (``{}`` when empty), or :class:`KubeError`."""
        what = f"{method} {path}"
        resp = self.open(method, path, params=params, body=body, content_type=content_type, accept=accept,
                         timeout=timeout)
        try:
            data = resp.data
        except Exception as exc:
            raise KubeError(0, f"{type(exc).__name__}: {exc}", what=what) from None
        finally:
            resp.release_conn()
        return decode(data, resp.status, str(resp.reason), what)

    def text(self, path: str, *, params: Params = None, timeout: float | None = None) -> str:
        """GET a non-JSON endpoint (``/metrics``, ``/healthz``) as text."""
        resp = self.open("GET", path, params=params, accept="*/*", timeout=timeout)
        try:
            data = resp.data
        finally:
            resp.release_conn()
        if not 200 <= resp.status < 300:
            decode(data, resp.status, str(resp.reason), f"GET {path}")
        return data.decode(errors="replace")

    # -- verbs ------------------------------------------------------------------------------------

    def get(self, path: str, *, params: Params = None, missing_ok: bool = False) -> Any:
        """GET ``path``; with ``missing_ok`` None when it does not exist."""
        try:
            return self.request("GET", path, params=params)
        except KubeError as exc:
            if missing_ok and exc.status == 404:
                return None
            raise

    def list(
        self,
        path: str,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        accept: str = JSON,
        timeout: float = 60.0,
    ) -> dict[str, Any]:
        """One list answer (``items``, ``metadata.resourceVersion`` and ``metadata.continue``)."""
        params = {"labelSelector": label_selector, "fieldSelector": field_selector, "limit": limit,
                  "continue": continue_token or None}
        return self.request("GET", path, params=params, accept=list_accept(accept), timeout=timeout)

    def list_all(
        self,
        path: str,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page: int = 500,
        accept: str = JSON,
    ) -> tuple[Objects, str]:
        """Every item, ``page`` at a time, and the list's resourceVersion (where a watch starts)."""
        items: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            answer = self.list(path, label_selector=label_selector, field_selector=field_selector, limit=page,
                               continue_token=token, accept=accept)
            items.extend(answer.get("items") or [])
            meta = answer.get("metadata") or {}
            token = meta.get("continue") or None
            if not token:
                return items, str(meta.get("resourceVersion") or "")

    @overload
    def create(
        self, path: str, body: dict[str, Any], *, dry_run: bool = False, exist_ok: Literal[False] = False
    ) -> dict[str, Any]: ...

    @overload
    def create(
        self, path: str, body: dict[str, Any], *, dry_run: bool = False, exist_ok: bool
    ) -> dict[str, Any] | None: ...

    def create(
        self, path: str, body: dict[str, Any], *, dry_run: bool = False, exist_ok: bool = False
    ) -> dict[str, Any] | None:
        """POST ``body`` to collection ``path``; with ``exist_ok`` None when it exists already."""
        try:
            return self.request("POST", path, body=body, params={"dryRun": "All"} if dry_run else None)
        except KubeError as exc:
            if exist_ok and exc.status == 409:
                return None
            raise

    def replace(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """PUT ``body`` (a whole object, e.g. a status subresource)."""
        return self.request("PUT", path, body=body)

    def patch(
        self,
        path: str,
        body: Any,
        *,
        kind: str = "merge",
        manager: str | None = None,
        force: bool = False,
    ) -> dict[str, Any]:
        """PATCH with ``kind`` merge, strategic, json (a list of operations) or apply (server-side apply)."""
        content_type, params = patch_args(kind, manager, force)
        return self.request("PATCH", path, body=body, content_type=content_type, params=params)

    def apply(self, path: str, body: dict[str, Any], *, manager: str = "dralab", force: bool = True) -> dict[str, Any]:
        """Server-side apply of ``body`` at its object path (creates or updates it)."""
        return self.patch(path, body, kind="apply", manager=manager, force=force)

    def delete(
        self,
        path: str,
        *,
        uid: str | None = None,
        grace_period_seconds: int | None = None,
        propagation: str | None = "Background",
        params: Params = None,
        missing_ok: bool = False,
    ) -> bool:
        """DELETE ``path`` (only if it still has ``uid``); with ``missing_ok`` False when it was gone."""
        try:
            self.request("DELETE", path, params=params, body=delete_options(uid, grace_period_seconds, propagation))
        except KubeError as exc:
            if missing_ok and exc.status == 404:
                return False
            raise
        return True

    def watch(
        self,
        path: str,
        *,
        resource_version: str = "",
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int = 300,
        bookmarks: bool = True,
        accept: str = JSON,
        stop: threading.Event | None = None,
        on_open: Callable[[Any], None] | None = None,
        gather_seconds: float = 0.0,
    ) -> Iterator[dict[str, Any]]:
        """One watch's events (``{"type", "object"}``) until the server ends it (``timeout_seconds``) or ``stop``.

        This is a single stream: :class:`dralab.kube.watch.ListWatch` lists, resumes and backs off
        around it. ``on_open`` receives the open response, so another thread can close it early.

        ``gather_seconds``: for watches that may lag a little (background work). The apiserver sends
        every event on its own, and a reader woken for each one pays a thread wake-up and cold caches
        per event: 0.2 ms of CPU for a claim's metadata at 200 events/s. So after an event that had to
        be waited for, the reader pauses this long and then takes what gathered in one go.
        """
        what = f"WATCH {path}"
        query = watch_params(resource_version, timeout_seconds, bookmarks, label_selector, field_selector)
        resp = self.open("GET", path, params=query, accept=accept, timeout=(10.0, timeout_seconds + 30.0))
        if not 200 <= resp.status < 300:
            try:
                data = resp.data
            finally:
                resp.release_conn()
            decode(data, resp.status, str(resp.reason), what)
        if on_open is not None:
            on_open(resp)
        buffer = b""
        pause = stop.wait if stop is not None else time.sleep
        try:
            reading = clock()
            for chunk in resp.stream(65536, decode_content=True):
                waited = clock() - reading > WAITED_SECONDS  # not already buffered
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        yield loads(line)
                    if stop is not None and stop.is_set():
                        return
                if gather_seconds > 0 and waited and pause(gather_seconds):
                    return  # stopped while gathering
                reading = clock()
        except KubeError:
            raise
        except Exception as exc:  # a cut connection or a response closed by another thread
            if stop is not None and stop.is_set():
                return
            raise KubeError(0, f"{type(exc).__name__}: {exc}", what=what) from None
        finally:
            resp.release_conn()
