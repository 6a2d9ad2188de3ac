"""Claim device status (KEP-4817): the entries after Prepare, the apply body, the writer, `dralab top`'s field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dralab.driver.cdi import ClaimRef, PreparedDevice
from dralab.driver.claims import InMemoryClaimSource
from dralab.driver.status import StatusUpdate, StatusWriter, apply_body, device_entries, field_manager
from dralab.kube import KubeError
from dralab.kube.paths import claims_path
from dralab.model.enforcement import DeviceShare
from dralab.monitor.allocation import compute
from dralab.monitor.top import as_json
from dralab_kit.fixtures.driver_claims import CLAIM_A, CLAIM_A_UID, DRIVER, NAMESPACE, NODE, SHARE_A, lab20_claim
from dralab_kit.fixtures.fakeapi import Call, FakeKube

REF_A = ClaimRef(NAMESPACE, CLAIM_A, CLAIM_A_UID)
T0 = 1_767_225_600.0
GI = 2**30


def test_entries_carry_the_device_the_share_and_the_applied_quota() -> None:
    dev = PreparedDevice(request_names=("npu",), pool_name=NODE, device_name="npu-0-0", cdi_device_ids=(),
                         share_id=SHARE_A)
    share = DeviceShare(index=0, physical_id=0, total_memory_bytes=21525 * 2**20, memory_bytes=8 * GI, cores=50)
    [entry] = device_entries(DRIVER, [dev], [share], "hami-vnpu-core", "required", T0)
    assert entry == {
        "driver": DRIVER,
        "pool": NODE,
        "device": "npu-0-0",
        "shareID": SHARE_A,
        "conditions": [{"type": "Ready", "status": "True", "reason": "Prepared",
                        "message": "CDI spec written; quota enforced by the enforcement library",
                        "lastTransitionTime": "2026-01-01T00:00:00Z"}],
        "data": {"memoryMiB": 8192, "cores": 50, "profile": "hami-vnpu-core", "enforcement": "required"},
    }
    whole = DeviceShare(index=0, physical_id=0, total_memory_bytes=21525 * 2**20)
    bare = PreparedDevice(("npu",), NODE, "npu-0-0", ())
    [entry] = device_entries(DRIVER, [bare], [whole], "hami-vnpu-core", "none", T0)
    assert "shareID" not in entry
    assert entry["data"] == {"memoryMiB": 21525, "profile": "hami-vnpu-core", "enforcement": "none"}  # no cores
    assert "not enforced" in entry["conditions"][0]["message"]


def test_the_apply_body_holds_only_this_drivers_entries_and_the_uid() -> None:
    entries = [{"driver": DRIVER, "pool": NODE, "device": "npu-0-0", "shareID": SHARE_A, "data": {}}]
    body = apply_body(REF_A, entries)
    assert body == {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": CLAIM_A, "namespace": NAMESPACE, "uid": CLAIM_A_UID},
        "status": {"devices": entries},
    }
    assert set(body) == {"apiVersion", "kind", "metadata", "status"} and set(body["status"]) == {"devices"}
    assert field_manager(DRIVER) == f"dralab-{DRIVER}"


def test_prepare_hands_the_status_to_the_sink_for_fresh_claims_only(tmp_path: Path, make_state) -> None:
    state = make_state(tmp_path, InMemoryClaimSource([lab20_claim()]))
    got: list[StatusUpdate] = []
    state.status_sink = got.append
    assert state.prepare([REF_A])[CLAIM_A_UID].error == ""
    [update] = got
    assert update.driver == DRIVER and update.claim == REF_A
    [entry] = update.entries
    assert (entry["pool"], entry["device"], entry["shareID"]) == (NODE, "npu-0-0", SHARE_A)
    assert entry["data"] == {"memoryMiB": 8192, "cores": 50, "profile": "hami-vnpu-core", "enforcement": "required"}
    state.prepare([REF_A])  # a repeat answers from the checkpoint: no API call, no status write
    assert len(got) == 1


def test_a_failed_claim_writes_no_status(tmp_path: Path, make_state) -> None:
    state = make_state(tmp_path, InMemoryClaimSource([lab20_claim(device="npu-9-9")]))
    got: list[StatusUpdate] = []
    state.status_sink = got.append
    assert state.prepare([REF_A])[CLAIM_A_UID].error
    assert got == []


def _status_api(failures: list[int]) -> FakeKube:
    """Claim A in an apiserver whose next patches answer ``failures`` (0: no answer), in order."""
    api = FakeKube({claims_path(NAMESPACE, CLAIM_A): lab20_claim()})

    def fail(call: Call) -> None:
        if call.verb == "patch" and failures:
            raise KubeError(failures.pop(0), "err", {"message": "x"})

    api.on_call.append(fail)
    return api


def _update() -> StatusUpdate:
    return StatusUpdate(DRIVER, REF_A, ({"driver": DRIVER, "pool": NODE, "device": "npu-0-0", "shareID": SHARE_A},))


@pytest.mark.parametrize(
    ("failures", "result", "calls"),
    [([], "ok", 1), ([500, 0], "ok", 3), ([404], "gone", 1), ([409], "gone", 1), ([403], "error", 1),
     ([422], "error", 1), ([500, 500, 500, 500], "error", 4)],
)
def test_the_writer_applies_the_status_subresource(failures: list[int], result: str, calls: int) -> None:
    client = _status_api(list(failures))
    results: list[tuple[str, str]] = []
    writer = StatusWriter(client, on_result=lambda d, r: results.append((d, r)), backoff=0)
    assert writer.write(_update()) == result
    patches = [c for c in client.calls if c.verb == "patch"]
    assert len(patches) == calls and results == [(DRIVER, result)]
    first = patches[0]
    assert first.path == f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaims/{CLAIM_A}/status"
    assert (first.patch, first.params) == ("apply", {"fieldManager": f"dralab-{DRIVER}", "force": True})
    assert first.body["status"]["devices"][0]["device"] == "npu-0-0"
    written = client.objects[claims_path(NAMESPACE, CLAIM_A)]["status"].get("devices") or []
    assert [d["device"] for d in written] == (["npu-0-0"] if result == "ok" else [])


def test_top_json_shows_what_the_driver_applied() -> None:
    slice_ = {"spec": {"driver": DRIVER, "nodeName": NODE, "pool": {"name": NODE, "generation": 1},
                       "devices": [{"name": "npu-0-0", "capacity": {"memory": {"value": "21525Mi"},
                                                                     "cores": {"value": "100"}}}]}}
    claim = lab20_claim()
    other = lab20_claim(uid="u-2", name="b", share="0f0e0d0c-0000-4000-8000-000000000000")
    data = {"memoryMiB": 8192, "cores": 50, "profile": "hami-vnpu-core", "enforcement": "required"}
    claim["status"]["devices"] = [
        {"driver": DRIVER, "pool": NODE, "device": "npu-0-0", "shareID": SHARE_A, "data": data},
        {"driver": "other.example.com", "pool": NODE, "device": "npu-0-0", "shareID": SHARE_A, "data": {"x": 1}},
    ]
    shares = json.loads(as_json(compute([slice_], [claim, other])))["shares"]
    by_claim = {s["claim"]: s for s in shares}
    assert by_claim[CLAIM_A]["applied"] == data and by_claim[CLAIM_A]["shareID"] == SHARE_A
    assert by_claim["b"]["applied"] is None  # not prepared (or not reported) yet
