"""Hostile input for the admission endpoints and the driver's gRPC (reduced sizes; the full run is
``dralab bench fuzz``, 10,000 cases per endpoint).

Every target keeps the whole contract: what the apiserver can send (typed pods with hostile
values), what only a direct caller can send (junk types, nesting bombs), and claims with path-like
or malformed UIDs. The regression tests at the end pin the defects the fuzzer found. The driver
always runs inside the kit's ``Sandbox``: a defect that builds paths from UIDs can then never touch
anything outside its temp folder (the first fuzz run, before the sandbox, deleted a host's /etc).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import grpc
import pytest

from dralab_kit.fixtures.sandbox import Sandbox
from dralab_kit.fuzz.admission import baseline_checks, check_answer, fuzz_admission, webhook_client
from dralab_kit.fuzz.driver import DriverTarget, check_driver_tree, fuzz_driver, tree

pytestmark = pytest.mark.integration

CASES = int(os.environ.get("DRALAB_FUZZ_CASES", "200"))


def test_hostile_pods_through_the_apiserver_shape_keep_the_whole_contract() -> None:
    result = fuzz_admission(CASES, only=("hostile_pods",))["hostile_pods"]
    assert result["cases"] >= CASES * 2 // 5
    assert result["problems"] == {}, result["examples"]
    denied = sum(v for k, v in result["outcomes"].items() if k.endswith("denied"))
    allowed = sum(v for k, v in result["outcomes"].items() if k.endswith("allowed"))
    assert denied and allowed  # the generator reaches both answers, so the checks ran on both


def test_raw_bodies_and_malformed_reviews_keep_the_contract() -> None:
    results = fuzz_admission(CASES, only=("raw_bodies", "malformed_reviews"))
    for target in ("raw_bodies", "malformed_reviews"):
        assert results[target]["problems"] == {}, (target, results[target]["examples"])


@pytest.mark.parametrize("typed", [True, False], ids=["typed-claims", "untyped-claims"])
def test_driver_grpc_keeps_the_contract(typed: bool) -> None:
    result = fuzz_driver(max(50, CASES // 2), typed=typed)
    assert result["cases"] >= 50
    assert result["problems"] == {}, result["examples"]


def test_the_checks_accept_a_well_formed_pod() -> None:
    assert baseline_checks() == {"admission_ok": True, "admission_problems": []}


def test_a_denial_must_start_with_a_field_path() -> None:
    review = {"request": {"uid": "u", "object": {}}}

    def answer(message: str) -> bytes:
        return json.dumps({"response": {"uid": "u", "allowed": False,
                                        "status": {"code": 400, "message": message}}}).encode()

    assert check_answer(200, answer("spec.containers[0].resources.limits[x]: bad"), review, list) == []
    assert check_answer(200, answer("metadata.annotations[a/b]: bad"), review, list) == []
    assert [k for k, _ in check_answer(200, answer("something went wrong"), review, list)] == [
        "denial_without_field"]
    assert [k for k, _ in check_answer(503, b"", review, list)] == ["http_503"]
    assert [k for k, _ in check_answer(200, answer("request: bad"), review, list)] == ["denial_without_field"]


def _pod_review(namespace: str, operation: str = "CREATE") -> dict:
    return {"request": {"uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"}, "namespace": namespace,
                        "operation": operation, "object": {}}}


def _reply(allowed: bool, message: str = "") -> bytes:
    response = {"uid": "u", "allowed": allowed}
    if not allowed:
        response["status"] = {"code": 400, "message": message}
    return json.dumps({"response": response}).encode()


def test_a_bad_namespace_must_be_the_field_a_denial_names() -> None:
    named = _reply(False, "request.namespace: 'A_b' is not a namespace name")
    other = _reply(False, "metadata.name: 'X' is not a valid pod name")
    assert check_answer(200, named, _pod_review("A_b"), list) == []
    assert [k for k, _ in check_answer(200, other, _pod_review("A_b"), list)] == [
        "bad_namespace_not_named_first"]
    assert [k for k, _ in check_answer(200, _reply(True), _pod_review("team-a\n"), list, "/mutate")] == [
        "bad_namespace_admitted"]
    assert [k for k, _ in check_answer(200, _reply(True), _pod_review("A_b", "UPDATE"), list, "/validate")] == [
        "bad_namespace_admitted"]
    assert check_answer(200, _reply(True), _pod_review("A_b", "UPDATE"), list, "/mutate") == []
    # a good namespace is never the reason, and an empty one means "default"
    assert [k for k, _ in check_answer(200, named, _pod_review("team-a"), list)] == ["good_namespace_denied"]
    assert check_answer(200, other, _pod_review("team-a"), list) == []
    assert check_answer(200, _reply(True), _pod_review(""), list) == []


def test_namespace_attacks_are_denied_naming_the_namespace() -> None:
    result = fuzz_admission(CASES, only=("namespace_attacks",))["namespace_attacks"]
    assert result["cases"] >= CASES // 10
    assert result["problems"] == {}, result["examples"]
    assert any(k.endswith("denied") for k in result["outcomes"])


def test_the_sandbox_refuses_changes_outside_its_folder(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("x")
    inside = Path(tempfile.mkdtemp(dir=tmp_path))
    with Sandbox(inside) as box:
        with pytest.raises(PermissionError):
            (outside / "keep").unlink()
        with pytest.raises(PermissionError):
            (outside / "new").write_text("x")
        with pytest.raises(PermissionError):
            import shutil

            shutil.rmtree(inside / ".." / "outside")
        (inside / "ok").write_text("fine")
    assert (outside / "keep").exists() and not (outside / "new").exists()
    assert len(box.blocked) == 3


# ---------------------------------------------------------------- defects the fuzzer found


def _post(body: bytes, path: str = "/mutate"):
    client, _ = webhook_client()
    try:
        return client.post(path, content=body)
    finally:
        client.close()


def test_deeply_nested_body_is_refused_with_400() -> None:
    resp = _post(b"[" * 100_000 + b"]" * 100_000)
    assert resp.status_code == 400


def test_review_with_wrong_field_types_is_refused_with_400() -> None:
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u", "kind": "Pod", "operation": "CREATE", "namespace": ["x"], "object": {}}}
    assert _post(json.dumps(body).encode()).status_code == 400


def test_pod_with_junk_spec_is_denied_naming_the_field() -> None:
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"}, "operation": "CREATE",
                        "namespace": "a", "object": {"kind": "Pod", "metadata": {"name": "p"}, "spec": "x"}}}
    for path in ("/mutate", "/validate"):
        resp = _post(json.dumps(body).encode(), path)
        assert resp.status_code in (200, 400)
        if resp.status_code == 200:
            assert resp.json()["response"].get("status", {}).get("code", 200) < 500


@pytest.mark.parametrize(("namespace", "meta", "field"), [
    ("kube-system\n", {"name": "p"}, "request.namespace"),
    ("team-a\n", {"name": "p"}, "request.namespace"),
    ("team-a", {"name": "p\n"}, "metadata.name"),
    ("team-a", {"generateName": "p-\n"}, "metadata.generateName"),
])
def test_names_with_a_final_newline_are_denied(namespace: str, meta: dict, field: str) -> None:
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"}, "operation": "CREATE",
                        "namespace": namespace, "object": {"kind": "Pod", "metadata": meta, "spec": {}}}}
    answer = _post(json.dumps(body).encode(), "/mutate").json()["response"]
    assert answer["allowed"] is False
    assert answer["status"]["message"].startswith(f"{field}: ")


def _unprepare(target: DriverTarget, uid: str):
    pb, stub = target.stubs[False]
    return stub.NodeUnprepareResources(pb.NodeUnprepareResourcesRequest(
        claims=[pb.Claim(namespace="x", name="y", uid=uid)]), timeout=30)


@pytest.fixture
def target():
    t = DriverTarget()
    yield t
    t.stop()


def test_unprepare_of_an_empty_uid_leaves_other_claims_alone(target) -> None:
    _unprepare(target, "")
    assert all(p.exists() for p in target.sentinel_files)


@pytest.mark.parametrize("uid", ["..", "../..", "/tmp/dralab-should-not-exist"])
def test_unprepare_of_a_path_like_uid_touches_nothing_but_its_own_files(target, uid: str) -> None:
    before = tree(target.root)
    _unprepare(target, uid)
    assert target.box.blocked == []
    assert check_driver_tree(before, tree(target.root), target.allowed) == []


def test_a_nul_byte_in_one_uid_fails_only_that_claim(target) -> None:
    pb, stub = target.stubs[False]
    resp = stub.NodeUnprepareResources(pb.NodeUnprepareResourcesRequest(
        claims=[pb.Claim(namespace="x", name="y", uid="a\x00b"),
                pb.Claim(namespace="keep", name="sentinel", uid="not-prepared")]), timeout=30)
    assert resp.claims["not-prepared"].error == ""


def test_driver_still_answers_after_every_hostile_uid(target) -> None:
    for uid in ("", "..", "/tmp/dralab-should-not-exist", "common"):
        _unprepare(target, uid)
    pb, stub = target.stubs[False]
    try:
        stub.NodePrepareResources(pb.NodePrepareResourcesRequest(), timeout=10)
    except grpc.RpcError as exc:  # pragma: no cover - the assertion below reports it
        pytest.fail(f"driver stopped answering: {exc}")
    assert not Path("/tmp/dralab-should-not-exist").exists()
