"""The leak audits every fault scenario ends with, as pure functions of what the apiserver and the
node's CDI folder say (no I/O here: :mod:`.context` reads, these judge).

- leaked claims: ResourceClaims that no live pod references (the caller polls past the webhook's
  grace period);
- leaked capacity: on every device, the capacity consumed by all allocated claims (their
  ``status.allocation.devices.results[].consumedCapacity``; the whole device for an exclusive
  result, as ``dralab.model.accounting`` counts it) against what the claims of live pods hold;
- over-committed devices: consumed capacity past what the slice publishes;
- the node: CDI specs of claims no live pod holds (the driver was never told to unprepare), and
  live, allocated claims whose spec is missing (what a reboot does without an idempotent Prepare).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from dralab.model import accounting
from dralab.model.podclaims import claim_names

TERMINAL = ("Succeeded", "Failed")
CDI_CLASS_PREFIX = "k8s."


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("metadata") or {}


def is_live(pod: dict[str, Any]) -> bool:
    """A pod that still exists and is not terminal holds its claims (also while it is being deleted)."""
    return (pod.get("status") or {}).get("phase") not in TERMINAL


def held_claims(pods: Iterable[dict[str, Any]]) -> set[tuple[str, str]]:
    """(namespace, claim name) of every claim a live pod uses."""
    out = set()
    for pod in pods:
        if is_live(pod):
            ns = _meta(pod).get("namespace", "")
            out |= {(ns, name) for name in claim_names(pod)}
    return out


def leaked_claims(claims: Iterable[dict[str, Any]], pods: Iterable[dict[str, Any]]) -> list[str]:
    """``namespace/name`` of claims no live pod uses (the caller polls past the grace period)."""
    held = held_claims(pods)
    return sorted(
        f"{_meta(c).get('namespace')}/{_meta(c).get('name')}"
        for c in claims
        if (_meta(c).get("namespace"), _meta(c).get("name")) not in held
    )


def capacity_leaks(claims: list[dict[str, Any]], pods: list[dict[str, Any]],
                   slices: list[dict[str, Any]]) -> list[dict[str, Any]]:  # fmt: skip
    """Devices where the consumed capacity differs from what the claims of live pods hold."""
    held = held_claims(pods)
    live = [c for c in claims if (_meta(c).get("namespace"), _meta(c).get("name")) in held]
    consumed, holding = accounting.consumed(claims, slices), accounting.consumed(live, slices)
    leaks = []
    for key in sorted(consumed):
        have, want = consumed[key], holding.get(key, {})
        caps = set(have) | set(want)
        if any(have.get(c, 0) != want.get(c, 0) for c in caps):
            leaks.append({
                "device": "/".join(key),
                "consumed": {c: accounting.plain(v) for c, v in have.items()},
                "held_by_live_pods": {c: accounting.plain(v) for c, v in want.items()},
                "leaked": {
                    c: accounting.plain(have.get(c, Fraction(0)) - want.get(c, Fraction(0))) for c in sorted(caps)
                },
            })
    return leaks


def overcommitted(slices: list[dict[str, Any]], claims: list[dict[str, Any]]) -> list[str]:
    """Devices whose consumed capacity exceeds what the slice publishes (must never happen)."""
    keys = accounting.overcommitted(accounting.device_capacities(slices), accounting.consumed(claims, slices))
    return ["/".join(key) for key in keys]


def spec_uids(file_names: Iterable[str]) -> set[str]:
    """Claim UIDs of the per-claim CDI specs in a directory listing (``k8s.<driver>-<class>_<uid>.yaml``)."""
    out = set()
    for name in file_names:
        if name.startswith(CDI_CLASS_PREFIX) and name.endswith(".yaml") and "_" in name:
            uid = name.rsplit("_", 1)[1].removesuffix(".yaml")
            if uid != "common":
                out.add(uid)
    return out


def node_audit(spec_files: Iterable[str], claims: list[dict[str, Any]], pods: list[dict[str, Any]]) -> dict[str, int]:
    """Stale specs (no live pod holds the claim) and live, allocated claims without a spec."""
    held = held_claims(pods)
    live_uids = {
        _meta(c).get("uid")
        for c in claims
        if (_meta(c).get("namespace"), _meta(c).get("name")) in held
        and (c.get("status") or {}).get("allocation")
        and (c.get("status") or {}).get("reservedFor")
    }
    on_disk = spec_uids(spec_files)
    return {"stale_cdi_specs": len(on_disk - live_uids), "missing_cdi_specs": len(live_uids - on_disk)}


@dataclass
class Audit:
    """The end state of a scenario."""

    leaked_claims: list[str] = field(default_factory=list)
    leaked_capacity: list[dict[str, Any]] = field(default_factory=list)
    overcommitted: list[str] = field(default_factory=list)
    node: dict[str, int] = field(default_factory=dict)

    @property
    def clean(self) -> bool:
        return not (self.leaked_claims or self.leaked_capacity or self.overcommitted) and not any(
            self.node.values()
        )


def missing_specs(uids: Iterable[str], spec_files: Iterable[str]) -> list[str]:
    """The claim UIDs among ``uids`` that no CDI spec file names."""
    return sorted(set(uids) - spec_uids(spec_files))
