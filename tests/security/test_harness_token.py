"""Attack 9 (harness part): the harness's API client must send the current bearer token, not the one it
read when it was built. A kubeconfig exec plugin hands out a token from a file that is then rotated (its
credential is already expired, so the client must ask the plugin again), or the kubeconfig names the
token file itself (``tokenFile``), which is replaced with a new one."""

from __future__ import annotations

import http.server
import json
import os
import ssl
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from dralab.util import free_port
from dralab.webhook import certs
from harness.cluster import KubeCluster


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: list[str] = []

    def do_GET(self) -> None:
        type(self).seen.append(self.headers.get("Authorization", ""))
        body = json.dumps({"resources": [{"name": "pods", "kind": "Pod", "namespaced": True},
                                         {"name": "deployments", "kind": "Deployment", "namespaced": True}]})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args) -> None:
        pass


def _user(kind: str, token: Path, tmp_path: Path) -> dict:
    """A kubeconfig user whose token comes from ``token``: through an exec plugin, or as its tokenFile."""
    if kind == "tokenFile":
        return {"tokenFile": str(token)}
    plugin = tmp_path / "plugin.py"
    plugin.write_text(
        "import json, sys\n"
        f"token = open({str(token)!r}).read().strip()\n"
        "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1', 'kind': 'ExecCredential',\n"
        "                  'status': {'token': token, 'expirationTimestamp': '2000-01-01T00:00:00Z'}}))\n"
    )
    return {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable,
                     "args": [str(plugin)], "interactiveMode": "Never"}}


@pytest.fixture
def recorder(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """The recording apiserver's port and CA."""
    ca, cert, key = certs.write(tmp_path)
    port = free_port()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), _Recorder)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(cert), str(key))
    httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    _Recorder.seen = []
    try:
        yield port, ca
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.mark.parametrize("kind", ["exec", "tokenFile"])
def test_harness_client_sends_the_rotated_token(recorder: tuple[int, Path], tmp_path: Path, kind: str) -> None:
    port, ca = recorder
    token = tmp_path / "token"
    token.write_text("first-token")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c",
                      "cluster": {"server": f"https://127.0.0.1:{port}", "certificate-authority": str(ca)}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": _user(kind, token, tmp_path)}],
    }))
    client = KubeCluster.from_kubeconfig(kubeconfig)
    try:
        assert client.namespaced("v1", "Pod") is True
        rotated = tmp_path / "token.new"  # swapped in as the kubelet does: a new file behind the same name
        rotated.write_text("rotated-token")
        os.replace(rotated, token)
        assert client.namespaced("apps/v1", "Deployment") is True
    finally:
        client.close()
    assert [h.lower() for h in _Recorder.seen] == ["bearer first-token", "bearer rotated-token"], _Recorder.seen
