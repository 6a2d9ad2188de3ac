"""The webhook's connections: TLS under a handshake deadline, and a request deadline on every connection.

uvicorn alone keeps a connection open as long as the client likes before its first request (and during a
TLS handshake that never finishes, up to asyncio's 60 s), and reads headers sent one byte at a time
forever. Here uvicorn serves plain HTTP on a protocol that starts TLS itself (``loop.start_tls`` with a
handshake timeout) and closes any connection that has not delivered a complete request within
``read_timeout`` of connecting or of its previous answer. A request being answered is not cut off: the
admission deadline bounds that.

The TLS context is read from ``tls`` on every connection, so a reloaded certificate is used by the next
handshake without touching connections in progress.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from dralab.util import get_logger

log = get_logger("dralab.webhook.transport")
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


class _Guards:
    """TLS started under a deadline and a per-request read deadline, over either of uvicorn's HTTP/1.1 protocols.

    Mixed in before the protocol class; class attributes are set by :func:`guarded_protocol` (uvicorn
    instantiates the class itself).
    """

    tls: Any = None  # an object with a ``context`` (ssl.SSLContext) attribute, or None for plain HTTP
    read_timeout: float = 10.0
    handshake_timeout: float = 5.0
    max_head_bytes: int = MAX_HEAD_BYTES

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._deadline: asyncio.TimerHandle | None = None
        if self.tls is None:
            self._ready(transport)
            return
        transport.pause_reading()  # the ClientHello waits for start_tls
        self._raw = transport
        self._handshake = asyncio.get_running_loop().create_task(self._start_tls(transport))

    async def _start_tls(self, transport: asyncio.Transport) -> None:
        loop = asyncio.get_running_loop()
        try:
            secured = await loop.start_tls(
                transport, self, self.tls.context, server_side=True, ssl_handshake_timeout=self.handshake_timeout
            )
        except asyncio.CancelledError:
            transport.abort()
            raise
        except Exception as exc:  # timeout, reset, not TLS at all: the connection just ends
            log.debug("TLS handshake failed", extra={"fields": {"error": f"{type(exc).__name__}: {exc}"}})
            transport.abort()
            return
        if secured is None or secured.is_closing():
            transport.abort()
            return
        self._ready(secured)  # type: ignore[arg-type]

    def _ready(self, transport: asyncio.Transport) -> None:
        super().connection_made(Coalescing(transport, asyncio.get_running_loop()))  # type: ignore[arg-type]
        self._arm()
        for data in getattr(self, "_early", ()):  # decrypted before start_tls returned
            self.data_received(data)
        self._early = []

    # -- the request deadline -------------------------------------------------------------

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.read_timeout, self._expired)

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
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self.transport is None:  # lost during the handshake: uvicorn never saw this connection
            return
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.transport is None:  # request bytes decrypted with the handshake's last flight
            if not hasattr(self, "_early"):
                self._early: list[bytes] = []
            self._early.append(data)
            return
        super().data_received(data)

    def shutdown(self) -> None:
        if self.transport is None:
            with contextlib.suppress(Exception):
                self._raw.abort()
            return
        super().shutdown()


class GuardedH11(_Guards, H11Protocol):  # type: ignore[misc]
    """uvicorn's h11 protocol under the guards; h11 bounds the request line and headers itself
    (``h11_max_incomplete_event_size``, which the server sets to :data:`MAX_HEAD_BYTES`)."""


class GuardedHttpTools(_Guards, HttpToolsProtocol):  # type: ignore[misc]
    """uvicorn's httptools (llhttp) protocol under the guards: the same HTTP/1.1 at a fraction of h11's CPU.

    llhttp hands the request line and headers over in pieces and keeps no limit of its own, so the bytes
    a request's head takes are counted here: a connection whose head is still incomplete after
    ``max_head_bytes`` gets 431 and is closed, as h11 does with its limit.
    """

    def _ready(self, transport: asyncio.Transport) -> None:
        self._head = 0  # bytes of the current request's head so far; None once its headers are complete
        super()._ready(transport)

    def on_headers_complete(self) -> None:
        self._head = None
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        # The next request's head starts; what follows in this same read goes uncounted (one read at most).
        self._head = 0
        super().on_message_complete()

    def data_received(self, data: bytes) -> None:
        if self.transport is None:
            super().data_received(data)  # early data: kept by the guards until TLS is up
            return
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


def guarded_protocol(tls: Any, read_timeout: float, handshake_timeout: float, http: str = "httptools") -> type[Any]:
    """A protocol class for ``uvicorn.Config(http=...)`` bound to ``tls`` and the two deadlines.

    ``http``: ``httptools`` (the default: llhttp, C) or ``h11`` (pure Python, several times the CPU per request).
    """
    base = PROTOCOLS[http]
    return type(
        f"{base.__name__}Bound",
        (base,),
        {"tls": tls, "read_timeout": float(read_timeout), "handshake_timeout": float(handshake_timeout)},
    )
