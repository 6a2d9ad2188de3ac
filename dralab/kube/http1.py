"""A small HTTP/1.1 client over asyncio streams: kept-alive TLS connections to one apiserver.

The admission path makes small JSON calls (create a claim, read one, delete one) on kept-alive
connections. aiohttp spent ~0.25 ms of CPU on each such call over what this needs (request and
response objects, cookie and redirect handling, its own header parsing), a quarter of the webhook's
CPU per admitted pod. Here a request is one ``write`` of the head and body, and the response is
parsed by httptools (llhttp, in C; Content-Length or chunked).

The pool is bounded: at most ``size`` calls are in flight, each on its own connection, and a call
beyond that waits for one to finish (bounded by its timeout) instead of opening yet another TLS
connection, whose handshake costs both sides far more CPU than a create. Idle connections are
reused newest first. A reused connection the apiserver closed meanwhile fails before any answer
arrives; that call is sent once more on a new connection (the admission path's calls are
idempotent: a repeated create meets 409 with the request's own admission UID, a repeated delete
carries the claim's UID as precondition).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httptools

READ_CHUNK = 64 * 1024


class ConnectionLost(Exception):
    """The connection ended before a complete answer; ``answered``: whether any of the answer had arrived."""

    def __init__(self, message: str, answered: bool) -> None:
        super().__init__(message)
        self.answered = answered


@dataclass
class _Answer:
    """httptools callbacks: the status, the body pieces, and whether the message is complete."""

    status: int = 0
    reason: str = ""
    body: list[bytes] = field(default_factory=list)
    complete: bool = False
    keep: bool = False
    parser: Any = None

    def on_headers_complete(self) -> None:
        # read here: once the message is complete the parser has moved on to the next one
        self.status = self.parser.get_status_code()
        self.keep = self.parser.should_keep_alive()

    def on_status(self, reason: bytes) -> None:
        self.reason += reason.decode("latin-1")

    def on_body(self, chunk: bytes) -> None:
        self.body.append(chunk)

    def on_message_complete(self) -> None:
        self.complete = True


@dataclass(frozen=True)
class Endpoint:
    """Where the apiserver is: address, TLS name, the ``Host`` header and a path prefix (from its URL)."""

    host: str
    port: int
    tls: bool
    authority: str
    prefix: str

    @classmethod
    def parse(cls, url: str) -> Endpoint:
        parts = urlsplit(url)
        if parts.scheme not in ("https", "http") or not parts.hostname:
            raise ValueError(f"apiserver URL {url!r}: expected https://host[:port]")
        tls = parts.scheme == "https"
        return cls(parts.hostname, parts.port or (443 if tls else 80), tls, parts.netloc, parts.path.rstrip("/"))


class Connection:
    """One kept-alive connection; one call at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, endpoint: Endpoint, ctx: ssl.SSLContext | None) -> Connection:
        reader, writer = await asyncio.open_connection(
            endpoint.host, endpoint.port, ssl=ctx if endpoint.tls else None,
            server_hostname=endpoint.host if endpoint.tls else None, limit=READ_CHUNK)
        return cls(reader, writer)

    async def call(self, request: bytes) -> tuple[int, str, bytes, bool]:
        """Send ``request`` (head and body); the answer: status, reason, body, whether to keep the connection."""
        self.writer.write(request)
        answer = _Answer()
        parser = answer.parser = httptools.HttpResponseParser(answer)
        received = False
        while not answer.complete:
            try:
                data = await self.reader.read(READ_CHUNK)
            except (ConnectionError, ssl.SSLError) as exc:
                raise ConnectionLost(f"{type(exc).__name__}: {exc}", received) from None
            if not data:
                raise ConnectionLost("the apiserver closed the connection", received)
            received = True
            try:
                parser.feed_data(data)
            except httptools.HttpParserError as exc:
                raise ConnectionLost(f"unreadable HTTP answer: {exc}", True) from None
        body = answer.body[0] if len(answer.body) == 1 else b"".join(answer.body)
        return answer.status, answer.reason, body, answer.keep

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()


class Pool:
    """At most ``size`` connections to one endpoint, for one event loop (see the module docstring)."""

    def __init__(self, endpoint: Endpoint, ctx: ssl.SSLContext | None, size: int) -> None:
        if size < 1:
            raise ValueError(f"pool size must be at least 1, got {size}")
        self.endpoint = endpoint
        self.ctx = ctx
        self.size = size
        self.idle: list[Connection] = []
        self.opened = 0  # connections opened so far (a figure for tests and metrics)
        self._slots = asyncio.Semaphore(size)

    async def _connect(self) -> Connection:
        conn = await Connection.open(self.endpoint, self.ctx)
        self.opened += 1
        return conn

    async def warm(self, count: int) -> None:
        """Open up to ``count`` connections now and keep them idle (before serving, not on the first calls)."""
        count = min(count, self.size) - len(self.idle)
        if count > 0:
            self.idle.extend(await asyncio.gather(*(self._connect() for _ in range(count))))

    async def call(self, request: bytes) -> tuple[int, str, bytes]:
        async with self._slots:
            reused = bool(self.idle)
            conn = self.idle.pop() if reused else await self._connect()
            try:
                try:
                    status, reason, body, keep = await conn.call(request)
                except ConnectionLost as exc:
                    conn.close()
                    if not reused or exc.answered:
                        raise
                    conn = await self._connect()  # the apiserver had closed the idle connection: once more
                    status, reason, body, keep = await conn.call(request)
            except BaseException:  # failed, timed out or cancelled mid-call: the connection's state is unknown
                conn.close()
                raise
            if keep:
                self.idle.append(conn)
            else:
                conn.close()
            return status, reason, body

    async def close(self) -> None:
        idle, self.idle = self.idle, []
        for conn in idle:
            conn.close()
        for conn in idle:
            with contextlib.suppress(Exception):
                await conn.writer.wait_closed()


def request_bytes(method: str, endpoint: Endpoint, target: str, headers: dict[str, str], body: bytes | None) -> bytes:
    """The request's head and body as sent: ``target`` is the path and query (the endpoint's prefix is added)."""
    lines = [f"{method} {endpoint.prefix}{target} HTTP/1.1", f"Host: {endpoint.authority}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    for line in lines:
        if "\r" in line or "\n" in line:  # a token or path must not add headers of its own
            raise ValueError(f"line break in an HTTP request line or header: {line.split(':')[0]!r}")
    if body is not None or method in ("POST", "PUT", "PATCH"):
        lines.append(f"Content-Length: {len(body or b'')}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head + body if body else head
