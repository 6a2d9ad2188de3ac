"""Malformed bodies and reviews: a 400 naming what is wrong, never a 5xx; junk pods are denied by field."""

from __future__ import annotations

import json
import warnings
from typing import Any

import anyio
import pytest

from dralab.config import default_config
from dralab.webhook.handlers import MAX_DEPTH, BadReview, nesting_exceeds, parse_review
from dralab.webhook.server import build, create_app

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

POD_KIND = {"group": "", "version": "v1", "kind": "Pod"}


def review(**request: Any) -> dict[str, Any]:
    base = {"uid": "u", "kind": POD_KIND, "namespace": "a", "operation": "CREATE",
            "object": {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": []}}}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {**base, **request}}


def body(doc: Any) -> bytes:
    return json.dumps(doc).encode()


@pytest.fixture
def client(fake_api):
    hook = build(default_config(), fake_api, janitor=False)
    with TestClient(create_app(hook), raise_server_exceptions=True) as c:
        yield c


# -- nesting ------------------------------------------------------------------------------------


@pytest.mark.parametrize("raw", [b"[" * 100_000 + b"]" * 100_000, b'{"request":' * 50_000 + b"{}" + b"}" * 50_000])
def test_a_nesting_bomb_is_a_bad_review(raw: bytes) -> None:
    with pytest.raises(BadReview, match="nested"):
        parse_review(raw)


def test_nesting_below_the_recursion_limit_but_over_the_bound_is_refused_too() -> None:
    deep: Any = {}
    for _ in range(MAX_DEPTH * 3):
        deep = {"a": deep}
    doc = review()
    doc["request"]["object"]["spec"]["containers"] = [{"name": "c", "env": [deep]}]
    with pytest.raises(BadReview, match=f"more than {MAX_DEPTH} levels"):
        parse_review(body(doc))


def test_nesting_depth_is_measured_exactly() -> None:
    assert not nesting_exceeds({"a": 1, "b": "x"}, 1)
    assert nesting_exceeds({"a": {}}, 1)
    assert not nesting_exceeds({"a": [[]]}, 3)
    assert nesting_exceeds({"a": [1, [[]]]}, 3)


@pytest.mark.parametrize("extra", range(MAX_DEPTH - 8, MAX_DEPTH + 2))
def test_the_opener_count_shortcut_refuses_exactly_what_the_walk_refuses(extra: int) -> None:
    deep: Any = "x"
    for _ in range(extra):
        deep = [deep]
    doc = review()
    doc["request"]["object"]["metadata"]["labels"] = {"deep": deep}
    refused = nesting_exceeds(doc, MAX_DEPTH)
    if refused:
        with pytest.raises(BadReview, match=f"more than {MAX_DEPTH} levels"):
            parse_review(body(doc))
    else:
        parse_review(body(doc))


def test_a_real_pod_is_far_below_the_bound() -> None:
    parse_review(body(review()))  # no exception


# -- field types ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("kind", "Pod", "request.kind: must be an object, got a string"),
        ("namespace", ["x"], "request.namespace: must be a string, got a list"),
        ("uid", 7, "request.uid: must be a string, got a number"),
        ("operation", {}, "request.operation: must be a string, got an object"),
        ("object", [], "request.object: must be an object, got a list"),
        ("oldObject", "x", "request.oldObject: must be an object, got a string"),
        ("dryRun", "yes", "request.dryRun: must be a boolean, got a string"),
        ("subResource", 1.5, "request.subResource: must be a string, got a number"),
        ("kind", {"kind": ["Pod"]}, "request.kind.kind: must be a string, got a list"),
        ("kind", {"kind": "Pod", "group": None, "version": True},
         "request.kind.version: must be a string, got a boolean"),
    ],
)
def test_wrong_request_field_types_name_the_field(field: str, value: Any, message: str) -> None:
    with pytest.raises(BadReview) as info:
        parse_review(body(review(**{field: value})))
    assert str(info.value) == message


def test_null_and_absent_fields_are_fine() -> None:
    doc = review(namespace=None, oldObject=None, dryRun=None)
    del doc["request"]["uid"]
    assert parse_review(body(doc))["request"]["namespace"] is None


def test_a_junk_api_version_is_named_by_type_not_echoed() -> None:
    doc = review()
    doc["apiVersion"] = [[["x" * 1000]]]
    with pytest.raises(BadReview, match=r"version a list;"):
        parse_review(body(doc))


# -- over the app: 400s and denials, never a 5xx ---------------------------------------------------


@pytest.mark.parametrize("path", ["/mutate", "/validate"])
def test_the_app_answers_400_naming_the_field(client, path: str) -> None:
    resp = client.post(path, content=body(review(kind="Pod", namespace=["x"], object={})))
    assert resp.status_code == 400
    assert resp.text == "request.kind: must be an object, got a string"
    resp = client.post(path, content=b"[" * 100_000 + b"]" * 100_000)
    assert resp.status_code == 400 and "nested" in resp.text


@pytest.mark.parametrize(
    ("pod", "field"),
    [
        ({"kind": "Pod", "metadata": {"name": "p"}, "spec": "x"}, "spec"),
        ({"kind": "Pod", "metadata": "p"}, "metadata"),
        ({"kind": "Pod", "metadata": {"name": "p", "labels": ["a"]}}, "metadata.labels"),
        ({"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": {"name": "c"}}}, "spec.containers"),
        ({"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"resources": "x"}]}},
         "spec.containers[0].resources"),
        ({"kind": "Pod", "metadata": {"name": "p"}, "spec": {"initContainers": [{}, {"resources": {"limits": []}}]}},
         "spec.initContainers[1].resources.limits"),
    ],
)
@pytest.mark.parametrize("path", ["/mutate", "/validate"])
def test_junk_pods_are_denied_naming_the_field(client, path: str, pod: dict, field: str) -> None:
    resp = client.post(path, content=body(review(object=pod)))
    assert resp.status_code == 200
    answer = resp.json()["response"]
    assert answer["allowed"] is False
    assert answer["status"]["code"] == 400
    assert answer["status"]["message"].startswith(f"{field}: must be ")


def test_update_with_a_junk_old_pod_judges_the_new_pod_whole(fake_api) -> None:
    hook = build(default_config(), fake_api, janitor=False)
    new = {"kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "c", "resources": {"limits": {"huawei.com/Ascend310P": "1"}}}]}}
    out = anyio.run(hook.handler.validate, review(operation="UPDATE", object=new, oldObject={"spec": 3}))
    assert out["response"]["allowed"] is False
    assert out["response"]["status"]["message"].startswith("spec.containers[0].resources.limits[huawei.com/Ascend310P]")
