"""Attack 3: no limits on the webhook's transport. Oversized bodies are refused before they are
read, idle and trickling connections are closed, and concurrent admissions are capped.

Sockets wait at most 15 s for the server to act; the server under test closes after 2 s.
"""

from __future__ import annotations

import json
import socket
import ssl
import time
from pathlib import Path

import pytest

from dralab.util import wait_for
from dralab.webhook.limits import ServerLimits

from ._webhook import gpu_pod, review, serve

LIMITS = ServerLimits(max_body_bytes=64 * 1024, read_timeout_seconds=2.0, handshake_timeout_seconds=2.0,
                      max_inflight=2, idle_timeout_seconds=2.0)
# a kept-alive connection may idle far longer than a request may take to arrive
PATIENT = ServerLimits(read_timeout_seconds=1.0, handshake_timeout_seconds=2.0, idle_timeout_seconds=60.0)
GIVE_UP = 15.0


@pytest.fixture
def served(tmp_path: Path):
    with serve(tmp_path, server_kwargs={"limits": LIMITS}) as s:
        yield s


def _head(path: str, length: int | None, extra: str = "") -> bytes:
    size = f"Content-Length: {length}\r\n" if length is not None else "Transfer-Encoding: chunked\r\n"
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{size}{extra}\r\n").encode()


def _received_through(sock: socket.socket, marker: bytes, what: str) -> bytes:
    """What the server sent up to and including the first ``marker`` (and what came in the same reads)."""
    data = b""
    while marker not in data:
        chunk = sock.recv(4096)
        if not chunk:
            raise AssertionError(f"connection closed before {what}; got {data!r}")
        data += chunk
    return data


def _read_status(sock: socket.socket) -> int:
    return int(_received_through(sock, b"\r\n", "a status line").split(b" ", 2)[1])


def _read_response(sock: socket.socket) -> int:
    """The status of one whole answer (head and Content-Length body), leaving the connection at the next."""
    head, _, body = _received_through(sock, b"\r\n\r\n", "a whole head").partition(b"\r\n\r\n")
    length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")[1:]
                  if line.lower().startswith(b"content-length:"))
    while len(body) < length:
        chunk = sock.recv(4096)
        if not chunk:
            raise AssertionError("connection closed inside the body")
        body += chunk
    assert len(body) == length, "nothing past the answer: the client sent one request at a time"
    return int(head.split(b" ", 2)[1])


def _closed_by_server(sock: socket.socket) -> bool:
    """True when the server ends the connection (EOF or reset) before the socket's timeout."""
    try:
        while True:
            if not sock.recv(4096):
                return True
    except (ConnectionResetError, ssl.SSLEOFError, ssl.SSLZeroReturnError):
        return True
    except TimeoutError:
        return False


def test_declared_oversized_body_is_refused_before_it_is_sent(served) -> None:
    with served.tls_socket(timeout=GIVE_UP) as sock:
        sock.sendall(_head("/mutate", 300 * 1024 * 1024) + b"{")  # 300 MiB announced, one byte sent
        assert _read_status(sock) == 413


def test_chunked_oversized_body_is_refused_as_soon_as_it_passes_the_limit(served) -> None:
    with served.tls_socket(timeout=GIVE_UP) as sock:
        sock.sendall(_head("/mutate", None))
        chunk = b"x" * 16384
        for _ in range(8):  # 128 KiB sent, never terminated: only the limit can end this request
            sock.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
        assert _read_status(sock) == 413


def test_idle_tls_connection_is_closed(served) -> None:
    with served.tls_socket(timeout=GIVE_UP) as sock:
        assert _closed_by_server(sock)


def test_connection_that_never_starts_tls_is_closed(served) -> None:
    with socket.create_connection(("127.0.0.1", served.port), timeout=GIVE_UP) as sock:
        assert _closed_by_server(sock)


def test_trickled_headers_are_cut_off(served) -> None:
    head = _head("/mutate", 2)
    with served.tls_socket(timeout=GIVE_UP) as sock:
        deadline = time.monotonic() + GIVE_UP
        closed = False
        for byte in head:  # one byte every 200 ms: the attack itself, not a synchronisation
            try:
                sock.sendall(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
                closed = True
                break
            sock.settimeout(0.2)
            try:
                if sock.recv(4096) == b"":
                    closed = True
                    break
            except TimeoutError:
                pass
            if time.monotonic() > deadline:
                break
        assert closed, "the server kept a trickling connection open"


def test_idle_keep_alive_connection_is_closed_after_a_request(served) -> None:
    body = json.dumps(review(gpu_pod())).encode()
    with served.tls_socket(timeout=GIVE_UP) as sock:
        sock.sendall(_head("/mutate", len(body)) + body)
        assert _read_status(sock) == 200
        assert _closed_by_server(sock)


def test_a_kept_alive_connection_outlives_the_request_deadline_between_requests(tmp_path: Path) -> None:
    """The apiserver keeps idle webhook connections for 90 s and reuses them: closed sooner by the server,
    one may be closed just as an admission is sent on it, and that admission fails with EOF."""
    body = json.dumps(review(gpu_pod())).encode()
    with serve(tmp_path, server_kwargs={"limits": PATIENT}) as served, served.tls_socket(timeout=GIVE_UP) as sock:
        sock.sendall(_head("/mutate", len(body)) + body)
        assert _read_response(sock) == 200
        time.sleep(2.5)  # idle past the 1 s request deadline: the case under test, not a synchronisation
        sock.sendall(_head("/mutate", len(body)) + body)
        assert _read_response(sock) == 200


def test_a_fresh_connection_outlives_the_request_deadline_before_its_first_request(tmp_path: Path) -> None:
    """Go's transport dials a connection for an admission, and when another connection answers that
    admission first, it pools the new one unused: closed 1 s after its handshake, the next admission
    sent on it failed with EOF (7 of a 50-node burst, README "Scale" item 26)."""
    body = json.dumps(review(gpu_pod())).encode()
    with serve(tmp_path, server_kwargs={"limits": PATIENT}) as served, served.tls_socket(timeout=GIVE_UP) as sock:
        time.sleep(2.5)  # unused past the 1 s request deadline: the case under test, not a synchronisation
        sock.sendall(_head("/mutate", len(body)) + body)
        assert _read_response(sock) == 200


def test_a_first_request_begun_has_the_request_deadline_not_the_idle_one(tmp_path: Path) -> None:
    with serve(tmp_path, server_kwargs={"limits": PATIENT}) as served, served.tls_socket(timeout=GIVE_UP) as sock:
        sock.sendall(b"P")  # one byte of the first request, then nothing: closed after 1 s, not 60
        assert _closed_by_server(sock), f"not closed within {GIVE_UP} s: the 60 s idle deadline held a begun request"


def test_a_request_begun_on_a_kept_alive_connection_has_the_request_deadline_not_the_idle_one(
    tmp_path: Path,
) -> None:
    body = json.dumps(review(gpu_pod())).encode()
    with serve(tmp_path, server_kwargs={"limits": PATIENT}) as served, served.tls_socket(timeout=GIVE_UP) as sock:
        sock.sendall(_head("/mutate", len(body)) + body)
        assert _read_response(sock) == 200
        sock.sendall(b"P")  # one byte of the next request, then nothing: closed after 1 s, not 60
        assert _closed_by_server(sock), f"not closed within {GIVE_UP} s: the 60 s idle deadline held a begun request"


def test_concurrent_admissions_are_capped(tmp_path: Path) -> None:
    """Two requests that never finish their bodies hold the cap; a third is turned away with 503."""
    limits = ServerLimits(read_timeout_seconds=60.0, max_inflight=2)
    body = json.dumps(review(gpu_pod())).encode()
    with serve(tmp_path, server_kwargs={"limits": limits}) as served:
        holders = [served.tls_socket(timeout=GIVE_UP) for _ in range(limits.max_inflight)]
        try:
            for sock in holders:
                sock.sendall(_head("/mutate", len(body)) + body[:10])
            inflight = served.server.webhook.metrics.inflight
            wait_for(lambda: inflight._value.get() == limits.max_inflight, GIVE_UP, "both holders to be admitted")
            with served.client(timeout=GIVE_UP) as c:
                resp = c.post(f"{served.url}/mutate", content=body, headers={"Content-Type": "application/json"})
            assert resp.status_code == 503
            assert "concurrent" in resp.text
        finally:
            for sock in holders:
                sock.close()


def test_bodies_in_flight_are_capped_by_their_declared_size(tmp_path: Path) -> None:
    """One slow request declaring 60 KiB holds that much; a second one that would pass 100 KiB gets 503."""
    limits = ServerLimits(max_body_bytes=64 * 1024, read_timeout_seconds=60.0, max_inflight_bytes=100 * 1024)
    with serve(tmp_path, server_kwargs={"limits": limits}) as served, served.tls_socket(timeout=GIVE_UP) as holder:
        holder.sendall(_head("/mutate", 60 * 1024) + b"{")
        inflight = served.server.webhook.metrics.inflight
        wait_for(lambda: inflight._value.get() == 1, GIVE_UP, "the holder to be admitted")
        with served.tls_socket(timeout=GIVE_UP) as second:
            second.sendall(_head("/mutate", 60 * 1024) + b"{")
            assert _read_status(second) == 503
        small = json.dumps(review(gpu_pod())).encode()
        with served.client(timeout=GIVE_UP) as c:  # a small review still fits beside the holder
            resp = c.post(f"{served.url}/mutate", content=small, headers={"Content-Type": "application/json"})
        assert resp.status_code == 200
