"""Metrics behind authorization against the local cluster's real apiserver.

The webhook (its TLS server, reviews over the asyncio client), the driver's status server and the
monitor run with ``metrics.authorization`` on, reviewing as a ServiceAccount that holds only the
chart's ``<name>-metrics-auth`` ClusterRole (tokenreviews and subjectaccessreviews create). A second
ServiceAccount scrapes with a token from the TokenRequest API: 401 without a token, 403 while it is
not allowed, 200 once bound to the chart's ``<name>-metrics-reader`` ClusterRole.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import ssl
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry, Gauge

from dralab.config import default_config
from dralab.driver.metrics import DriverMetrics, StatusServer
from dralab.kube import AsyncKube, Kube, KubeError
from dralab.kube.authz import MetricsAuthorizer
from dralab.monitor.server import MonitorServer
from dralab.util import free_port, wait_for
from dralab.webhook import certs
from dralab.webhook.server import Server, build
from dralab_kit.provision.chart import chart_dir

pytestmark = pytest.mark.integration

CLUSTERROLES = "/apis/rbac.authorization.k8s.io/v1/clusterroles"
BINDINGS = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"


@pytest.fixture(scope="module")
def admin(cluster) -> Iterator[Kube]:
    kube = Kube.from_kubeconfig(cluster.kubeconfig)
    yield kube
    kube.close()


def chart_roles(release: str, namespace: str) -> dict[str, dict[str, Any]]:
    """The chart's two metrics ClusterRoles, rendered by helm (skipped when helm is not built)."""
    from dralab_kit.provision.tools import built_tool

    helm = built_tool("helm")
    if helm is None:
        pytest.skip("needs helm (make tools) to render the chart's ClusterRoles")
    out = subprocess.run([str(helm), "template", release, str(chart_dir()), "--namespace", namespace],
                         capture_output=True, text=True, check=True, timeout=120)
    roles = {o["metadata"]["name"]: o for o in yaml.safe_load_all(out.stdout)
             if o and o["kind"] == "ClusterRole" and "-metrics-" in o["metadata"]["name"]}
    assert set(roles) == {f"{release}-dralab-metrics-auth", f"{release}-dralab-metrics-reader"}
    return roles


def service_account_token(admin: Kube, namespace: str, name: str) -> str:
    admin.create(f"/api/v1/namespaces/{namespace}/serviceaccounts",
                 {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}})
    answer = admin.create(f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
                          {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                           "spec": {"expirationSeconds": 3600}})
    assert answer is not None
    return answer["status"]["token"]


def token_kubeconfig(cluster, token: str, path: Path) -> Path:
    """A kubeconfig for the cluster's apiserver with ``token`` instead of the admin certificate."""
    doc = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    context = next(c["context"] for c in doc["contexts"] if c["name"] == doc["current-context"])
    server = next(c["cluster"] for c in doc["clusters"] if c["name"] == context["cluster"])
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "t",
        "clusters": [{"name": "t", "cluster": server}],
        "users": [{"name": "t", "user": {"token": token}}],
        "contexts": [{"name": "t", "context": {"cluster": "t", "user": "t"}}]}))
    path.chmod(0o600)
    return path


def bind(admin: Kube, name: str, role: str, namespace: str, account: str, made: list[str]) -> None:
    admin.create(BINDINGS, {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]})
    made.append(f"{BINDINGS}/{name}")


def get(port: int, token: str | None, ctx: ssl.SSLContext | None = None) -> int:
    conn: http.client.HTTPConnection = (http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=15)
                                        if ctx else http.client.HTTPConnection("127.0.0.1", port, timeout=15))
    try:
        conn.request("GET", "/metrics", headers={"Authorization": f"Bearer {token}"} if token else {})
        resp = conn.getresponse()
        resp.read()
        return resp.status
    finally:
        conn.close()


def test_metrics_answer_only_a_scraper_the_cluster_authorizes(cluster, admin: Kube, namespace: str,
                                                                tmp_path: Path) -> None:
    release = f"it{uuid.uuid4().hex[:6]}"
    roles = chart_roles(release, namespace)
    made: list[str] = []
    servers: list[Any] = []
    try:
        for role in roles.values():
            admin.create(CLUSTERROLES, role)
            made.append(f"{CLUSTERROLES}/{role['metadata']['name']}")
        server_token = service_account_token(admin, namespace, "metrics-server")
        scraper_token = service_account_token(admin, namespace, "scraper")
        bind(admin, f"{release}-metrics-auth", f"{release}-dralab-metrics-auth", namespace, "metrics-server", made)
        config = token_kubeconfig(cluster, server_token, tmp_path / "server.kubeconfig")
        reviewer = Kube.from_kubeconfig(config, timeout=10.0)
        servers.append(reviewer)

        # the reviewing account can review (and nothing more: it holds only the metrics-auth role)
        def can_review() -> bool:
            try:
                reviewer.create("/apis/authentication.k8s.io/v1/tokenreviews",
                                {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                                 "spec": {"token": scraper_token}})
                return True
            except KubeError:
                return False

        wait_for(can_review, 30, "the metrics-auth binding to take effect")
        with pytest.raises(KubeError) as denied:
            reviewer.get(f"/api/v1/namespaces/{namespace}/pods")
        assert denied.value.status == 403

        # the webhook over TLS, reviewing through the asyncio client
        ca, cert, key = certs.write(tmp_path / "tls")
        wport = free_port()
        webhook = Server(build(default_config(), None, janitor=False), cert, key, port=wport,
                         metrics_auth=MetricsAuthorizer(AsyncKube(reviewer.config), ttl=1.0))
        webhook.start_in_thread()
        servers.append(webhook)
        wait_for(lambda: webhook.started, 10, "the webhook server")
        ctx = ssl.create_default_context(cafile=str(ca))
        # the driver's status server and the monitor, reviewing through the blocking client
        driver = StatusServer(DriverMetrics(), lambda: (True, "ok"), lambda: (True, "ok"), port=0,
                              metrics_auth=MetricsAuthorizer(reviewer, ttl=1.0))
        driver.start()
        servers.append(driver)
        registry = CollectorRegistry()
        Gauge("dralab_namespace_shares", "x", ["namespace"], registry=registry).labels("tenant-a").set(1)
        monitor = MonitorServer(registry, lambda: True, "127.0.0.1", 0,
                                metrics_auth=MetricsAuthorizer(reviewer, ttl=1.0))
        monitor.start_in_thread()
        servers.append(monitor)
        targets = {"webhook": (wport, ctx), "driver": (driver.port, None), "monitor": (monitor.port, None)}

        forged = base64.urlsafe_b64encode(b"not-a-token").decode()
        for name, (port, tls) in targets.items():
            assert get(port, None, tls) == 401, name
            assert get(port, forged, tls) == 401, name
            assert get(port, scraper_token, tls) == 403, name  # authenticated, not allowed

        bind(admin, f"{release}-metrics-reader", f"{release}-dralab-metrics-reader", namespace, "scraper", made)
        for name, (port, tls) in targets.items():
            wait_for(lambda p=port, t=tls: get(p, scraper_token, t) == 200, 30, f"{name} to let the scraper in")
            assert get(port, None, tls) == 401, name  # still nothing without a token
    finally:
        for server in reversed(servers):
            if isinstance(server, (Kube, MonitorServer)):
                server.close()
            else:
                server.stop()
        for path in reversed(made):
            with contextlib.suppress(KubeError):
                admin.delete(path, missing_ok=True)
