"""The admission benchmark's wire transport (``Wire``): the product's HTTP/1.1 connection, one POST per request.

What the benchmark's figures rest on: every timed POST of a worker goes out on the one kept-alive TLS
connection it opened (no reconnect, no pool), its answer is read whole (Content-Length or chunked), a
connection the server cut fails with the error the open loop counts, and the direct baseline reaches the
apiserver with the kubeconfig's client certificate through the product's credential loader.
"""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import pytest

from dralab.kube.http1 import ConnectionLost, Endpoint
from dralab.webhook import certs
from dralab_kit.bench.admission import Target, Wire, apiserver_target

OK = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 16\r\n\r\n{"allowed":true}'
CHUNKED = b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{"all\r\na\r\nowed":true\r\n1\r\n}\r\n0\r\n\r\n'


async def read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    return head + await reader.readexactly(length)


def run_webhook_like(tmp_path: Path, answers: list[bytes], close_after: bool,
                     posts: int) -> tuple[list[bytes], int, list[tuple[int, bytes] | Exception]]:
    """A TLS server with the webhook's kind of certificate answering ``answers`` in turn on each connection;
    ``posts`` POSTs on one Wire. Returns the requests seen, the connections accepted and what each POST gave."""
    ca, cert, key = certs.write(tmp_path)
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(str(cert), str(key))
    seen: list[bytes] = []
    connections = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        try:
            for answer in answers:
                seen.append(await read_request(reader))
                writer.write(answer)
                await writer.drain()
                if close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def main() -> list[tuple[int, bytes] | Exception]:
        server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=server_ctx)
        port = server.sockets[0].getsockname()[1]
        target = Target(Endpoint.parse(f"https://127.0.0.1:{port}"), ssl.create_default_context(cafile=str(ca)))
        wire = await Wire.open(target)
        got: list[tuple[int, bytes] | Exception] = []
        try:
            for i in range(posts):
                try:
                    got.append(await wire.post("/bench/noop", b'{"n":%d}' % i))
                except ConnectionLost as exc:
                    got.append(exc)
        finally:
            wire.close()
            server.close()
        return got

    got = asyncio.run(main())
    return seen, connections, got


def test_every_post_goes_out_on_the_one_kept_alive_connection_and_its_answer_is_read_whole(tmp_path: Path) -> None:
    seen, connections, got = run_webhook_like(tmp_path, [OK, CHUNKED], close_after=False, posts=2)
    assert connections == 1
    assert got == [(200, b'{"allowed":true}'), (200, b'{"allowed":true}')]
    first = seen[0]
    assert first.startswith(b"POST /bench/noop HTTP/1.1\r\nHost: 127.0.0.1:")
    assert b"\r\nContent-Type: application/json\r\n" in first
    assert first.endswith(b"Content-Length: 7\r\n\r\n{\"n\":0}")
    assert seen[1].endswith(b"{\"n\":1}")
    assert b"Authorization" not in first  # the bench's wire carries no credentials of its own


def test_a_connection_the_server_closed_fails_with_the_error_the_open_loop_counts(tmp_path: Path) -> None:
    _, connections, got = run_webhook_like(tmp_path, [OK, OK], close_after=True, posts=2)
    assert got[0] == (200, b'{"allowed":true}')
    assert isinstance(got[1], ConnectionLost)  # not sent again on a new connection behind the loop's back
    assert connections == 1


def test_the_direct_baseline_reaches_the_apiserver_with_the_kubeconfigs_client_certificate(apiserver) -> None:
    path = "/apis/resource.k8s.io/v1/namespaces/b/resourceclaims"
    apiserver.script.on("POST", path, (201, {"metadata": {"uid": "u-1"}}))
    target = apiserver_target(str(apiserver.kubeconfig))
    assert (target.endpoint.host, target.ok_status) == ("127.0.0.1", 201)
    assert f"https://{target.endpoint.authority}" == apiserver.url

    async def post() -> tuple[int, bytes]:
        wire = await Wire.open(target)
        try:
            return await wire.post(path, b'{"metadata":{"name":"c"}}')
        finally:
            wire.close()

    status, body = asyncio.run(post())
    assert status == 201 and target.ok_marker in body
    (seen,) = apiserver.script.requests("POST")
    assert seen.client_cn == "dralab-admin" and seen.body == b'{"metadata":{"name":"c"}}'


def test_the_direct_baseline_needs_a_client_certificate(tmp_path: Path, apiserver) -> None:
    token_only = tmp_path / "token-kubeconfig"
    token_only.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: t\n"
        f"clusters: [{{name: t, cluster: {{server: '{apiserver.url}', certificate-authority: '{apiserver.ca}'}}}}]\n"
        "users: [{name: t, user: {token: abc}}]\n"
        "contexts: [{name: t, context: {cluster: t, user: t}}]\n")
    with pytest.raises(RuntimeError, match="client certificate"):
        apiserver_target(str(token_only))
