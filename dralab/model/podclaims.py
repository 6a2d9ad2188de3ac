"""Which ResourceClaims a pod uses: one reading of ``spec.resourceClaims`` and ``status.resourceClaimStatuses``.

A pod-level entry names its claim directly (``resourceClaimName``) or through a template
(``resourceClaimTemplateName``). For a template, the resourceclaim controller creates the claim and
records its generated name in ``status.resourceClaimStatuses`` under the entry's name; until it has,
the entry is pending. A status entry without a claim name means that entry needs no claim (as the
kubelet reads it). The janitor, the kubelet stand-in, the migration and the fault bench all ask this.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PodClaim:
    """One entry of a pod's ``spec.resourceClaims`` and the ResourceClaim it resolves to."""

    entry: str  # spec.resourceClaims[].name
    claim: str  # the ResourceClaim's name ("" while pending, or when the entry needs none)
    template: str = ""  # resourceClaimTemplateName ("" for a direct name)
    pending: bool = False  # a template entry whose claim the controller has not recorded yet


def pod_claims(pod: Mapping[str, Any]) -> list[PodClaim]:
    """Every ``spec.resourceClaims`` entry of ``pod``, in order, resolved to its claim's name."""
    statuses = {s.get("name"): s for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
    out = []
    for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
        name = str(entry.get("name") or "")
        direct = entry.get("resourceClaimName")
        template = entry.get("resourceClaimTemplateName")
        if direct:
            out.append(PodClaim(name, str(direct)))
        elif template:
            status = statuses.get(name)
            claim = str((status or {}).get("resourceClaimName") or "")
            out.append(PodClaim(name, claim, str(template), pending=status is None))
    return out


def claim_names(pod: Mapping[str, Any], generated: bool = True) -> list[str]:
    """Names of the claims ``pod`` uses, in spec order: those it names and (``generated``) those from templates."""
    return [c.claim for c in pod_claims(pod) if c.claim and (generated or not c.template)]
