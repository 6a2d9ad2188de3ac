"""The webhook's connections: TLS under a handshake deadline, and a request deadline on every connection.

uvicorn alone keeps a connection open as long as the client likes before its first request (and during a
TLS handshake that never finishes, up to the event loop's default of 60 s), and reads headers sent one
byte at a time forever. Here the listening server is created with the server's TLS context and a
handshake deadline (:class:`TLSServer`), and the HTTP protocol closes any connection that has not
delivered a complete request within ``read_timeout`` of that request's first byte. Before that byte, after
the handshake or after an answer, a connection may wait ``idle_timeout``, longer than the apiserver keeps
an idle connection to a webhook (90 s, Go's ``IdleConnTimeout``), so the client closes it first: a server
that closes it as the client sends an admission on it fails that admission with EOF. Go's transport puts
connections it dialed for a request that another connection served into its idle pool unused, so a fresh
connection is an idle one too: with the 10 s ``read_timeout`` after an answer, 24 pod creates of a 500-node
fill failed with EOF (README "Scale", item 22), and with it after the handshake, 7 of a 50-node burst (item
26). A request being answered is not cut off: the admission deadline bounds that.

The listener's context picks the current certificate during each handshake
(:meth:`dralab.webhook.tls.ReloadingTLS.listener`), so a reloaded certificate is used by the next
handshake without touching connections in progress. This works the same on asyncio's loop and on
uvloop, which starts reading a new connection on its own and so leaves no room for starting TLS late.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

MAX_HEAD_BYTES = 64 * 1024  # request line and headers of one request


class Coalescing:
    """A transport whose writes within one event loop step leave as one (one TLS record, one ``send``).

    uvicorn writes a response's headers and its body separately; on loopback each ``send`` costs the
    kernel's work for both ends, so an admission answer in one write saves CPU per request. Everything
    but writing and closing is the wrapped transport's; a close sends what is buffered first.
    """

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._buffer: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self._buffer:
            self._loop.call_soon(self.flush)
        self._buffer.append(bytes(data))

    def writelines(self, chunks: Any) -> None:
        for chunk in chunks:
            self.write(chunk)

    def flush(self) -> None:
        if not self._buffer:
            return
        data = b"".join(self._buffer)
        self._buffer.clear()
        if not self._transport.is_closing():
            self._transport.write(data)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


if TYPE_CHECKING:

    class _UvicornProtocol(asyncio.Protocol):
        """What the guards use of the uvicorn protocol they are mixed into (both of its HTTP/1.1 protocols)."""

        loop: asyncio.AbstractEventLoop
        cycle: Any  # the request-response cycle in progress, or None
        transport: asyncio.Transport

        def on_response_complete(self) -> None: ...

else:
    _UvicornProtocol = object


class _Guards(_UvicornProtocol):
    """A per-request read deadline over either of uvicorn's HTTP/1.1 protocols.

    Mixed in before the protocol class; class attributes are set by :func:`guarded_protocol` (uvicorn
    instantiates the class itself). With TLS, ``connection_made`` comes after the handshake.
    """

    read_timeout: float = 10.0
    idle_timeout: float = 120.0
    max_head_bytes: int = MAX_HEAD_BYTES
    on_connection: Callable[[], None] | None = None  # counts connections (after the handshake, with TLS)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._deadline: asyncio.TimerHandle | None = None
        # before a request's first byte: after the handshake (a client's pool may hold a connection it
        # has not used yet) or after an answer; idle_timeout, then read_timeout from that byte
        self._idle = True
        if self.on_connection is not None:
            self.on_connection()
        super().connection_made(Coalescing(transport, asyncio.get_running_loop()))  # type: ignore[arg-type]
        self._arm(self.idle_timeout)

    def data_received(self, data: bytes) -> None:
        if self._idle:  # the next request has begun: it has read_timeout to arrive whole
            self._idle = False
            self._arm(self.read_timeout)
        super().data_received(data)

    # -- the request deadline -------------------------------------------------------------

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, self._expired)

    def _disarm(self) -> None:
        if getattr(self, "_deadline", None) is not None:
            self._deadline.cancel()  # type: ignore[union-attr]
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        cycle = self.cycle
        waiting_for_request = cycle is None or cycle.response_complete or cycle.more_body
        if waiting_for_request and self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._idle = True
            self._arm(self.idle_timeout)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)


class GuardedH11(_Guards, H11Protocol):
    """uvicorn's h11 protocol under the guards; h11 bounds the request line and headers itself
    (``h11_max_incomplete_event_size``, which the server sets to :data:`MAX_HEAD_BYTES`)."""


class GuardedHttpTools(_Guards, HttpToolsProtocol):
    """uvicorn's httptools (llhttp) protocol under the guards: the same HTTP/1.1 at a fraction of h11's CPU.

    llhttp hands the request line and headers over in pieces and keeps no limit of its own, so the bytes
    a request's head takes are counted here: a connection whose head is still incomplete after
    ``max_head_bytes`` gets 431 and is closed, as h11 does with its limit.
    """

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._head: int | None = 0  # bytes of the current request's head so far; None once its headers are complete
        super().connection_made(transport)

    def on_headers_complete(self) -> None:
        self._head = None
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        # The next request's head starts; what follows in this same read goes uncounted (one read at most).
        self._head = 0
        super().on_message_complete()

    def data_received(self, data: bytes) -> None:
        if self._head is not None:
            self._head += len(data)
        super().data_received(data)
        if self._head is not None and self._head > self.max_head_bytes and not self.transport.is_closing():
            msg = f"request line and headers over {self.max_head_bytes} bytes"
            self.transport.write(
                b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain; charset=utf-8\r\n"
                b"connection: close\r\ncontent-length: " + str(len(msg)).encode() + b"\r\n\r\n" + msg.encode()
            )
            self.transport.close()


PROTOCOLS: dict[str, type[_Guards]] = {"h11": GuardedH11, "httptools": GuardedHttpTools}


def guarded_protocol(read_timeout: float, http: str = "httptools",
                     on_connection: Callable[[], None] | None = None, idle_timeout: float = 120.0) -> type[Any]:
    """A protocol class for ``uvicorn.Config(http=...)`` bound to the request deadline and the idle one.

    ``http``: ``httptools`` (the default: llhttp, C) or ``h11`` (pure Python, several times the CPU per request);
    ``on_connection``: called for every connection accepted (with TLS, once its handshake is done).
    """
    base = PROTOCOLS[http]
    attrs: dict[str, Any] = {"read_timeout": float(read_timeout), "idle_timeout": float(idle_timeout)}
    if on_connection is not None:
        attrs["on_connection"] = staticmethod(on_connection)
    return type(f"{base.__name__}Bound", (base,), attrs)


class TLSServer(uvicorn.Server):
    """uvicorn's server listening with TLS under a handshake deadline, on one socket.

    uvicorn creates its listener without a handshake deadline (the loop's default is 60 s); this
    startup is uvicorn's own for one socket, with ``ssl_handshake_timeout`` added.
    """

    def __init__(self, config: uvicorn.Config, context: ssl.SSLContext | None, handshake_timeout: float,
                 sock: socket.socket | None = None, drain_seconds: float = 0.0,
                 on_drain: Callable[[], None] | None = None) -> None:
        """``context``: the listener's (None: plain HTTP); ``sock``: a listening socket (else host and port);
        ``drain_seconds``: how long the first SIGTERM/SIGINT leaves the listener open (:meth:`handle_exit`),
        ``on_drain``: called when that drain starts (the app stops being ready)."""
        super().__init__(config)
        self.context = context
        self.handshake_timeout = handshake_timeout
        self.sock = sock
        self.drain_seconds = drain_seconds
        self.on_drain = on_drain
        self._drain: tuple[float, int, FrameType | None] | None = None  # since (monotonic), signal, frame

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """The first stop signal starts a drain of ``drain_seconds``; the listener closes when it ends
        (:meth:`on_tick`) or at a second signal. uvicorn alone closes it at once, while the endpoint is still
        in the Service: connections routed to it in that window, and pooled ones the apiserver reuses, end
        in a reset or EOF, an admission error under ``failurePolicy: Fail``."""
        if self.drain_seconds > 0 and self._drain is None:
            self._drain = (time.monotonic(), sig, frame)
            if self.on_drain is not None:
                self.on_drain()
            return
        super().handle_exit(sig, frame)

    async def on_tick(self, counter: int) -> bool:
        if self._drain is not None and not self.should_exit and time.monotonic() - self._drain[0] >= self.drain_seconds:
            super().handle_exit(*self._drain[1:])
        return await super().on_tick(counter)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await self.lifespan.startup()
        config = self.config

        def protocol() -> asyncio.Protocol:
            return config.http_protocol_class(config=config, server_state=self.server_state,  # type: ignore[call-arg]
                                              app_state=self.lifespan.state)

        sock = sockets[0] if sockets else self.sock if self.sock is not None else config.bind_socket()
        tls: dict[str, Any] = {}
        if self.context is not None:
            tls = {"ssl": self.context, "ssl_handshake_timeout": self.handshake_timeout}
        server = await asyncio.get_running_loop().create_server(protocol, sock=sock, backlog=config.backlog, **tls)
        self.servers = [server]
        self.started = True
