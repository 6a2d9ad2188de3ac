"""The claim cache: which claims it keeps, when it answers, and that Prepare then needs no GET."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dralab.driver.cdi import ClaimRef
from dralab.driver.claims import InMemoryClaimSource
from dralab.driver.informer import ClaimInformer, Expired
from dralab_kit.fixtures.driver_claims import CLAIM_A, CLAIM_A_UID, DRIVER, NAMESPACE, NODE, lab20_claim

REF_A = ClaimRef(NAMESPACE, CLAIM_A, CLAIM_A_UID)


def _informer(synced: bool = True) -> ClaimInformer:
    informer = ClaimInformer(client=None, node=NODE, drivers=[DRIVER])  # type: ignore[arg-type]
    if synced:
        informer.synced.set()
    return informer


def _event(kind: str, claim: dict[str, Any], version: str = "7") -> dict[str, Any]:
    claim = {**claim, "metadata": {**claim["metadata"], "resourceVersion": version}}
    return {"type": kind, "object": claim}


class CountingClaims(InMemoryClaimSource):
    """The in-memory claim source, counting GETs."""

    def __init__(self, claims: list[dict[str, Any]]) -> None:
        super().__init__(claims)
        self.gets = 0

    def get_claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.gets += 1
        return super().get_claim(namespace, name)


def test_keeps_only_claims_allocated_in_this_nodes_pool_for_its_drivers() -> None:
    informer = _informer()
    informer.apply(_event("ADDED", lab20_claim()))
    informer.apply(_event("ADDED", lab20_claim(uid="u2", name="elsewhere", node="other-node")))
    informer.apply(_event("ADDED", lab20_claim(uid="u3", name="other-driver", driver="gpu.example.com")))
    unallocated = lab20_claim(uid="u4", name="pending")
    del unallocated["status"]
    informer.apply(_event("ADDED", unallocated))
    assert len(informer) == 1
    assert informer.lookup(NAMESPACE, CLAIM_A, CLAIM_A_UID) is not None


def test_answers_only_for_the_uid_asked_and_only_when_synced() -> None:
    informer = _informer(synced=False)
    informer.apply(_event("ADDED", lab20_claim()))
    assert informer.lookup(NAMESPACE, CLAIM_A, CLAIM_A_UID) is None, "not listed yet: a GET decides"
    informer.synced.set()
    assert informer.lookup(NAMESPACE, CLAIM_A, "a-replaced-claim") is None
    assert informer.lookup(NAMESPACE, CLAIM_A, CLAIM_A_UID)["metadata"]["uid"] == CLAIM_A_UID


def test_deallocation_and_deletion_drop_the_claim_and_versions_advance() -> None:
    informer = _informer()
    informer.apply(_event("ADDED", lab20_claim(), "10"))
    deallocated = lab20_claim()
    del deallocated["status"]
    informer.apply(_event("MODIFIED", deallocated, "11"))
    assert informer.lookup(NAMESPACE, CLAIM_A, CLAIM_A_UID) is None
    informer.apply(_event("MODIFIED", lab20_claim(), "12"))
    informer.apply(_event("DELETED", lab20_claim(), "13"))
    assert len(informer) == 0
    informer.apply({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "20"}}})
    assert informer.resource_version == "20"


def test_an_expired_version_asks_for_a_new_list() -> None:
    informer = _informer()
    with pytest.raises(Expired):
        informer.apply({"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old"}})


def _cache_reads(state, result: str) -> float | None:
    return state.metrics.registry.get_sample_value(
        "dralab_driver_claim_cache_total", {"driver": state.driver, "result": result}
    )


def _state(root: Path, library: Path, claims: CountingClaims, cache: ClaimInformer):
    from dralab.driver.devices import BackendOptions
    from dralab.driver.devices.fake import FakeBackend
    from dralab.driver.state import DriverState
    from dralab.model.vendors import load_vendor_table

    return DriverState(
        vendor=load_vendor_table().get("ascend"),
        node=NODE,
        backend=FakeBackend.from_options(BackendOptions(node=NODE, state_dir=root / "s")),
        claims=claims,
        cdi_dir=root / "cdi",
        state_dir=root / "s",
        library=library,
        boot_id="b",
        cache=cache,
    ).open()


def test_prepare_reads_a_cached_claim_without_a_get(tmp_path: Path, library: Path) -> None:
    claims = CountingClaims([lab20_claim()])
    informer = _informer()
    informer.apply(_event("ADDED", lab20_claim()))
    state = _state(tmp_path, library, claims, informer)
    refs = [REF_A] + [ClaimRef(NAMESPACE, f"c{i}", f"uid-{i}") for i in range(3)]
    for ref in refs[1:]:
        informer.apply(_event("ADDED", lab20_claim(uid=ref.uid, name=ref.name)))
    out = state.prepare(refs)
    assert all(not r.error for r in out.values())
    assert claims.gets == 0
    assert _cache_reads(state, "hit") == len(refs)


def test_a_claim_the_cache_does_not_hold_is_read_with_a_get(tmp_path: Path, library: Path) -> None:
    replaced = lab20_claim(uid="new-uid")
    claims = CountingClaims([replaced])
    informer = _informer()
    informer.apply(_event("ADDED", lab20_claim()))  # the old claim of that name: a stale cache entry
    state = _state(tmp_path, library, claims, informer)
    out = state.prepare([ClaimRef(NAMESPACE, CLAIM_A, "new-uid")])
    assert out["new-uid"].error == ""
    assert claims.gets == 1
    assert _cache_reads(state, "miss") == 1


def test_cached_claims_leave_their_managed_fields_behind() -> None:
    informer = _informer()
    claim = lab20_claim()
    claim["metadata"]["managedFields"] = [{"manager": "kube-scheduler", "operation": "Apply",
                                          "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}}}]
    informer.apply(_event("ADDED", claim))
    cached = informer.lookup(NAMESPACE, CLAIM_A, CLAIM_A_UID)
    assert cached is not None and "managedFields" not in cached["metadata"]
    assert cached["metadata"]["uid"] == CLAIM_A_UID and cached["status"] == claim["status"]
