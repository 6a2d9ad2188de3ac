"""Attack: an endless request line or header block. Both HTTP/1.1 parsers the webhook can serve with
(httptools, the default, and h11) refuse a head that grows past ``MAX_HEAD_BYTES`` unfinished and close
the connection (a bound on what one connection's head can hold), while large heads below it, and
requests pipelined in one write, are answered as usual.
"""

from __future__ import annotations

import json
import ssl
from pathlib import Path

import pytest

from dralab.webhook.limits import ServerLimits
from dralab.webhook.transport import MAX_HEAD_BYTES

from ._webhook import gpu_pod, review, serve

PARSERS = ["httptools", "h11"]


def _request(body: bytes, extra: str = "") -> bytes:
    return (f"POST /mutate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n{extra}\r\n").encode() + body


def _read_all(sock: ssl.SSLSocket) -> tuple[bytes, bool]:
    """What the server sends, and whether it closed the connection before the socket's timeout."""
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except (ConnectionResetError, ssl.SSLEOFError, ssl.SSLZeroReturnError):
        pass
    except TimeoutError:
        return data, False
    return data, True


@pytest.mark.parametrize("http", PARSERS)
def test_a_head_growing_past_the_limit_is_refused_and_the_connection_closed(tmp_path: Path, http: str) -> None:
    # The head never ends; the read deadline (60 s) is far beyond the socket's wait (30 s), so only the
    # head limit can close this connection in time.
    limits = ServerLimits(read_timeout_seconds=60.0)
    head = _request(b"")[:-2] + b"X-Pad: "
    with serve(tmp_path, server_kwargs={"http": http, "limits": limits}) as served, \
            served.tls_socket(timeout=30) as sock:
        try:
            sock.sendall(head)
            for _ in range(2 * MAX_HEAD_BYTES // 4096):
                sock.sendall(b"a" * 4096)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            pass  # closed while the head was still arriving
        data, closed = _read_all(sock)
    assert closed, "the server kept reading a head past its limit"
    if data:  # an answer, if any, is an HTTP error
        assert int(data.split(b" ", 2)[1]) in (400, 431), data[:200]


@pytest.mark.parametrize("http", PARSERS)
def test_a_large_head_below_the_limit_and_pipelined_requests_are_answered(tmp_path: Path, http: str) -> None:
    body = json.dumps(review(gpu_pod())).encode()
    padding = "X-Pad: " + "a" * (MAX_HEAD_BYTES // 2) + "\r\n"
    with serve(tmp_path, server_kwargs={"http": http}) as served, served.tls_socket(timeout=15) as sock:
        sock.sendall(_request(body, padding) + _request(body) + _request(body, "Connection: close\r\n"))
        data, closed = _read_all(sock)
    assert closed
    assert data.count(b"HTTP/1.1 200 ") == 3, data[:300]
    assert data.count(b'"allowed":true') == 3
