"""The ASGI app: admissions answered directly (JSON, 400, 413, 503), other methods and paths by Starlette,
and a client that leaves before its body arrives frees its slot without an answer."""

from __future__ import annotations

import json
import logging
import warnings
from typing import Any

import anyio
import pytest

from dralab.config import default_config
from dralab.webhook.limits import ServerLimits
from dralab.webhook.server import build, create_app

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

REVIEW = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
          "request": {"uid": "u-1", "kind": {"group": "", "version": "v1", "kind": "Pod"}, "namespace": "a",
                      "operation": "CREATE", "object": {"kind": "Pod", "metadata": {"name": "p"},
                                                        "spec": {"containers": [{"name": "c", "resources": {
                                                            "limits": {"nvidia.com/gpu": "1"}}}]}}}}


def _app(limits: ServerLimits | None = None) -> Any:
    return create_app(build(default_config(), None, janitor=False), bench_routes=True, limits=limits)


def test_admissions_answer_json_and_the_rest_stays_with_starlette() -> None:
    with TestClient(_app()) as client:
        resp = client.post("/mutate", content=json.dumps(REVIEW))
        assert resp.status_code == 200 and resp.headers["content-type"] == "application/json"
        assert resp.json()["response"]["uid"] == "u-1" and resp.json()["response"]["patchType"] == "JSONPatch"
        assert client.post("/bench/noop", content=json.dumps(REVIEW)).json()["response"] == {"uid": "u-1",
                                                                                            "allowed": True}
        assert client.get("/mutate").status_code == 405
        assert client.get("/healthz").text == "ok"
        assert client.post("/nowhere", content=b"{}").status_code == 404
        assert b"dralab_webhook_requests_total" in client.get("/metrics").content


def test_bad_and_oversized_bodies_are_refused_in_text() -> None:
    with TestClient(_app(ServerLimits(max_body_bytes=1024))) as client:
        bad = client.post("/validate", content=b"{")
        assert bad.status_code == 400 and bad.text.startswith("body is not JSON")
        assert bad.headers["content-type"] == "text/plain; charset=utf-8"
        big = client.post("/mutate", content=b"x" * 2048)
        assert big.status_code == 413 and "over the limit of 1024" in big.text
        assert big.headers["connection"] == "close"


def test_over_the_inflight_cap_is_503_with_retry_after() -> None:
    with TestClient(_app(ServerLimits(max_inflight=0))) as client:
        resp = client.post("/mutate", content=json.dumps(REVIEW))
    assert resp.status_code == 503 and resp.headers["retry-after"] == "1" and "too many" in resp.text


def test_a_client_gone_before_its_body_gets_no_answer_and_frees_its_slot() -> None:
    app = _app(ServerLimits(max_inflight=1))
    sent: list[dict[str, Any]] = []
    scope = {"type": "http", "method": "POST", "path": "/mutate", "headers": [(b"content-length", b"10")]}

    async def gone() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    async def body() -> dict[str, Any]:
        return {"type": "http.request", "body": json.dumps(REVIEW).encode(), "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def run() -> None:
        await app(scope, gone, send)
        assert sent == []
        await app({**scope, "headers": []}, body, send)  # the one slot is free again

    anyio.run(run)
    assert sent[0]["status"] == 200 and b'"allowed":true' in sent[1]["body"]


class _VersionApi:
    def __init__(self, fail: BaseException | None = None, hang: bool = False) -> None:
        self.paths: list[str] = []
        self.fail = fail
        self.hang = hang

    async def get(self, path: str, params: dict[str, str] | None = None) -> dict[str, Any]:
        self.paths.append(path)
        if self.hang:
            await anyio.sleep_forever()
        if self.fail is not None:
            raise self.fail
        return {"major": "1", "minor": "35", "gitVersion": "v1.35.4"}


def test_warm_opens_the_admission_client_once_and_never_fails_serving() -> None:
    from dralab.kube import KubeError
    from dralab.webhook.server import warm

    ok = _VersionApi()
    assert anyio.run(warm, ok) == {"major": "1", "minor": "35", "gitVersion": "v1.35.4"} and ok.paths == ["/version"]
    assert anyio.run(warm, _VersionApi(fail=KubeError(0, "ConnectionRefusedError"))) is None
    assert anyio.run(warm, _VersionApi(hang=True), 0.05) is None  # bounded: a hung apiserver delays serving briefly


@pytest.mark.parametrize(("lifecycle", "git_version", "warned"), [
    ("template", "v1.35.4", True), ("template", "v1.36.3-rc.1", True), ("template", "v1.37.2", False),
    ("template", "v1.38.0", False), ("claim", "v1.35.4", False), ("template", None, False),
])
def test_the_template_lifecycle_on_a_kubernetes_whose_controller_makes_second_claims_is_warned_of(
    lifecycle: str, git_version: str | None, warned: bool
) -> None:
    from dralab.webhook.server import warn_of_the_cluster
    from dralab_kit.fixtures.logs import kept_records

    info = None if git_version is None else {"gitVersion": git_version}  # None: GET /version failed
    with kept_records("dralab.webhook.server", logging.WARNING) as records:
        warning = warn_of_the_cluster(lifecycle, info)
    assert (warning is not None) is warned
    assert [r.getMessage() for r in records] == ([warning] if warned else [])
    if warned:
        assert warning is not None and "kubernetes/kubernetes#140217" in warning
        assert "webhook.lifecycle: claim" in warning and "1.37 or newer" in warning


def test_settle_heap_leaves_start_up_objects_out_of_later_collections() -> None:
    import gc

    from dralab.webhook.server import settle_heap

    before = gc.get_freeze_count()
    try:
        settle_heap()
        assert gc.get_freeze_count() > before  # what lives now is no longer walked by full collections
    finally:
        gc.unfreeze()  # other tests' objects stay collectable
