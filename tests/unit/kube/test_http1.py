"""The admission path's HTTP/1.1 pool: reuse, bounds, chunked answers, and a stale connection sent again once."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from dralab.kube.http1 import ConnectionLost, Endpoint, Pool, request_bytes

OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"ok\":true}"
CHUNKED = b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{\"a\"\r\n3\r\n:1}\r\n0\r\n\r\n"

Serve = Callable[[asyncio.StreamReader, asyncio.StreamWriter, int], Awaitable[None]]


async def read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return head + (await reader.readexactly(length) if length else b"")


async def with_server(serve: Serve, body: Callable[[Pool], Awaitable[None]], size: int = 4) -> list[bytes]:
    """Run ``body`` against a plain-HTTP server whose connection number ``n`` is handled by ``serve``."""
    seen: list[bytes] = []
    count = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal count
        count += 1
        try:
            await serve(reader, writer, count)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def answering(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        seen.append(await read_request(reader))
        await serve(reader, writer, n)

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    pool = Pool(Endpoint.parse(f"http://127.0.0.1:{port}/prefix"), None, size)
    try:
        await body(pool)
    finally:
        await pool.close()
        server.close()
    return seen


def test_calls_reuse_one_kept_alive_connection_and_read_chunked_answers() -> None:
    requests: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        for answer in (OK, CHUNKED):
            requests.append(await read_request(reader))
            writer.write(answer)
            await writer.drain()
        await reader.read()

    async def body(pool: Pool) -> None:
        first = await pool.call(request_bytes("GET", pool.endpoint, "/version", {"Accept": "application/json"}, None))
        second = await pool.call(request_bytes("POST", pool.endpoint, "/x?dryRun=All", {}, b'{"b":2}'))
        assert first == (200, "OK", b'{"ok":true}')
        assert second == (201, "Created", b'{"a":1}')
        assert pool.opened == 1

    asyncio.run(with_server(serve, body))
    assert requests[0].startswith(b"GET /prefix/version HTTP/1.1\r\nHost: 127.0.0.1:")
    assert b"Content-Length" not in requests[0]
    assert requests[1].startswith(b"POST /prefix/x?dryRun=All HTTP/1.1\r\n")
    assert requests[1].endswith(b"Content-Length: 7\r\n\r\n{\"b\":2}")


def test_an_idle_connection_the_server_closed_is_replaced_and_the_call_sent_again() -> None:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        writer.write(OK)
        await writer.drain()
        if n == 1:
            return  # closes after one answer, as an apiserver does with an idle connection
        await read_request(reader)
        writer.write(OK)
        await writer.drain()
        await reader.read()

    async def body(pool: Pool) -> None:
        message = request_bytes("GET", pool.endpoint, "/a", {}, None)
        assert (await pool.call(message))[0] == 200
        assert (await pool.call(message))[0] == 200  # the first connection was gone: sent once more
        assert pool.opened == 2

    asyncio.run(with_server(serve, body))


def test_a_connection_lost_mid_answer_is_an_error_not_a_repeat() -> None:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        writer.write(OK[:40])  # part of the head, then gone: the request may have taken effect
        await writer.drain()

    async def body(pool: Pool) -> None:
        with pytest.raises(ConnectionLost) as err:
            await pool.call(request_bytes("POST", pool.endpoint, "/a", {}, b"{}"))
        assert err.value.answered
        assert pool.opened == 1 and pool.idle == []

    asyncio.run(with_server(serve, body))


def test_calls_beyond_the_pool_size_wait_for_a_connection_instead_of_opening_more() -> None:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        while True:
            await read_request(reader)
            writer.write(OK)
            await writer.drain()

    async def body(pool: Pool) -> None:
        message = request_bytes("GET", pool.endpoint, "/a", {}, None)
        answers = await asyncio.gather(*(pool.call(message) for _ in range(10)))
        assert [a[0] for a in answers] == [200] * 10
        assert pool.opened == 2 and len(pool.idle) == 2

    asyncio.run(with_server(serve, body, size=2))


def test_warm_opens_connections_up_to_the_pool_size() -> None:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await reader.read()

    async def body(pool: Pool) -> None:
        await pool.warm(5)
        assert pool.opened == 3 and len(pool.idle) == 3
        await pool.warm(2)  # already there
        assert pool.opened == 3

    asyncio.run(with_server(serve, body, size=3))


def test_request_lines_cannot_carry_line_breaks_and_urls_are_checked() -> None:
    endpoint = Endpoint.parse("https://[::1]:6443")
    assert (endpoint.host, endpoint.port, endpoint.tls, endpoint.prefix) == ("::1", 6443, True, "")
    with pytest.raises(ValueError, match="Authorization"):
        request_bytes("GET", endpoint, "/a", {"Authorization": "Bearer x\r\nX-Evil: 1"}, None)
    with pytest.raises(ValueError, match="expected https"):
        Endpoint.parse("ftp://host")
    with pytest.raises(ValueError, match="at least 1"):
        Pool(endpoint, None, 0)
