"""The asyncio client: the webhook's admission-path calls without a thread per call.

It shares :mod:`dralab.kube.config` (credentials, TLS context, rotating token) and
:class:`~dralab.kube.errors.KubeError` with the synchronous client. Requests go over a bounded pool
of kept-alive HTTP/1.1 connections per event loop (:mod:`dralab.kube.http1`; aiohttp cost a quarter
of the webhook's CPU per admitted pod): the generated asyncio client would serialize every claim
field through its models on each call, and its own loaders would be a second copy of the credential
handling. Under load the event loop and a pool of worker threads fight over the GIL, which costs
throughput and tail latency; this does not.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, overload

import anyio

from dralab.kube.client import (
    JSON,
    Params,
    decode,
    delete_options,
    encode_body,
    patch_args,
    query_string,
    request_headers,
)
from dralab.kube.config import KubeConfig, load_config
from dralab.kube.errors import KubeError
from dralab.kube.http1 import ConnectionLost, Endpoint, Pool, request_bytes


class AsyncKube:
    """Raw JSON calls on asyncio; the session belongs to the running event loop, so it is made on first use."""

    def __init__(
        self,
        config: KubeConfig | str | Path | None = None,
        *,
        pool_size: int = 32,
        timeout: float = 10.0,
        user_agent: str = "dralab",
    ) -> None:
        self._config = config if isinstance(config, KubeConfig) else None
        self._kubeconfig = None if isinstance(config, KubeConfig) else config
        self.pool_size = pool_size
        self.timeout = timeout
        self.user_agent = user_agent
        self._pool_of: tuple[asyncio.AbstractEventLoop, Pool] | None = None

    @property
    def config(self) -> KubeConfig:
        """The credentials (loaded on first use when a kubeconfig path or nothing was given)."""
        if self._config is None:
            self._config = load_config(self._kubeconfig)
        return self._config

    def _pool(self) -> Pool:
        """The running event loop's connection pool (connections belong to one loop), made on first use."""
        loop = asyncio.get_running_loop()
        if self._pool_of is None or self._pool_of[0] is not loop:
            endpoint = Endpoint.parse(self.config.host)
            ctx = self.config.ssl_context() if endpoint.tls else None
            self._pool_of = (loop, Pool(endpoint, ctx, self.pool_size))
        return self._pool_of[1]

    async def warm(self, connections: int = 1) -> None:
        """Open ``connections`` to the apiserver now (TLS handshakes before serving, not under load)."""
        await self._pool().warm(connections)

    async def close(self) -> None:
        if self._pool_of is not None:
            pool, self._pool_of = self._pool_of[1], None
            await pool.close()

    async def request(
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
        """One call; the decoded JSON answer (``{}`` when empty), or :class:`KubeError`."""
        what = f"{method} {path}"
        pool = self._pool()
        data = encode_body(body)
        headers = request_headers(self.config, self.user_agent, accept, content_type if data is not None else None)
        limit = self.timeout if timeout is None else timeout
        message = request_bytes(method, pool.endpoint, path + query_string(params), headers, data)
        try:
            async with asyncio.timeout(limit):
                status, reason, raw = await pool.call(message)
        except TimeoutError:
            raise KubeError(0, f"TimeoutError: no answer within {limit:g} s", what=what) from None
        except (OSError, ConnectionLost, ssl.SSLError) as exc:  # refused, reset, closed
            raise KubeError(0, f"{type(exc).__name__}: {exc}", what=what) from None
        return decode(raw, status, reason, what)

    async def get(self, path: str, *, params: Params = None, missing_ok: bool = False) -> Any:
        try:
            return await self.request("GET", path, params=params)
        except KubeError as exc:
            if missing_ok and exc.status == 404:
                return None
            raise

    @overload
    async def create(
        self, path: str, body: dict[str, Any], *, dry_run: bool = False, exist_ok: Literal[False] = False
    ) -> dict[str, Any]: ...

    @overload
    async def create(
        self, path: str, body: dict[str, Any], *, dry_run: bool = False, exist_ok: bool
    ) -> dict[str, Any] | None: ...

    async def create(
        self, path: str, body: dict[str, Any], *, dry_run: bool = False, exist_ok: bool = False
    ) -> dict[str, Any] | None:
        try:
            return await self.request("POST", path, body=body, params={"dryRun": "All"} if dry_run else None)
        except KubeError as exc:
            if exist_ok and exc.status == 409:
                return None
            raise

    async def patch(self, path: str, body: Any, *, kind: str = "merge", manager: str | None = None,
                    force: bool = False) -> dict[str, Any]:
        content_type, params = patch_args(kind, manager, force)
        return await self.request("PATCH", path, body=body, content_type=content_type, params=params)

    async def delete(
        self,
        path: str,
        *,
        uid: str | None = None,
        grace_period_seconds: int | None = None,
        propagation: str | None = "Background",
        missing_ok: bool = False,
    ) -> bool:
        try:
            await self.request("DELETE", path, body=delete_options(uid, grace_period_seconds, propagation))
        except KubeError as exc:
            if missing_ok and exc.status == 404:
                return False
            raise
        return True


async def call_api(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call a client method from async code: await :class:`AsyncKube`'s, run a blocking client's (tests'
    fakes, the sync :class:`~dralab.kube.Kube`) in a worker thread. The webhook's parts take either."""
    if inspect.iscoroutinefunction(fn):
        return await fn(*args, **kwargs)
    return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))
