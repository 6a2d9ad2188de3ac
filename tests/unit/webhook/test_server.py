"""Real AdmissionReviews through the real TLS server: endpoints, TLS floor, certificate rotation."""

from __future__ import annotations

import base64
import json
import signal
import ssl
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from dralab.config import default_config
from dralab.model import jsonpatch
from dralab.util import free_port, wait_for
from dralab.webhook import certs
from dralab.webhook.limits import ServerLimits
from dralab.webhook.server import Server, build

FIXTURE = Path(__file__).parent / "fixtures" / "lab20-pod.yaml"


def review(pod: dict, uid: str = "r-1") -> dict:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "dra-ascend-e2e",
            "operation": "CREATE",
            "object": pod,
        },
    }


@pytest.fixture
def served(tmp_path: Path, fake_api) -> Iterator[tuple[str, Path, Server]]:
    ca, cert, key = certs.write(tmp_path)
    port = free_port()
    server = Server(
        build(default_config(), fake_api, janitor=False), cert, key, port=port, bench_routes=True, reload_interval=0.1
    )
    server.start_in_thread()
    wait_for(lambda: server.started, 10, "webhook server to start")
    yield f"https://127.0.0.1:{port}", ca, server
    server.stop()


def client(ca: Path) -> httpx.Client:
    return httpx.Client(verify=ssl.create_default_context(cafile=str(ca)), timeout=10)


def test_mutate_over_tls_reproduces_lab20(served) -> None:
    url, ca, _ = served
    pod = yaml.safe_load(FIXTURE.read_text())
    with client(ca) as c:
        resp = c.post(f"{url}/mutate", json=review(pod))
    assert resp.status_code == 200
    body = resp.json()
    assert body["apiVersion"] == "admission.k8s.io/v1" and body["kind"] == "AdmissionReview"
    assert body["response"]["uid"] == "r-1" and body["response"]["allowed"] is True
    assert body["response"]["patchType"] == "JSONPatch"
    mutated = jsonpatch.apply(pod, json.loads(base64.b64decode(body["response"]["patch"])))
    name = "dra-ascend-e2e-ascend-share-a-app-ascend310p"
    assert mutated["spec"]["containers"][0]["resources"] == {"claims": [{"name": name}]}


def test_validate_bench_routes_health_and_metrics(served) -> None:
    url, ca, _ = served
    pod = yaml.safe_load(FIXTURE.read_text())
    with client(ca) as c:
        denied = c.post(f"{url}/validate", json=review(pod)).json()
        assert denied["response"]["allowed"] is False
        assert c.post(f"{url}/bench/noop", json=review(pod)).json()["response"] == {"uid": "r-1", "allowed": True}
        assert "patch" in c.post(f"{url}/bench/convert", json=review(pod)).json()["response"]
        assert c.post(f"{url}/mutate", content=b"{not json").status_code == 400
        assert c.get(f"{url}/healthz").text == "ok"
        assert c.get(f"{url}/readyz").status_code == 200
        metrics = c.get(f"{url}/metrics").text
    assert 'dralab_webhook_request_duration_seconds_count{endpoint="validate"} 1.0' in metrics
    assert 'dralab_webhook_denials_total{endpoint="validate"} 1.0' in metrics
    assert 'dralab_webhook_errors_total{endpoint="mutate"} 1.0' in metrics


def test_every_connection_is_counted_once_however_many_requests_it_carries(served) -> None:
    url, ca, server = served
    counted = server.webhook.metrics.connections
    with client(ca) as kept:  # one connection, kept alive
        for _ in range(3):
            assert kept.get(f"{url}/healthz").text == "ok"
    assert counted._value.get() == 1
    for _ in range(2):  # a client that does not keep its connection: a TLS handshake per request
        with client(ca) as once:
            assert once.get(f"{url}/healthz").text == "ok"
    assert counted._value.get() == 3


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_tls_below_1_2_is_refused(served) -> None:
    url, ca, _ = served
    ctx = ssl.create_default_context(cafile=str(ca))
    ctx.minimum_version = ssl.TLSVersion.TLSv1
    ctx.maximum_version = ssl.TLSVersion.TLSv1_1
    with pytest.raises(httpx.ConnectError), httpx.Client(verify=ctx, timeout=5) as c:
        c.get(f"{url}/healthz")


def test_rotated_certificate_is_served_without_restart(served, tmp_path: Path) -> None:
    url, old_ca, server = served
    rotated = tmp_path / "rotated"
    new_ca, new_cert, new_key = certs.write(rotated)
    # cert-manager style: the mounted files change in place
    (tmp_path / "tls.crt").write_bytes(new_cert.read_bytes())
    (tmp_path / "tls.key").write_bytes(new_key.read_bytes())

    def served_by_new_ca() -> bool:
        try:
            with client(new_ca) as c:
                return c.get(f"{url}/healthz").status_code == 200
        except httpx.ConnectError:
            return False

    wait_for(served_by_new_ca, 10, "the rotated certificate to be served")
    with pytest.raises(httpx.ConnectError), client(old_ca) as c:
        c.get(f"{url}/healthz")
    assert server.webhook.metrics.tls_reloads._value.get() >= 1


def drained_server(tmp_path: Path, fake_api, delay: float) -> tuple[str, Path, Server]:
    ca, cert, key = certs.write(tmp_path)
    port = free_port()
    server = Server(build(default_config(), fake_api, janitor=False), cert, key, port=port,
                    limits=ServerLimits(shutdown_delay_seconds=delay))
    server.start_in_thread()
    wait_for(lambda: server.started, 10, "webhook server to start")
    return f"https://127.0.0.1:{port}", ca, server


def test_after_sigterm_the_server_answers_not_ready_and_closes_each_connection(tmp_path: Path, fake_api) -> None:
    url, ca, server = drained_server(tmp_path, fake_api, delay=120)  # the drain outlasts the test
    pod = yaml.safe_load(FIXTURE.read_text())
    try:
        with client(ca) as c:
            assert c.get(f"{url}/readyz").text == "ok"
            kept = c.post(f"{url}/mutate", json=review(pod))
            assert kept.headers.get("connection") != "close"
            server.server.handle_exit(signal.SIGTERM, None)  # what uvicorn's signal handler calls
            ready = c.get(f"{url}/readyz")
            assert (ready.status_code, ready.text) == (503, "not ready: shutting down")
        with client(ca) as c:  # a new connection is still accepted and answered, then closed
            answered = c.post(f"{url}/mutate", json=review(pod, uid="r-2"))
            assert answered.json()["response"]["uid"] == "r-2" and answered.json()["response"]["allowed"]
            assert answered.headers["connection"] == "close"
        assert not server.server.should_exit
        server.server.handle_exit(signal.SIGTERM, None)  # a second signal ends the drain
        wait_for(lambda: not server._thread.is_alive(), 10, "the server to stop at the second signal")
    finally:
        server.stop()


def test_the_drain_ends_on_its_own_and_the_listener_closes(tmp_path: Path, fake_api) -> None:
    url, ca, server = drained_server(tmp_path, fake_api, delay=0.3)
    try:
        server.server.handle_exit(signal.SIGTERM, None)
        wait_for(lambda: not server._thread.is_alive(), 10, "the server to stop when its drain ends")
        with client(ca) as c, pytest.raises(httpx.ConnectError):
            c.get(f"{url}/healthz")
    finally:
        server.stop()


def test_without_a_delay_the_first_signal_stops_the_server(tmp_path: Path, fake_api) -> None:
    _, _, server = drained_server(tmp_path, fake_api, delay=0)
    try:
        server.server.handle_exit(signal.SIGTERM, None)
        assert server.server.should_exit and server.webhook.draining is False
    finally:
        server.stop()
