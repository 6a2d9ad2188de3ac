"""The synchronous client against a scripted apiserver over mutual TLS."""

from __future__ import annotations

import json
import threading

import pytest

from dralab.kube import Kube, KubeError
from dralab.kube.paths import claims_path, pods_path, segment
from dralab.util import free_port

NS = {"kind": "Namespace", "metadata": {"name": "default"}}
NOT_FOUND = {"kind": "Status", "reason": "NotFound", "message": 'pods "p" not found', "code": 404}


@pytest.fixture
def kube(apiserver):
    client = Kube.from_kubeconfig(apiserver.kubeconfig)
    yield client
    client.close()


def test_get_sends_the_client_certificate_and_decodes_json(apiserver, kube) -> None:
    apiserver.script.on("GET", "/api/v1/namespaces/default", (200, NS))
    assert kube.get("/api/v1/namespaces/default")["metadata"]["name"] == "default"
    seen = apiserver.script.requests("GET")[0]
    assert seen.client_cn == "dralab-admin"
    assert seen.headers["Accept"] == "application/json"


def test_a_non_2xx_answer_is_one_error_with_the_status_reason_and_message(apiserver, kube) -> None:
    apiserver.script.on("GET", "/api/v1/namespaces/ns/pods/p", (404, NOT_FOUND))
    with pytest.raises(KubeError) as err:
        kube.get("/api/v1/namespaces/ns/pods/p")
    assert (err.value.status, err.value.reason, err.value.message) == (404, "NotFound", 'pods "p" not found')
    assert "GET /api/v1/namespaces/ns/pods/p" in str(err.value) and "HTTP 404" in str(err.value)
    assert kube.get("/api/v1/namespaces/ns/pods/p", missing_ok=True) is None


def test_no_answer_is_status_zero() -> None:
    from kubernetes import client

    from dralab.kube.config import KubeConfig

    cfg = client.Configuration()
    cfg.host = f"http://127.0.0.1:{free_port()}"
    cfg.retries = False
    with Kube(KubeConfig(cfg, "test")) as kube, pytest.raises(KubeError) as err:
        kube.get("/version")
    assert err.value.status == 0 and "no answer" in str(err.value)


def test_create_exist_ok_and_dry_run(apiserver, kube) -> None:
    conflict = {"kind": "Status", "reason": "AlreadyExists", "message": "exists", "code": 409}
    apiserver.script.on("POST", "/api/v1/namespaces", (201, NS), (409, conflict))
    assert kube.create("/api/v1/namespaces", NS, dry_run=True) == NS
    assert kube.create("/api/v1/namespaces", NS, exist_ok=True) is None
    with pytest.raises(KubeError) as err:
        kube.create("/api/v1/namespaces", NS)
    assert err.value.conflict and err.value.reason == "AlreadyExists"
    first, second = apiserver.script.requests("POST")[:2]
    assert first.query == {"dryRun": "All"} and second.query == {}
    assert json.loads(first.body) == NS and first.headers["Content-Type"] == "application/json"


@pytest.mark.parametrize(
    ("kind", "content_type"),
    [
        ("merge", "application/merge-patch+json"),
        ("strategic", "application/strategic-merge-patch+json"),
        ("json", "application/json-patch+json"),
        ("apply", "application/apply-patch+yaml"),
    ],
)
def test_patch_kinds_send_their_content_type(apiserver, kube, kind: str, content_type: str) -> None:
    apiserver.script.on("PATCH", "/api/v1/namespaces/default", (200, NS))
    body = [{"op": "add", "path": "/metadata/labels", "value": {}}] if kind == "json" else {"metadata": {}}
    kube.patch("/api/v1/namespaces/default", body, kind=kind, manager="m" if kind == "apply" else None,
               force=kind == "apply")
    seen = apiserver.script.requests("PATCH")[0]
    assert seen.headers["Content-Type"] == content_type
    assert json.loads(seen.body) == body
    assert seen.query == ({"fieldManager": "m", "force": "true"} if kind == "apply" else {})


def test_an_unknown_patch_kind_is_refused(kube) -> None:
    with pytest.raises(ValueError, match="merge, strategic, json, apply"):
        kube.patch("/x", {}, kind="yaml")


def test_delete_sends_options_and_missing_ok(apiserver, kube) -> None:
    apiserver.script.on("DELETE", "/api/v1/namespaces/ns/pods/p", (200, {}), (404, NOT_FOUND))
    assert kube.delete(pods_path("ns", "p"), uid="u1", grace_period_seconds=0) is True
    assert kube.delete(pods_path("ns", "p"), missing_ok=True) is False
    with pytest.raises(KubeError):
        kube.delete(pods_path("ns", "p"))
    options = json.loads(apiserver.script.requests("DELETE")[0].body)
    assert options["preconditions"] == {"uid": "u1"} and options["gracePeriodSeconds"] == 0
    assert options["propagationPolicy"] == "Background"


def test_list_all_follows_continue_tokens(apiserver, kube) -> None:
    page1 = {"items": [{"metadata": {"name": "a"}}], "metadata": {"continue": "t1", "resourceVersion": "5"}}
    page2 = {"items": [{"metadata": {"name": "b"}}], "metadata": {"resourceVersion": "5"}}
    apiserver.script.on("GET", "/api/v1/pods", (200, page1), (200, page2))
    items, version = kube.list_all("/api/v1/pods", label_selector="a=b", page=1)
    assert [i["metadata"]["name"] for i in items] == ["a", "b"] and version == "5"
    first, second = apiserver.script.requests("GET")
    assert first.query == {"labelSelector": "a=b", "limit": "1"}
    assert second.query == {"labelSelector": "a=b", "limit": "1", "continue": "t1"}


def test_partial_metadata_lists_ask_for_the_list_kind(apiserver, kube) -> None:
    from dralab.kube import PARTIAL_METADATA

    apiserver.script.on("GET", "/api/v1/pods", (200, {"items": []}))
    kube.list("/api/v1/pods", accept=PARTIAL_METADATA)
    assert "as=PartialObjectMetadataList;" in apiserver.script.requests("GET")[0].headers["Accept"]


def test_text_reads_a_non_json_endpoint(apiserver, kube) -> None:
    apiserver.script.on("GET", "/metrics", (200, b"# HELP x\nx 1\n"))
    assert kube.text("/metrics").endswith("x 1\n")


def test_watch_streams_events_until_the_server_ends_it(apiserver, kube) -> None:
    events = [{"type": "ADDED", "object": {"metadata": {"name": "a", "resourceVersion": "6"}}},
              {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "9"}}}]
    apiserver.script.on("WATCH", "/api/v1/pods", events)
    got = list(kube.watch("/api/v1/pods", resource_version="5", field_selector="spec.nodeName=n", timeout_seconds=7))
    assert got == events
    query = apiserver.script.requests("GET")[0].query
    assert query == {"watch": "true", "timeoutSeconds": "7", "resourceVersion": "5", "allowWatchBookmarks": "true",
                     "fieldSelector": "spec.nodeName=n"}


def test_a_watch_refused_before_streaming_raises(apiserver, kube) -> None:
    gone = {"kind": "Status", "reason": "Expired", "message": "too old resource version", "code": 410}
    apiserver.script.on("WATCH", "/api/v1/pods", (410, gone))
    with pytest.raises(KubeError) as err:
        list(kube.watch("/api/v1/pods", resource_version="1"))
    assert err.value.gone


def test_clone_shares_credentials_and_closes_on_its_own(apiserver, kube) -> None:
    apiserver.script.on("GET", "/version", (200, {"gitVersion": "v1.35.0"}))
    twin = kube.clone()
    twin.close()
    assert kube.get("/version")["gitVersion"] == "v1.35.0"
    assert twin.config is kube.config


def test_paths_escape_every_segment() -> None:
    escaped = "/apis/resource.k8s.io/v1/namespaces/x%2F..%2Fkube-system/resourceclaims/c"
    assert claims_path("x/../kube-system", "c") == escaped
    with pytest.raises(ValueError):
        segment("..")


class _Pauses(threading.Event):
    """A stop flag that records the reader's pauses instead of waiting them out."""

    def __init__(self, stop_at: int = 0) -> None:
        super().__init__()
        self.pauses: list[float] = []
        self.stop_at = stop_at  # the pause (1-based) during which the watch is stopped; 0: never

    def wait(self, timeout: float | None = None) -> bool:
        self.pauses.append(float(timeout or 0))
        if len(self.pauses) == self.stop_at:
            self.set()
        return self.is_set()


@pytest.mark.parametrize(("read_seconds", "pauses"), [(0.0, []), (1.0, [0.05, 0.05, 0.05])])
def test_a_gathering_watch_pauses_only_after_events_it_waited_for(apiserver, kube, monkeypatch,
                                                                  read_seconds, pauses) -> None:
    from dralab.kube import client as kube_client

    ticks = iter(range(1000))
    monkeypatch.setattr(kube_client, "clock", lambda: next(ticks) * read_seconds)  # every read takes read_seconds
    events = [{"type": "ADDED", "object": {"metadata": {"name": n, "resourceVersion": str(i)}}}
              for i, n in enumerate("abc")]
    apiserver.script.on("WATCH", "/api/v1/pods", events)
    stop = _Pauses()
    assert list(kube.watch("/api/v1/pods", stop=stop, gather_seconds=0.05)) == events
    assert stop.pauses == pauses


def test_a_watch_stopped_while_gathering_ends(apiserver, kube, monkeypatch) -> None:
    from dralab.kube import client as kube_client

    ticks = iter(range(1000))
    monkeypatch.setattr(kube_client, "clock", lambda: float(next(ticks)))
    events = [{"type": "ADDED", "object": {"metadata": {"name": n, "resourceVersion": str(i)}}}
              for i, n in enumerate("abc")]
    apiserver.script.on("WATCH", "/api/v1/pods", events)
    stop = _Pauses(stop_at=1)
    assert list(kube.watch("/api/v1/pods", stop=stop, gather_seconds=0.05)) == events[:1]


def test_clients_on_one_credential_connect_with_one_shared_tls_context(apiserver, kube) -> None:
    """A new connection takes the credentials' context instead of parsing the CA and key again, and still
    authenticates with the client certificate."""
    apiserver.script.on("GET", "/version", (200, {"major": "1"}))
    other = kube.clone()
    try:
        kube.get("/version")
        other.get("/version")
        pools = [c._pool.connection_pool_kw for c in (kube, other)]
        assert pools[0]["ssl_context"] is pools[1]["ssl_context"] is kube.config.ssl_context(verify_hostname=False)
        assert not any(k in kw for kw in pools for k in ("ca_certs", "cert_file", "key_file"))
    finally:
        other.close()
    assert [s.client_cn for s in apiserver.script.requests("GET")] == ["dralab-admin", "dralab-admin"]


def test_handshakes_count_each_new_connection_of_every_client_on_the_credentials(apiserver, kube) -> None:
    """Calls on a kept-alive connection cost no handshake; a connection the server closed (the apiserver
    closes one idle for 90 s) is opened again on the next call, and counted, clones included."""
    apiserver.script.on("GET", "/version", (200, {"major": "1"}))
    assert kube.config.handshakes() == 0
    for _ in range(3):
        kube.get("/version")
    assert kube.config.handshakes() == apiserver.script.connections() == 1
    apiserver.script.close_connections = True
    for _ in range(3):
        kube.get("/version")
    with kube.clone() as other:
        other.get("/version")
    # the first closing answer came on the kept connection; two more, then the clone's own
    assert kube.config.handshakes() == apiserver.script.connections() == 4


def test_a_connection_opened_again_after_the_server_closed_one_resumes_its_session(apiserver, kube) -> None:
    """The apiserver's idle close costs a new connection, not a full handshake: the next connection offers
    the closed one's session (dralab.kube.tls), and the server still sees the client certificate."""
    apiserver.script.on("GET", "/version", (200, {"major": "1"}))
    apiserver.script.close_connections = True
    for _ in range(3):
        kube.get("/version")
    assert kube.config.handshakes() == apiserver.script.connections() == 3
    assert kube.config.resumed_handshakes() == 2  # every connection after the first
    assert [s.client_cn for s in apiserver.script.requests("GET")] == ["dralab-admin"] * 3


def test_a_session_is_offered_only_by_the_context_it_came_from(apiserver, tmp_path) -> None:
    """Sessions stay with the credentials' context they came from: another credentials' context (here the
    same files loaded a second time) has none to offer, so a rotated or other identity never resumes one."""
    from dralab.kube.config import load_files
    from dralab_kit.cluster.pki import ensure_pki

    apiserver.script.on("GET", "/version", (200, {"major": "1"}))
    apiserver.script.close_connections = True
    pki = ensure_pki(tmp_path / "pki")
    first = Kube(load_files(apiserver.url, str(pki.ca_cert), str(pki.cert("admin")), str(pki.key("admin"))))
    second = Kube(load_files(apiserver.url, str(pki.ca_cert), str(pki.cert("admin")), str(pki.key("admin"))))
    with first, second:
        first.get("/version")
        first.get("/version")  # resumes: one session kept on first's context
        second.get("/version")  # its own context has none to offer
    assert (first.config.resumed_handshakes(), second.config.resumed_handshakes()) == (1, 0)


def test_the_shared_context_still_refuses_a_server_certificate_for_another_name(misnamed_apiserver) -> None:
    """Refused on every connection. A refused connection never read an answer, so it holds no ticket and the
    next connection does not resume it (a resumed one would carry the same certificate, matched again)."""
    misnamed_apiserver.script.on("GET", "/version", (200, {"major": "1"}))
    with Kube.from_kubeconfig(misnamed_apiserver.kubeconfig) as kube:
        for _ in range(2):
            with pytest.raises(KubeError) as err:
                kube.get("/version")
            assert err.value.status == 0
            assert "hostname '127.0.0.1' doesn't match 'elsewhere.invalid'" in str(err.value)
        assert kube.config.resumed_handshakes() == 0
    assert not misnamed_apiserver.script.requests()


def test_a_rotated_client_certificate_is_used_from_the_next_connection(apiserver, tmp_path) -> None:
    """Credentials in files (a rotated client certificate, written aside and renamed into place): the shared
    context is built again, and the client's next request connects with the new certificate."""
    from dralab import tls
    from dralab.kube.config import load_files
    from dralab_kit.cluster.pki import VALIDITY, ensure_pki

    pki = ensure_pki(tmp_path / "pki")
    cert, key = tmp_path / "client.crt", tmp_path / "client.key"
    cert.write_bytes(pki.cert("admin").read_bytes())
    key.write_bytes(pki.key("admin").read_bytes())
    apiserver.script.on("GET", "/version", (200, {"major": "1"}))
    with Kube(load_files(apiserver.url, str(pki.ca_cert), str(cert), str(key))) as kube:
        kube.get("/version")
        ca_cert, ca_key = tls.load_ca(pki.ca_cert.read_bytes(), pki.ca_key.read_bytes())
        new_cert, new_key = tls.issue(ca_cert, ca_key, "dralab-rotated", VALIDITY, client=True)
        for path, data in ((key, tls.key_pem(new_key)), (cert, tls.cert_pem(new_cert))):
            path.with_suffix(".new").write_bytes(data)
            path.with_suffix(".new").rename(path)
        kube.get("/version")
    assert [s.client_cn for s in apiserver.script.requests("GET")] == ["dralab-admin", "dralab-rotated"]
