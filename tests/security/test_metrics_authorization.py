"""Attacks on the metrics endpoints (webhook, driver, monitor): reading every tenant's use.

Before the fix ``/metrics`` of all three answered anyone who reached the port, and the monitor's
gauges name every namespace's and pod's share; the chart had no NetworkPolicy. Now a caller needs a
bearer token the cluster authenticates and authorizes for GET /metrics (dralab.kube.authz). Each
test replays one way around that against the real servers, with a stand-in for the apiserver's two
review APIs that knows one scraper (allowed) and one tenant pod (authenticated, not allowed).
"""

from __future__ import annotations

import http.client
import socket
import threading
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Gauge

from dralab.config import default_config, parse_config
from dralab.driver.metrics import DriverMetrics, StatusServer
from dralab.kube import KubeError
from dralab.kube.authz import SUBJECTACCESSREVIEWS, TOKENREVIEWS, MetricsAuthorizer
from dralab.monitor.server import MonitorServer
from dralab.webhook.server import build, create_app

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

SCRAPER, TENANT = "scraper-token", "tenant-pod-token"
SECRET = b'namespace="tenant-b"'  # what a tenant must not read


class Apiserver:
    """TokenReview and SubjectAccessReview as the apiserver answers them; ``down`` answers nothing."""

    def __init__(self, delay: threading.Event | None = None) -> None:
        self.calls: list[str] = []
        self.down = False
        self.delay = delay
        self.lock = threading.Lock()

    def request(self, method: str, path: str, *, body: Any = None, timeout: float | None = None) -> Any:
        with self.lock:
            self.calls.append(path)
        if self.delay is not None:
            self.delay.wait(10)
        if self.down:
            raise KubeError(503, "ServiceUnavailable", what=f"POST {path}")
        if path == TOKENREVIEWS:
            users = {SCRAPER: "system:serviceaccount:monitoring:prometheus",
                     TENANT: "system:serviceaccount:tenant-a:app"}
            name = users.get(body["spec"]["token"])
            return {"status": {"authenticated": True, "user": {"username": name}} if name else
                    {"authenticated": False}}
        assert path == SUBJECTACCESSREVIEWS
        attrs = body["spec"].get("nonResourceAttributes") or {}
        allowed = body["spec"]["user"].endswith(":prometheus") and attrs == {"path": "/metrics", "verb": "get"}
        return {"status": {"allowed": allowed}}


def registry() -> CollectorRegistry:
    reg = CollectorRegistry()
    Gauge("dralab_namespace_memory_allocated_bytes", "x", ["namespace"], registry=reg).labels("tenant-b").set(1)
    return reg


def raw(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(request)
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    return data


@pytest.fixture
def monitor() -> Iterator[tuple[int, Apiserver]]:
    api = Apiserver()
    server = MonitorServer(registry(), lambda: True, "127.0.0.1", 0, metrics_auth=MetricsAuthorizer(api))
    server.start_in_thread()
    try:
        yield server.port, api
    finally:
        server.close()


@pytest.fixture
def driver() -> Iterator[tuple[int, Apiserver]]:
    api = Apiserver()
    server = StatusServer(DriverMetrics(), lambda: (True, "ok"), lambda: (True, "ok"), port=0,
                          metrics_auth=MetricsAuthorizer(api))
    server.start()
    try:
        yield server.port, api
    finally:
        server.stop()


ATTEMPTS = {
    "no-token": b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
    "empty-token": b"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \r\n\r\n",
    "basic": b"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Basic c2NyYXBlcjp4\r\n\r\n",
    "forged": b"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer forged.jwt.value\r\n\r\n",
    "tenant": b"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tenant-pod-token\r\n\r\n",
    "head": b"HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
    "impersonate": b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Forwarded-User: system:admin\r\n"
                   b"Impersonate-User: admin\r\n\r\n",
}
REFUSED = (b"401", b"403", b"501")  # 501: the monitor has no HEAD at all


@pytest.mark.parametrize("attempt", list(ATTEMPTS.values()), ids=list(ATTEMPTS))
def test_monitor_gauges_are_not_read_around_the_review(monitor, attempt: bytes) -> None:
    port, _ = monitor
    answer = raw(port, attempt)
    assert answer.split(b" ", 2)[1] in REFUSED and SECRET not in answer


def test_monitor_query_strings_do_not_bypass_it(monitor) -> None:
    port, _ = monitor
    for path in (b"/metrics?x=1", b"/metrics?", b"/metrics#"):
        answer = raw(port, b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        assert SECRET not in answer, path


@pytest.mark.parametrize("attempt", list(ATTEMPTS.values()), ids=list(ATTEMPTS))
def test_driver_metrics_are_not_read_around_the_review(driver, attempt: bytes) -> None:
    port, _ = driver
    answer = raw(port, attempt)
    assert answer.split(b" ", 2)[1] in (b"401", b"403") and b"dralab_driver_" not in answer


def test_the_scraper_gets_in_and_a_tenant_never_rides_on_its_cached_decision(monitor) -> None:
    port, _ = monitor
    ok = raw(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer scraper-token\r\n\r\n")
    assert ok.startswith(b"HTTP/1.0 200") and SECRET in ok
    # the scraper's allow is cached by its token; another token is reviewed on its own
    answer = raw(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tenant-pod-token\r\n\r\n")
    assert answer.split(b" ", 2)[1] == b"403" and SECRET not in answer


@pytest.mark.parametrize("server", ["monitor", "driver"])
def test_an_unreachable_apiserver_fails_closed(request, server: str) -> None:
    port, api = request.getfixturevalue(server)
    api.down = True
    answer = raw(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer scraper-token\r\n\r\n")
    assert answer.split(b" ", 2)[1] == b"503"


def test_webhook_metrics_need_the_review_too() -> None:
    api = Apiserver()
    app = create_app(build(default_config(), None, janitor=False), metrics_auth=MetricsAuthorizer(api))
    with TestClient(app) as client:
        assert client.get("/metrics").status_code == 401
        assert client.get("/metrics", headers={"Authorization": f"Bearer {TENANT}"}).status_code == 403
        assert client.get("/metrics/", headers={"Authorization": f"Bearer {TENANT}"},
                          follow_redirects=True).status_code in (401, 403, 404)
        assert client.get("/metrics", headers={"Authorization": f"Bearer {SCRAPER}"}).status_code == 200
        api.down = True
        assert client.get("/metrics", headers={"Authorization": "Bearer fresh"}).status_code == 503


def test_a_flood_of_made_up_tokens_holds_a_bounded_number_of_reviews() -> None:
    gate = threading.Event()
    api = Apiserver(delay=gate)
    auth = MetricsAuthorizer(api, max_inflight=4)
    results: list[int] = []
    threads = [threading.Thread(target=lambda i=i: results.append(auth.check(f"Bearer made-up-{i}").status))
               for i in range(32)]
    for t in threads:
        t.start()
    try:
        from dralab.util import wait_for

        wait_for(lambda: len(results) >= 28, 10, "the refused requests")
        assert len(api.calls) <= 4 and set(results) == {503}
    finally:
        gate.set()
        for t in threads:
            t.join(10)
    assert results.count(401) == 4 and len(auth.cache) == 4


def test_authorization_is_on_unless_a_config_turns_it_off() -> None:
    for cfg in (default_config(), parse_config({}), parse_config({"webhook": None, "driver": {}})):
        assert cfg.webhook.metrics_authorization is True and cfg.driver.metrics_authorization is True
    for section in ("webhook", "driver"):
        with pytest.raises(Exception, match=rf"{section}\.metricsAuthorization"):
            parse_config({section: {"metricsAuthorization": "false"}})  # a string is no way to switch it off


def test_the_webhook_probes_stay_open_for_the_kubelet() -> None:
    app = create_app(build(default_config(), None, janitor=False),
                     metrics_auth=MetricsAuthorizer(Apiserver()))
    with TestClient(app) as client:
        assert client.get("/healthz").status_code == 200 and client.get("/readyz").status_code == 200


def test_monitor_probes_stay_open(monitor) -> None:
    port, api = monitor
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        for path in ("/healthz", "/readyz"):
            conn.request("GET", path)
            assert conn.getresponse().read() == b"ok"
    finally:
        conn.close()
    assert api.calls == []
