"""The asyncio client: the webhook's admission-path calls without a thread per call.

It shares :mod:`dralab.kube.config` (credentials, TLS context, rotating token) and
:class:`~dralab.kube.errors.KubeError` with the synchronous client. Requests go straight over an
aiohttp session (the transport ``kubernetes.aio`` itself uses), kept alive per event loop: the
generated asyncio client would serialize every claim field through its models on each call, and
its own loaders would be a second copy of the credential handling. Under load the event loop and
a pool of worker threads fight over the GIL, which costs throughput and tail latency; this does not.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

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


class AsyncKube:
    """Raw JSON calls on asyncio; the session belongs to the running event loop, so it is made on first use."""

    def __init__(
        self,
        config: KubeConfig | str | Path | None = None,
        *,
        pool_size: int = 64,
        timeout: float = 10.0,
        user_agent: str = "dralab",
    ) -> None:
        self._config = config if isinstance(config, KubeConfig) else None
        self._kubeconfig = None if isinstance(config, KubeConfig) else config
        self.pool_size = pool_size
        self.timeout = timeout
        self.user_agent = user_agent
        self._session: Any = None
        self._lock: asyncio.Lock | None = None

    @property
    def config(self) -> KubeConfig:
        """The credentials (loaded on first use when a kubeconfig path or nothing was given)."""
        if self._config is None:
            self._config = load_config(self._kubeconfig)
        return self._config

    async def _pool(self) -> Any:
        """The kept-alive connection pool: the shared TLS context, no environment lookups.

        ``trust_env`` is off: a trusting session looks up ~/.netrc and proxy variables in worker
        threads on every request; the apiserver is reached directly.
        """
        if self._session is not None:
            return self._session
        import aiohttp

        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._session is None:
                connector = aiohttp.TCPConnector(limit=self.pool_size, ssl=self.config.ssl_context(),
                                                 keepalive_timeout=60)
                self._session = aiohttp.ClientSession(connector=connector, trust_env=False)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

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
        import aiohttp

        what = f"{method} {path}"
        session = await self._pool()
        data = encode_body(body)
        headers = request_headers(self.config, self.user_agent, accept, content_type if data is not None else None)
        limit = self.timeout if timeout is None else timeout
        try:
            async with session.request(
                method, self.config.host + path + query_string(params), data=data, headers=headers,
                timeout=aiohttp.ClientTimeout(total=limit),
            ) as resp:
                raw = await resp.read()
                status, reason = resp.status, str(resp.reason)
        except Exception as exc:  # refused, reset, timed out
            raise KubeError(0, f"{type(exc).__name__}: {exc}", what=what) from None
        return decode(raw, status, reason, what)

    async def get(self, path: str, *, params: Params = None, missing_ok: bool = False) -> Any:
        try:
            return await self.request("GET", path, params=params)
        except KubeError as exc:
            if missing_ok and exc.status == 404:
                return None
            raise

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
