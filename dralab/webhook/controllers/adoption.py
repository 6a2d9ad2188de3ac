"""Adopting HAMi-DRA's claims: what a cluster switching to dralab still holds from its old webhook.

HAMi-DRA creates a ResourceClaim per container at admission, named
``<namespace>-<pod>-<container>[-<suffix>]`` (cut to 63 characters with ``-<8 hex of sha256>``),
with no labels and no owner, and deletes it only from its pod-DELETE webhook. Once dralab replaces
it, those claims would hold device capacity forever. The adopter finds them by their fingerprint
(unlabelled, unowned, one request of a class dralab serves whose first selector is the vendor's
type selector, a name in HAMi-DRA's scheme; optionally also configured labels/annotations) and:

- gives each one referenced by a live ``hami.io/dra`` pod that pod as owner and dralab's labels,
  so the garbage collector frees it with the pod and dralab's janitor looks after it from then on;
- deletes those no live pod references or holds, after a grace period.

The decision is the pure :func:`plan`; :class:`Adopter` runs it on watches.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from dralab.kube import Kube, KubeError
from dralab.kube.informer import Informer, PodClaimLoop
from dralab.kube.paths import CLAIMS_PATH, claims_path, pods_path
from dralab.model.convert import DRA_LABEL, LIFECYCLE_LABEL
from dralab.model.objects import MANAGED_BY
from dralab.model.vendors import VendorTable
from dralab.util import get_logger
from dralab.webhook.controllers.janitor import claim_refs, owner_patch, parse_time

log = get_logger("dralab.webhook.controllers.adoption")

ADOPTED_LABEL = "dralab.io/adopted-from"
ADOPTED_FROM = "hami-dra"
# unlabelled claims only: dralab's own are the janitor's, and labels are what adoption adds
CANDIDATE_SELECTOR = "!" + next(iter(MANAGED_BY))
POD_SELECTOR = f"{DRA_LABEL}=true"
DNS_LABEL_MAX = 63
_CUT_SUFFIX = re.compile(r"-[0-9a-f]{8}$")


@dataclass(frozen=True)
class AdoptionSettings:
    """Which claims count as HAMi-DRA's, beyond the fingerprint, and how long an orphan may wait."""

    match_labels: dict[str, str] = field(default_factory=dict)
    match_annotations: dict[str, str] = field(default_factory=dict)
    grace_seconds: float = 30.0


def hami_dra_claim_name(namespace: str, pod: str, container: str, suffix: str) -> str:
    """The name HAMi-DRA gives a claim: ``<ns>-<pod>-<container>-<suffix>``, cut as HAMi-DRA cuts it."""
    name = f"{namespace}-{pod}-{container}"
    if suffix:
        name = f"{name}-{suffix}"
    if len(name) <= DNS_LABEL_MAX:
        return name
    tail = "-" + hashlib.sha256(name.encode()).hexdigest()[:8]
    prefix = name[: DNS_LABEL_MAX - len(tail)].rstrip("-")
    return prefix + tail if prefix else tail.lstrip("-")


@dataclass(frozen=True)
class Fingerprint:
    """Why a claim is taken for HAMi-DRA's: its vendor and the suffixes its name may end with."""

    vendor: str
    suffixes: tuple[str, ...]


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("metadata") or {}


def fingerprint(claim: dict[str, Any], table: VendorTable, settings: AdoptionSettings) -> Fingerprint | None:
    """The vendor whose HAMi-DRA claim ``claim`` looks like, or None when it is not one."""
    meta = _meta(claim)
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    if any(labels.get(k) == v for k, v in MANAGED_BY.items()) or meta.get("ownerReferences"):
        return None
    if any(labels.get(k) != v for k, v in settings.match_labels.items()):
        return None
    if any(annotations.get(k) != v for k, v in settings.match_annotations.items()):
        return None
    name, namespace = meta.get("name") or "", meta.get("namespace") or ""
    if not name.startswith(f"{namespace}-"):
        return None
    requests = ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []
    if len(requests) != 1:
        return None
    exactly = requests[0].get("exactly") or {}
    selectors = exactly.get("selectors") or []
    first = ((selectors[0] if selectors else {}).get("cel") or {}).get("expression", "")
    for vendor in table.enabled_vendors():
        if exactly.get("deviceClassName") != vendor.device_class:
            continue
        type_test = f'device.attributes["{vendor.attribute_domain}"].type == "{vendor.type_attribute}"'
        if type_test not in first:
            continue
        suffixes = tuple(dict.fromkeys(rs.claim_suffix for rs in vendor.resource_sets()))
        if len(name) == DNS_LABEL_MAX and _CUT_SUFFIX.search(name):
            return Fingerprint(vendor.key, suffixes)
        if any(name.endswith(f"-{s}") for s in suffixes):
            return Fingerprint(vendor.key, suffixes)
    return None


def named_for(claim: dict[str, Any], pod: dict[str, Any], suffixes: Iterable[str]) -> bool:
    """Whether the claim's name is the one HAMi-DRA gives a container of ``pod`` (any kind of container)."""
    meta, pod_meta = _meta(claim), _meta(pod)
    spec = pod.get("spec") or {}
    containers = [c.get("name", "") for kind in ("initContainers", "containers") for c in spec.get(kind) or []]
    return any(
        hami_dra_claim_name(pod_meta.get("namespace", ""), pod_meta.get("name", ""), c, s) == meta.get("name")
        for c in containers
        for s in suffixes
    )


@dataclass
class Plan:
    """Claims to adopt (with their pod), claims to delete, findings, and when to look again."""

    adopt: list[tuple[dict[str, Any], dict[str, Any]]] = field(default_factory=list)
    reap: list[dict[str, Any]] = field(default_factory=list)
    held: list[dict[str, Any]] = field(default_factory=list)  # reserved for a live pod we may not own
    next_check: float | None = None


def plan(
    claims: Iterable[dict[str, Any]],
    pods: Iterable[dict[str, Any]],
    table: VendorTable,
    settings: AdoptionSettings,
    now: float,
) -> Plan:
    """Decide adoption and reaping of HAMi-DRA's claims from the current claims and pods."""
    pods = [p for p in pods if _meta(p).get("uid")]
    refs = claim_refs(pods)
    live_uids = {_meta(p).get("uid") for p in pods}
    out = Plan()
    for claim in claims:
        meta = _meta(claim)
        if meta.get("deletionTimestamp"):
            continue
        mark = fingerprint(claim, table, settings)
        if mark is None:
            continue
        key = (meta.get("namespace", ""), meta.get("name", ""))
        users = [p for p in refs.get(key, []) if (_meta(p).get("labels") or {}).get(DRA_LABEL) == "true"]
        if users:
            # prefer the pod the name was made for; any referencing hami.io/dra pod is evidence enough
            chosen = next((p for p in users if named_for(claim, p, mark.suffixes)), users[0])
            out.adopt.append((claim, chosen))
            continue
        if refs.get(key):
            continue  # referenced by a pod that is not a hami.io/dra pod: not ours to judge
        reserved = [r.get("uid") for r in (claim.get("status") or {}).get("reservedFor") or []]
        if any(uid in live_uids for uid in reserved):
            out.held.append(claim)
            continue
        created = parse_time(meta.get("creationTimestamp"))
        age = now - created if created is not None else settings.grace_seconds
        if age >= settings.grace_seconds:
            out.reap.append(claim)
        else:
            wait = settings.grace_seconds - age
            out.next_check = wait if out.next_check is None else min(out.next_check, wait)
    return out


def adoption_patch(claim: dict[str, Any], pod: dict[str, Any]) -> dict[str, Any]:
    """The janitor's owner patch plus dralab's labels: from now on the claim is a managed claim."""
    patch = owner_patch(claim, pod)
    labels = patch["metadata"].setdefault("labels", {})
    labels.update({**MANAGED_BY, LIFECYCLE_LABEL: "claim", ADOPTED_LABEL: ADOPTED_FROM})
    return patch


class Adopter(PodClaimLoop):
    """Watches unlabelled claims and ``hami.io/dra`` pods and applies :func:`plan` on every change."""

    def __init__(
        self,
        api: Kube,
        table: VendorTable,
        settings: AdoptionSettings,
        metrics: Any = None,
        clock: Callable[[], float] = time.time,
        resync_seconds: float = 60.0,
    ) -> None:
        self.api = api
        self.table = table
        self.settings = settings
        self.metrics = metrics
        self.clock = clock
        self.resync = resync_seconds
        self.adopted = 0
        self.reaped = 0
        self._prepare_loop("adopter")
        self.pods = Informer(api, pods_path(), POD_SELECTOR, self._kick.set, "adoption-pods")
        self.claims = Informer(api, CLAIMS_PATH, CANDIDATE_SELECTOR, self._kick.set, "adoption-claims")

    def _loop(self) -> None:
        while not self._stop.is_set():
            if not self.ready():
                self._kick.wait(0.5)
                self._kick.clear()
                continue
            self._kick.clear()
            try:
                timeout = self.reconcile_once()
            except Exception:
                log.exception("adoption pass failed")
                timeout = 2.0
            self._stop.wait(0.2)
            self._kick.wait(max(0.0, timeout - 0.2))

    def reconcile_once(self) -> float:
        """One pass over the cached state; returns how long to wait before the next unprompted pass."""
        the_plan = plan(self.claims.snapshot(), self.pods.snapshot(), self.table, self.settings, self.clock())
        for claim, pod in the_plan.adopt:
            self._adopt(claim, pod)
        for claim in the_plan.reap:
            self._reap(claim)
        wait = self.resync if the_plan.next_check is None else min(self.resync, the_plan.next_check + 0.05)
        return max(wait, 0.05)

    def _adopt(self, claim: dict[str, Any], pod: dict[str, Any]) -> None:
        ns, name = _meta(claim).get("namespace", ""), _meta(claim).get("name", "")
        try:
            self.api.patch(claims_path(ns, name), adoption_patch(claim, pod))
        except KubeError as exc:
            if exc.status not in (404, 409):
                log.warning("could not adopt a HAMi-DRA claim", extra={"fields": {"claim": name, "error": str(exc)}})
            return
        self.adopted += 1
        if self.metrics is not None:
            self.metrics.janitor_adopted.inc()
        log.info("HAMi-DRA claim adopted", extra={"fields": {"namespace": ns, "claim": name,
                                                            "pod": _meta(pod).get("name")}})

    def _reap(self, claim: dict[str, Any]) -> None:
        meta = _meta(claim)
        ns, name = meta.get("namespace", ""), meta.get("name", "")
        # check the live pods (not the cache) before deleting anything
        try:
            live = self.api.list(pods_path(ns)).get("items") or []
        except KubeError as exc:
            log.warning("cannot list pods before reaping", extra={"fields": {"namespace": ns, "error": str(exc)}})
            return
        uids = {_meta(p).get("uid") for p in live}
        reserved = {r.get("uid") for r in (claim.get("status") or {}).get("reservedFor") or []}
        if claim_refs(live).get((ns, name)) or reserved & uids:
            return
        try:
            self.api.delete(claims_path(ns, name), uid=meta.get("uid"))
        except KubeError as exc:
            if exc.status not in (404, 409):
                log.warning("could not delete a HAMi-DRA claim", extra={"fields": {"claim": name, "error": str(exc)}})
            return
        self.reaped += 1
        if self.metrics is not None:
            self.metrics.janitor_reaped.inc()
        log.info("orphaned HAMi-DRA claim deleted", extra={"fields": {"namespace": ns, "claim": name}})


def build_adopter(config: Any, api: Kube | None, metrics: Any = None) -> Adopter | None:
    """The adopter a webhook runs: only with an API and when the config's migration settings ask for it."""
    migration = config.migration
    if api is None or not migration.adopts:
        return None
    settings = AdoptionSettings(
        match_labels=dict(migration.claim_labels),
        match_annotations=dict(migration.claim_annotations),
        grace_seconds=float(migration.grace_seconds),
    )
    return Adopter(api, config.vendors, settings, metrics)
