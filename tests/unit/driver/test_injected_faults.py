"""The fake backend's injected Prepare failure: only the annotated claim fails, and it recovers."""

from __future__ import annotations

from pathlib import Path

from dralab.driver.cdi import ClaimRef
from dralab.driver.devices.fake import FAULT_ANNOTATION
from dralab_kit.fixtures.driver_claims import CLAIM_A, CLAIM_A_UID, NAMESPACE, lab20_claim

REF_A = ClaimRef(NAMESPACE, CLAIM_A, CLAIM_A_UID)


def _faulty(text: str) -> dict:
    claim = lab20_claim()
    claim["metadata"].setdefault("annotations", {})[FAULT_ANNOTATION] = text
    return claim


def test_annotated_claim_fails_alone_and_recovers_when_lifted(tmp_path: Path, make_state, claims) -> None:
    other = lab20_claim()
    other["metadata"].update(name="other", uid="0f0f0f0f-0000-4000-8000-000000000001")
    claims.put(other)
    claims.put(_faulty("disk on fire"))
    state = make_state(tmp_path, claims)
    ref_other = ClaimRef(NAMESPACE, "other", other["metadata"]["uid"])
    out = state.prepare([REF_A, ref_other])
    assert "injected by the fake backend" in out[CLAIM_A_UID].error and "disk on fire" in out[CLAIM_A_UID].error
    assert out[ref_other.uid].error == ""  # the same call, the same device: unaffected
    assert CLAIM_A_UID not in state.prepared_claims()
    claims.put(_faulty(""))  # an empty value lifts the fault
    assert state.prepare([REF_A])[CLAIM_A_UID].error == ""
    assert CLAIM_A_UID in state.prepared_claims()
