"""The claims of a pod: direct names, template claims through the pod status, and pending templates."""

from __future__ import annotations

from typing import Any

from dralab.model.podclaims import PodClaim, claim_names, pod_claims


def pod(entries: list[dict[str, str]], statuses: list[dict[str, str]] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"metadata": {"namespace": "a", "name": "p"}, "spec": {"resourceClaims": entries}}
    if statuses is not None:
        out["status"] = {"resourceClaimStatuses": statuses}
    return out


def test_a_direct_claim_name_is_the_claim() -> None:
    p = pod([{"name": "npu", "resourceClaimName": "shared-npu"}])
    assert pod_claims(p) == [PodClaim("npu", "shared-npu")]
    assert claim_names(p) == claim_names(p, generated=False) == ["shared-npu"]


def test_a_template_claim_resolves_through_the_pod_status() -> None:
    p = pod([{"name": "npu", "resourceClaimTemplateName": "t"}, {"name": "gpu", "resourceClaimName": "g"}],
            [{"name": "npu", "resourceClaimName": "p-npu-x7k2q"}])  # fmt: skip
    assert pod_claims(p) == [PodClaim("npu", "p-npu-x7k2q", "t"), PodClaim("gpu", "g")]
    assert claim_names(p) == ["p-npu-x7k2q", "g"]
    assert claim_names(p, generated=False) == ["g"]


def test_a_template_claim_not_created_yet_is_pending() -> None:
    (entry,) = pod_claims(pod([{"name": "npu", "resourceClaimTemplateName": "t"}]))
    assert entry.pending and entry.claim == ""
    assert claim_names(pod([{"name": "npu", "resourceClaimTemplateName": "t"}], [])) == []


def test_a_status_entry_without_a_name_needs_no_claim() -> None:
    (entry,) = pod_claims(pod([{"name": "npu", "resourceClaimTemplateName": "t"}], [{"name": "npu"}]))
    assert not entry.pending and entry.claim == ""


def test_a_status_entry_of_another_pod_claim_does_not_resolve_this_one() -> None:
    p = pod([{"name": "npu", "resourceClaimTemplateName": "t"}], [{"name": "other", "resourceClaimName": "x"}])
    assert pod_claims(p)[0].pending and claim_names(p) == []


def test_a_pod_without_claims_uses_none() -> None:
    assert pod_claims({"metadata": {"name": "p"}}) == [] and claim_names({"spec": {}}) == []
