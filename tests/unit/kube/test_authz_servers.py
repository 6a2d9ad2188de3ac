"""The three metrics servers (webhook, driver, monitor) behind dralab.kube.authz: /metrics answers
401, 403, 503 or 200 as the reviews say, the probes stay open, the monitor serves HTTPS when given a
certificate, and the switch turned off serves /metrics to anyone."""

from __future__ import annotations

import http.client
import ssl
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Gauge

from dralab.config import default_config, parse_config
from dralab.driver.metrics import DriverMetrics, StatusServer
from dralab.kube import KubeError
from dralab.kube.authz import SUBJECTACCESSREVIEWS, TOKENREVIEWS, MetricsAuthorizer
from dralab.monitor.server import MonitorServer
from dralab.webhook import certs
from dralab.webhook.server import build, create_app

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

ALLOWED_TOKEN, DENIED_TOKEN = "scraper-token", "other-token"


class Reviews:
    """A fake apiserver for the two reviews: two known tokens, only one of them allowed; ``down`` refuses."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.down = False

    def request(self, method: str, path: str, *, body: Any = None, timeout: float | None = None) -> Any:
        assert method == "POST"
        self.calls.append((path, body))
        if self.down:
            raise KubeError(0, "ConnectionRefusedError", what=f"POST {path}")
        if path == TOKENREVIEWS:
            user = {ALLOWED_TOKEN: "system:serviceaccount:mon:prom", DENIED_TOKEN: "system:serviceaccount:a:b"}
            name = user.get(body["spec"]["token"])
            return {"status": {"authenticated": True, "user": {"username": name}} if name else {}}
        assert path == SUBJECTACCESSREVIEWS and body["spec"]["nonResourceAttributes"] == {"path": "/metrics",
                                                                                         "verb": "get"}
        return {"status": {"allowed": body["spec"]["user"] == "system:serviceaccount:mon:prom"}}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


CASES = [({}, 401), (bearer("forged"), 401), (bearer(DENIED_TOKEN), 403), (bearer(ALLOWED_TOKEN), 200)]


# -- webhook ----------------------------------------------------------------------------------------

def test_webhook_metrics_need_an_authorized_token_and_probes_do_not() -> None:
    api = Reviews()
    app = create_app(build(default_config(), None, janitor=False), metrics_auth=MetricsAuthorizer(api))
    with TestClient(app) as client:
        for headers, status in CASES:
            resp = client.get("/metrics", headers=headers)
            assert resp.status_code == status, headers
            assert (b"dralab_webhook_requests_total" in resp.content) is (status == 200)
        assert client.get("/metrics").headers["www-authenticate"].startswith("Bearer")
        assert client.get("/healthz").status_code == 200 and client.get("/readyz").status_code == 200
        api.down = True  # the allowed token is cached; a new one cannot be reviewed: closed
        assert client.get("/metrics", headers=bearer(ALLOWED_TOKEN)).status_code == 200
        assert client.get("/metrics", headers=bearer("new-token")).status_code == 503


def test_webhook_metrics_without_an_authorizer_are_open() -> None:
    with TestClient(create_app(build(default_config(), None, janitor=False))) as client:
        assert client.get("/metrics").status_code == 200


def test_the_config_key_defaults_to_on_and_turns_it_off() -> None:
    cfg = default_config()
    assert cfg.webhook.metrics_authorization is True and cfg.driver.metrics_authorization is True
    off = parse_config({"webhook": {"metricsAuthorization": False}, "driver": {"metricsAuthorization": False}})
    assert off.webhook.metrics_authorization is False and off.driver.metrics_authorization is False


# -- driver -----------------------------------------------------------------------------------------

def _get(port: int, path: str, headers: dict[str, str] | None = None, ctx: ssl.SSLContext | None = None,
         method: str = "GET") -> tuple[int, bytes, dict[str, str]]:
    conn: http.client.HTTPConnection = (
        http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=10) if ctx
        else http.client.HTTPConnection("127.0.0.1", port, timeout=10))
    try:
        conn.request(method, path, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.read(), dict(resp.headers)
    finally:
        conn.close()


@pytest.fixture
def driver_status() -> Iterator[tuple[StatusServer, Reviews]]:
    api = Reviews()
    server = StatusServer(DriverMetrics(), lambda: (True, "ok"), lambda: (True, "ok"), port=0,
                          metrics_auth=MetricsAuthorizer(api))
    server.start()
    try:
        yield server, api
    finally:
        server.stop()


def test_driver_metrics_need_an_authorized_token_and_probes_do_not(driver_status) -> None:
    server, api = driver_status
    for headers, status in CASES:
        got, body, _ = _get(server.port, "/metrics", headers)
        assert got == status, headers
        assert (b"dralab_driver_prepared_claims" in body) is (status == 200)
    assert _get(server.port, "/healthz")[0] == 200 and _get(server.port, "/readyz")[0] == 200
    assert _get(server.port, "/metrics", method="HEAD")[0] == 401  # HEAD is no way around it
    api.down = True
    assert _get(server.port, "/metrics", bearer("new-token"))[0] == 503


# -- monitor ----------------------------------------------------------------------------------------

def _registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    Gauge("dralab_pod_memory_allocated_bytes", "x", ["namespace", "pod"], registry=registry).labels("a", "p").set(1)
    return registry


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path, Path]:
    return certs.write(tmp_path / "tls")


@pytest.mark.parametrize("tls", [False, True], ids=["http", "https"])
def test_monitor_metrics_need_an_authorized_token_and_probes_do_not(tls: bool, pair) -> None:
    ca, cert, key = pair
    api = Reviews()
    server = MonitorServer(_registry(), lambda: True, "127.0.0.1", 0, metrics_auth=MetricsAuthorizer(api),
                           tls_cert=cert if tls else None, tls_key=key if tls else None)
    server.start_in_thread()
    ctx = ssl.create_default_context(cafile=str(ca)) if tls else None
    try:
        assert server.scheme == ("https" if tls else "http")
        for headers, status in CASES:
            got, body, _ = _get(server.port, "/metrics", headers, ctx)
            assert got == status, headers
            assert (b'dralab_pod_memory_allocated_bytes{namespace="a",pod="p"}' in body) is (status == 200)
        assert _get(server.port, "/metrics", ctx=ctx)[2]["WWW-Authenticate"].startswith("Bearer")
        assert _get(server.port, "/healthz", ctx=ctx)[0] == 200 and _get(server.port, "/readyz", ctx=ctx)[0] == 200
        api.down = True
        assert _get(server.port, "/metrics", bearer("new-token"), ctx)[0] == 503
        if tls:  # plain HTTP to the TLS port gets nothing
            with pytest.raises((http.client.HTTPException, OSError)):
                _get(server.port, "/healthz")
    finally:
        server.close()


def test_monitor_without_an_authorizer_is_open(pair) -> None:
    server = MonitorServer(_registry(), lambda: True, "127.0.0.1", 0)
    server.start_in_thread()
    try:
        assert _get(server.port, "/metrics")[0] == 200
    finally:
        server.close()


def test_monitor_tls_needs_both_files(pair) -> None:
    from dralab.errors import UserError

    _, cert, _ = pair
    with pytest.raises(UserError, match="both a certificate and its key"):
        MonitorServer(_registry(), lambda: True, "127.0.0.1", 0, tls_cert=cert)


def test_monitor_cli_takes_the_switch_and_the_pair_from_the_environment(monkeypatch, pair) -> None:
    from click.testing import CliRunner

    from dralab.monitor import cli

    seen: dict[str, Any] = {}

    class Stop(Exception):
        pass

    def fake_server(registry, ready, host, port, metrics_auth=None, tls_cert=None, tls_key=None):
        seen.update(auth=metrics_auth, cert=tls_cert, key=tls_key)
        raise Stop

    monkeypatch.setattr("dralab.monitor.server.MonitorServer", fake_server)
    monkeypatch.setattr("dralab.kube.Kube.from_kubeconfig", classmethod(lambda cls, *a, **k: Reviews()))
    monkeypatch.setattr("dralab.monitor.collector.AllocationWatch", lambda api: type("W", (), {"ready": None})())
    _, cert, key = pair
    env = {"DRALAB_METRICS_AUTHORIZATION": "false", "DRALAB_MONITOR_TLS_CERT": str(cert),
           "DRALAB_MONITOR_TLS_KEY": str(key)}
    result = CliRunner().invoke(cli.monitor, [], env=env)
    assert isinstance(result.exception, Stop), result.output
    assert seen == {"auth": None, "cert": str(cert), "key": str(key)}
    result = CliRunner().invoke(cli.monitor, [])
    assert isinstance(seen["auth"], MetricsAuthorizer)
