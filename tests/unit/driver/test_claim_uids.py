"""Claim UIDs name files: anything that is not a Kubernetes UID fails that claim alone and touches no file."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from dralab.driver.cdi import ClaimRef
from dralab.driver.claims import InMemoryClaimSource
from dralab.driver.proto import dra_v1_pb2, dra_v1_pb2_grpc, dra_v1beta1_pb2, dra_v1beta1_pb2_grpc
from dralab.driver.runner import DriverProcess, RunOptions
from dralab.driver.state import MAX_UID_LENGTH, ClaimError, claim_uid_problem
from dralab_kit.fixtures.driver_claims import CLAIM_A, CLAIM_A_UID, NAMESPACE, NODE, lab20_claim

REF_A = ClaimRef(NAMESPACE, CLAIM_A, CLAIM_A_UID)
BAD_UIDS = ["", ".", "..", "../..", "../x", "/", "/tmp/x", "a/b", "a\x00b", "a.b", "*", "common", "ü",
            "a" * (MAX_UID_LENGTH + 1)]


def tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.mark.parametrize("uid", [CLAIM_A_UID, "uid-b", "A1-b2", "a" * MAX_UID_LENGTH])
def test_kubernetes_uids_are_accepted(uid: str) -> None:
    assert claim_uid_problem(uid) == ""


@pytest.mark.parametrize("uid", BAD_UIDS)
def test_other_uids_are_refused_with_a_reason(uid: str) -> None:
    problem = claim_uid_problem(uid)
    assert problem.startswith("claim uid ") and "\n" not in problem


@pytest.mark.parametrize("uid", ["", ".", "..", "../x", "/tmp/x", "a/b", "a\x00b"])
def test_path_functions_refuse_names_outside_their_folder(state, uid: str) -> None:
    with pytest.raises(ClaimError):
        state.claim_dir(uid)
    with pytest.raises(ClaimError):
        state.spec_path(uid)


def test_path_functions_refuse_the_common_spec(state) -> None:
    with pytest.raises(ClaimError):
        state.spec_path("common")


def test_path_functions_accept_a_plain_name(state, tmp_path: Path) -> None:
    assert state.claim_dir(CLAIM_A_UID).parent == tmp_path / "state" / "ascend.project-hami.io" / "claims"
    assert state.spec_path(CLAIM_A_UID).parent == tmp_path / "cdi"


@pytest.mark.parametrize("uid", ["", "..", "../..", "/tmp/dralab-unit-should-not-exist", "a\x00b"])
def test_state_unprepare_of_a_path_like_uid_fails_that_claim_and_keeps_files(state, tmp_path: Path, uid) -> None:
    """The state itself refuses (defence in depth), even when called past the gRPC boundary."""
    assert state.prepare([REF_A])[CLAIM_A_UID].error == ""
    before = tree(tmp_path)
    out = state.unprepare([ClaimRef("x", "y", uid), ClaimRef("x", "z", "not-prepared")])
    assert out[uid].startswith("refusing claim path")
    assert out["not-prepared"] == ""
    assert tree(tmp_path) == before
    assert not Path("/tmp/dralab-unit-should-not-exist").exists()
    assert CLAIM_A_UID in state.prepared_claims()


def test_state_prepare_of_a_path_like_uid_fails_that_claim_only(tmp_path: Path, make_state) -> None:
    claims_src = [lab20_claim(), lab20_claim(uid="../escape", name="bad")]
    state = make_state(tmp_path, InMemoryClaimSource(claims_src))
    out = state.prepare([REF_A, ClaimRef(NAMESPACE, "bad", "../escape")])
    assert out[CLAIM_A_UID].error == ""
    assert out["../escape"].error.startswith("refusing claim path")
    assert not (tmp_path / "state" / "ascend.project-hami.io" / "escape").exists()
    assert set(state.prepared_claims()) == {CLAIM_A_UID}


class JunkSource:
    """Claim A as served, and junk documents for every other claim (a broken claim source)."""

    def get_claim(self, namespace: str, name: str):
        if name == CLAIM_A:
            return lab20_claim()
        return {"list": ["not a claim"], "dict": {"metadata": "x"}, "alloc": {
            "metadata": {"uid": "uid-j"}, "status": {"allocation": {"devices": {"results": ["x"]}}}}}[name]


@pytest.mark.parametrize("junk", ["list", "dict", "alloc"])
def test_a_junk_claim_document_fails_only_that_claim(tmp_path: Path, make_state, junk: str) -> None:
    state = make_state(tmp_path, JunkSource())  # type: ignore[arg-type]
    out = state.prepare([REF_A, ClaimRef(NAMESPACE, junk, "uid-j")])
    assert out[CLAIM_A_UID].error == ""
    assert out["uid-j"].error.startswith(f"ResourceClaim {NAMESPACE}/{junk} is ")
    assert set(state.prepared_claims()) == {CLAIM_A_UID}


# -- over the socket ---------------------------------------------------------------------------


@pytest.fixture
def dra(short_tmp: Path, library: Path):
    opts = RunOptions(node=NODE, backend="fake", plugin_dir=str(short_tmp / "p"), registry_dir=str(short_tmp / "r"),
                      cdi_dir=str(short_tmp / "cdi"), state_dir=str(short_tmp / "s"),
                      enforcement_library=str(library), publish=False, metrics_port=0, metrics_authorization=False)
    proc = DriverProcess(opts, claims=InMemoryClaimSource([lab20_claim()])).start()
    channel = grpc.insecure_channel(f"unix://{proc.served[0].server.paths.dra}")
    yield proc, short_tmp, channel
    channel.close()
    proc.stop()


@pytest.mark.parametrize("beta", [False, True], ids=["v1", "v1beta1"])
def test_grpc_refuses_a_bad_uid_for_that_claim_only(dra, beta: bool) -> None:
    proc, root, channel = dra
    pb, grpc_mod = (dra_v1beta1_pb2, dra_v1beta1_pb2_grpc) if beta else (dra_v1_pb2, dra_v1_pb2_grpc)
    stub = grpc_mod.DRAPluginStub(channel)
    good = pb.Claim(namespace=NAMESPACE, name=CLAIM_A, uid=CLAIM_A_UID)
    resp = stub.NodePrepareResources(pb.NodePrepareResourcesRequest(
        claims=[good, *(pb.Claim(namespace="x", name="y", uid=u) for u in BAD_UIDS)]), timeout=30)
    assert resp.claims[CLAIM_A_UID].error == "" and len(resp.claims[CLAIM_A_UID].devices) == 1
    for uid in BAD_UIDS:
        assert resp.claims[uid].error.startswith("claim uid "), uid
    before = tree(root)
    uresp = stub.NodeUnprepareResources(pb.NodeUnprepareResourcesRequest(
        claims=[pb.Claim(namespace="x", name="y", uid=u) for u in BAD_UIDS]), timeout=30)
    for uid in BAD_UIDS:
        assert uresp.claims[uid].error.startswith("claim uid "), uid
    assert tree(root) == before  # the prepared claim's files and the common spec are all still there
    metrics = proc.served[0].state.metrics.render().decode()
    assert 'reason="invalid_uid"' in metrics
