"""The kubelet stand-in's pure decisions and its checkpoint."""

from __future__ import annotations

import json

import pytest

from dralab_kit.cluster.standin import logic
from dralab_kit.cluster.standin.checkpoint import Checkpoint, PreparedClaim
from dralab_kit.cluster.standin.plugins import choose_version


def _pod(claims, statuses=None, uid="pod-uid", phase="Pending"):
    return {
        "metadata": {"name": "p", "namespace": "ns", "uid": uid},
        "spec": {"resourceClaims": claims},
        "status": {"phase": phase, "resourceClaimStatuses": statuses or []},
    }


def _claim(reserved=("pod-uid",), drivers=("b.example", "a.example"), allocated=True):
    status = {"reservedFor": [{"resource": "pods", "name": "p", "uid": u} for u in reserved]}
    if allocated:
        status["allocation"] = {"devices": {"results": [{"driver": d, "device": "x"} for d in drivers]}}
    return {"metadata": {"name": "c", "namespace": "ns", "uid": "claim-uid"}, "status": status}


def test_pod_claims_by_name_and_template():
    pod = _pod(
        [
            {"name": "a", "resourceClaimName": "claim-a"},
            {"name": "b", "resourceClaimTemplateName": "tpl"},
            {"name": "c", "resourceClaimTemplateName": "tpl"},
        ],
        statuses=[{"name": "b", "resourceClaimName": "p-b-xyz"}, {"name": "c"}],
    )
    assert logic.pod_claims(pod) == [logic.ClaimRef("a", "claim-a"), logic.ClaimRef("b", "p-b-xyz")]


def test_template_claim_not_created_yet_is_not_ready():
    pod = _pod([{"name": "b", "resourceClaimTemplateName": "tpl"}])
    with pytest.raises(logic.NotReady, match="'b'"):
        logic.pod_claims(pod)


def test_claim_must_be_allocated_and_reserved_for_the_pod():
    pod = _pod([])
    logic.check_claim_for_pod(_claim(), pod)
    with pytest.raises(logic.NotReady, match="not allocated"):
        logic.check_claim_for_pod(_claim(allocated=False), pod)
    with pytest.raises(logic.PrepareError, match="not reserved"):
        logic.check_claim_for_pod(_claim(reserved=("other",)), pod)


def test_claim_drivers_sorted_unique():
    assert logic.claim_drivers(_claim(drivers=("b.example", "a.example", "b.example"))) == ["a.example", "b.example"]
    assert logic.claim_drivers({"status": {}}) == []


def test_gone_or_done():
    assert logic.is_gone_or_done(None)
    assert logic.is_gone_or_done(_pod([], phase="Succeeded"))
    assert logic.is_gone_or_done(_pod([], phase="Failed"))
    assert not logic.is_gone_or_done(_pod([], phase="Running"))


def test_backoff_doubles_and_caps():
    assert [logic.backoff(n) for n in range(8)] == [0, 1, 2, 4, 8, 16, 30, 30]


def test_not_ready_looks_are_quick_at_first_then_back_off_to_the_kubelets_10s():
    delays = [logic.not_ready_delay(n) for n in range(1, 11)]
    assert delays == [0.5, 0.5, 0.5, 0.5, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_record_has_exactly_the_contract_fields():
    record = logic.make_record(
        node="n", pod="p", namespace="ns", pod_uid="u", claims=[{"name": "c", "uid": "cu"}], driver="d",
        call="NodePrepareResources", request={"claims": []}, response={"claims": {}},
        cdi_device_ids=["k/c=cu"], error=None, now=0.5,
    )  # fmt: skip
    assert list(record) == [
        "time", "node", "pod", "namespace", "podUID", "claims", "driver", "call", "request", "response",
        "cdiDeviceIDs", "error",
    ]  # fmt: skip
    assert record["time"] == "1970-01-01T00:00:00.500Z"
    json.dumps(record)


def test_cdi_ids_from_either_spelling():
    assert logic.cdi_ids({"devices": [{"cdiDeviceIds": ["a", "b"]}, {"cdi_device_ids": ["c"]}]}) == ["a", "b", "c"]


def test_event_body():
    body = logic.event_body(_pod([]), "n1", "FailedPrepareDynamicResources", "boom", "2026-01-01T00:00:00Z")
    assert body["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "p",
        "namespace": "ns",
        "uid": "pod-uid",
    }
    assert body["type"] == "Warning" and body["source"] == {"component": "kubelet", "host": "n1"}


def test_choose_version_prefers_the_plugins_order():
    assert choose_version(["v1.DRAPlugin", "v1beta1.DRAPlugin"]) == "v1.DRAPlugin"
    assert choose_version(["v9.DRAPlugin", "v1beta1.DRAPlugin"]) == "v1beta1.DRAPlugin"
    assert choose_version(["v9.DRAPlugin"]) is None


def test_checkpoint_round_trip_and_release(tmp_path):
    path = tmp_path / "cp.json"
    cp = Checkpoint.load(path)
    cp.add(PreparedClaim("c1", "ns", "claim-1", ["d"]), "pod-a", "a")
    cp.add(PreparedClaim("c1", "ns", "claim-1", ["d"]), "pod-b", "b")
    cp.save()
    loaded = Checkpoint.load(path)
    assert loaded.claims["c1"].pods == {"pod-a": "a", "pod-b": "b"}
    assert loaded.release_pod("pod-a") == []
    freed = loaded.release_pod("pod-b")
    assert [c.uid for c in freed] == ["c1"] and freed[0].last_pod == {"uid": "pod-b", "name": "b"}
    assert loaded.unused() == freed


def test_corrupt_checkpoint_is_moved_aside(tmp_path):
    path = tmp_path / "cp.json"
    path.write_text("{not json")
    cp = Checkpoint.load(path)
    assert cp.claims == {}
    assert not path.exists()
    assert len(list(tmp_path.glob("cp.json.corrupt-*"))) == 1
