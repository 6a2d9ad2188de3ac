"""The janitor: no managed claim outlives its pod, even while the webhook is down.

Claims are created at admission, before the pod has a UID, so they cannot be owned by it yet.
The janitor watches pods and managed claims and (a) makes the pod the claim's owner as soon as a
pod referencing the claim exists (the garbage collector then frees the claim with the pod, dralab
running or not), and (b) deletes managed claims whose pod never appeared or is gone, after a
grace period. The decision is the pure :func:`plan`; the rest is watches and API calls.

Adoption is background work: its owner patches wait while dralab pods are being admitted or
scheduled (each is an apiserver write competing with the burst's own), see :func:`adoption_delay`.
Until a claim is adopted the janitor itself keeps it from outliving its pod (reaped at once once
the pod it saw is gone), so holding the patch back costs no correctness.
"""

from __future__ import annotations

import abc
import datetime as dt
import functools
import threading
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from dralab.kube import Kube, KubeError, ListWatch
from dralab.kube.client import JSON
from dralab.kube.paths import CLAIMS_PATH, claims_path, pods_path
from dralab.model.convert import ANN_POD_NAME, DRA_LABEL, LIFECYCLE_LABEL, POD_LABEL
from dralab.model.naming import label_value
from dralab.model.objects import MANAGED_BY
from dralab.model.podclaims import claim_names
from dralab.util import get_logger
from dralab.webhook.metrics import Metrics

log = get_logger("dralab.webhook.janitor")

CLAIM_SELECTOR = ",".join(f"{k}={v}" for k, v in MANAGED_BY.items()) + f",{LIFECYCLE_LABEL}=claim"
POD_SELECTOR = f"{DRA_LABEL}=true"
ADOPT_PENDING_AFTER = 10.0  # seconds: a pod not bound by then gets its claim's owner anyway
ADOPT_QUIET = 1.0  # seconds without a new dralab pod or claim before owner patches go out ...
ADOPT_DEFER_MAX = 10.0  # ... unless the longest-waiting adoption has waited this long already
# The janitor reads only claims' metadata (names, owners, timestamps): watch just that.
METADATA_ONLY = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
WATCH_SECONDS = 240  # the server ends a watch after this; the informer resumes from the last version
BACKOFF_S = (0.2, 5.0)  # first and largest wait after a failed list or watch
# Background watches let events gather this long after one that was waited for (Kube.watch): a tenth of
# the janitor's quiet time, and a third of the CPU per event at 200 claims/s.
GATHER_S = 0.05


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("metadata") or {}


def _key(obj: dict[str, Any]) -> tuple[str, str]:
    m = _meta(obj)
    return (m.get("namespace", ""), m.get("name", ""))


@functools.lru_cache(maxsize=65536)
def parse_time(text: str | None) -> float | None:
    """An RFC 3339 timestamp as epoch seconds (cached: each pass sees the same timestamps again)."""
    if not text:
        return None
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


@dataclass
class Plan:
    """What to do now: claims to give an owner, claims to delete, and when to look again."""

    adopt: list[tuple[dict[str, Any], dict[str, Any]]] = field(default_factory=list)
    reap: list[dict[str, Any]] = field(default_factory=list)
    next_check: float | None = None
    used: set[tuple[str, str]] = field(default_factory=set)  # unowned claims a live pod names now


def claim_refs(pods: Iterable[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """(namespace, claim name) -> pods naming that claim in ``spec.resourceClaims``."""
    refs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for pod in pods:
        ns = _meta(pod).get("namespace", "")
        for name in claim_names(pod, generated=False):
            refs.setdefault((ns, name), []).append(pod)
    return refs


def plan(
    claims: Iterable[dict[str, Any]],
    pods: Iterable[dict[str, Any]],
    now: float,
    grace: float,
    seen_used: Collection[tuple[str, str]] = (),
) -> Plan:
    """Decide adoption and reaping from the current claims and pods (wall-clock ``now``, seconds).

    ``seen_used``: unowned claims an earlier pass saw named by a live pod (:attr:`Plan.used`). The
    grace period is for claims whose pod has not appeared yet; once their pod has been seen and is
    gone, waiting would only hold the capacity longer, so such a claim is reaped at once.
    """
    pods = list(pods)
    refs = claim_refs(pods)
    live_uids = {_meta(p).get("uid") for p in pods}
    out = Plan()
    for claim in claims:
        meta = _meta(claim)
        if meta.get("deletionTimestamp"):
            continue
        owners = [o for o in meta.get("ownerReferences") or [] if o.get("kind") == "Pod"]
        if owners:
            if not any(o.get("uid") in live_uids for o in owners):
                out.reap.append(claim)  # the owner is gone: the garbage collector's job, done now
            continue
        users = [p for p in refs.get(_key(claim), []) if _meta(p).get("uid")]
        if users:
            out.used.add(_key(claim))
            staying = [p for p in users if not _meta(p).get("deletionTimestamp")]
            if not staying:
                continue  # its pod is being deleted: no owner needed, it is reaped once the pod is gone
            wait = _adoption_wait(staying[0], now)
            if wait <= 0:
                out.adopt.append((claim, staying[0]))
            else:
                out.next_check = wait if out.next_check is None else min(out.next_check, wait)
            continue
        created = parse_time(meta.get("creationTimestamp"))
        age = now - created if created is not None else grace
        if age >= grace or _key(claim) in seen_used:
            out.reap.append(claim)
        else:
            wait = grace - age
            out.next_check = wait if out.next_check is None else min(out.next_check, wait)
    return out


def _adoption_wait(pod: dict[str, Any], now: float) -> float:
    """Seconds until the claim of ``pod`` should be adopted (0: now).

    While a new pod is being scheduled, the scheduler's DRA plugin writes the claim (finalizer, then
    allocation status, each guarded by its resourceVersion); an owner patch landing in between makes
    those writes conflict and retry. So adoption waits for the binding (``spec.nodeName``), or for
    :data:`ADOPT_PENDING_AFTER` seconds for a pod that stays pending (then no scheduling is in flight
    most of the time). Until adoption, the janitor itself keeps the claim from outliving its pod.
    """
    if (pod.get("spec") or {}).get("nodeName"):
        return 0.0
    created = parse_time(_meta(pod).get("creationTimestamp"))
    if created is None:
        return 0.0
    return max(0.0, created + ADOPT_PENDING_AFTER - now)


def scheduling(pods: Iterable[dict[str, Any]], now: float) -> bool:
    """Whether a dralab pod is (probably) being scheduled now: not bound, not deleting, younger than
    :data:`ADOPT_PENDING_AFTER` (an older one is pending for a reason a patch does not disturb)."""
    for pod in pods:
        meta = _meta(pod)
        if (pod.get("spec") or {}).get("nodeName") or meta.get("deletionTimestamp"):
            continue
        created = parse_time(meta.get("creationTimestamp"))
        if created is not None and now - created < ADOPT_PENDING_AFTER:
            return True
    return False


def adoption_delay(
    now: float,
    last_added: float | None,
    oldest_ready: float,
    busy_scheduling: bool,
    quiet: float = ADOPT_QUIET,
    defer_max: float = ADOPT_DEFER_MAX,
) -> float:
    """Seconds to hold the owner patches back (0: send them now).

    During a burst every apiserver write slows the pods still being admitted and bound, and an owner
    patch helps none of them. So adoption waits until no new dralab pod or claim has appeared for
    ``quiet`` seconds (``last_added``: the latest one) and none is being scheduled, but never longer
    than ``defer_max`` after the first of the waiting adoptions became possible (``oldest_ready``),
    so a steady stream of admissions delays owners by a bounded time instead of starving them.
    """
    left = oldest_ready + defer_max - now
    if left <= 0:
        return 0.0
    wait = max(0.0, last_added + quiet - now) if last_added is not None else 0.0
    if busy_scheduling:
        wait = max(wait, quiet)  # the pods' own events wake the loop earlier when they are bound
    return min(wait, left) if wait > 0 else 0.0


def owner_patch(claim: dict[str, Any], pod: dict[str, Any]) -> dict[str, Any]:
    """A merge patch that makes ``pod`` the owner of ``claim`` (guarded by the claim's resourceVersion).

    It also records the pod's real name, which ``generateName`` pods did not have at admission.
    """
    pm = _meta(pod)
    return {
        "metadata": {
            "resourceVersion": _meta(claim).get("resourceVersion"),
            "labels": {POD_LABEL: label_value(pm.get("name", ""))},
            "annotations": {ANN_POD_NAME: pm.get("name")},
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Pod", "name": pm.get("name"), "uid": pm.get("uid"),
                 "blockOwnerDeletion": False, "controller": False}
            ],
        }
    }


class Informer:
    """A list-then-watch cache of one kind of object, fed by a :class:`~dralab.kube.ListWatch`.

    The ListWatch resumes from the last resourceVersion, relists on 410 and backs off on failures;
    this keeps the objects by (namespace, name) and calls ``on_change`` after each (re)list and
    each relevant event. ``synced`` is set by the first list and stays set (a relist after an
    expired watch keeps serving the cached state, so readiness does not flap).
    """

    def __init__(
        self,
        api: Kube,
        path: str,
        label_selector: str,
        on_change: Callable[[], None],
        name: str,
        relevant: Callable[[str, dict[str, Any]], bool] | None = None,
        metadata_only: bool = False,
        gather_seconds: float = GATHER_S,
    ) -> None:
        """``relevant(event type, object)``: whether a watch event calls ``on_change`` (default: every one);
        ``metadata_only``: cache PartialObjectMetadata (no spec or status: less to send and to decode);
        ``gather_seconds``: how long events may gather before they are read (0: each at once).
        """
        self.api = api
        self.path = path
        self.selector = label_selector
        self.on_change = on_change
        self.name = name
        self.relevant = relevant
        self.accept = METADATA_ONLY if metadata_only else JSON
        self.items: dict[tuple[str, str], dict[str, Any]] = {}
        self.synced = threading.Event()
        self._lock = threading.Lock()
        self.watch = ListWatch(
            api, path, on_list=self._listed, on_event=self._changed, label_selector=label_selector or None,
            accept=self.accept, watch_seconds=WATCH_SECONDS, backoff=BACKOFF_S, name=name,
            gather_seconds=gather_seconds,
        )
        self._thread = threading.Thread(target=self.watch.run, name=f"informer-{name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.watch.stop()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.items.values())

    def _listed(self, items: list[dict[str, Any]], version: str) -> None:
        with self._lock:
            self.items = {_key(o): o for o in items}
        self.synced.set()
        self.on_change()

    def _changed(self, kind: str, obj: dict[str, Any]) -> None:
        with self._lock:
            if kind == "DELETED":
                self.items.pop(_key(obj), None)
            else:
                self.items[_key(obj)] = obj
        if self.relevant is None or self.relevant(kind, obj):
            self.on_change()


class PodClaimLoop(abc.ABC):
    """A background loop woken by a pod informer and a claim informer (the janitor, the adopter).

    Subclasses call :meth:`_prepare_loop` before building their informers (which take ``self._kick.set``)
    and set ``self.pods`` and ``self.claims``; the loop itself is their ``_loop``.
    """

    pods: Informer
    claims: Informer

    def _prepare_loop(self, name: str) -> None:
        self._kick = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    @abc.abstractmethod
    def _loop(self) -> None:
        """The subclass's work: runs on ``self._thread`` until ``self._stop``."""

    def start(self) -> None:
        self.pods.start()
        self.claims.start()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._kick.set()
        self.pods.stop()
        self.claims.stop()
        self._thread.join(timeout=5)

    def ready(self) -> bool:
        return self.pods.synced.is_set() and self.claims.synced.is_set()


class Janitor(PodClaimLoop):
    """Runs the watches and applies :func:`plan` whenever something changes or a grace period ends."""

    def __init__(
        self,
        api: Kube,
        metrics: Metrics,
        grace_seconds: float = 30.0,
        resync_seconds: float = 60.0,
        clock: Callable[[], float] = time.time,
        min_interval: float = 0.5,
    ) -> None:
        self.api = api
        self.min_interval = min_interval
        self.metrics = metrics
        self.grace = grace_seconds
        self.resync = resync_seconds
        self.clock = clock
        self._prepare_loop("janitor")
        self._wake_at: float | None = None  # wall-clock time the loop's current wait ends
        # Claims some pod has named since the janitor started, recorded from every pod event as it
        # arrives (not only from passes, which are rate-limited and held back during bursts): once
        # that pod is gone the claim is reaped at once instead of waiting out the grace period.
        # claim -> when it was first seen named (clock); entries go with the claim's adoption or deletion
        self._seen_used: dict[tuple[str, str], float] = {}
        self._seen_lock = threading.Lock()
        self._last_added: float | None = None  # when the latest new dralab pod or claim was seen (clock)
        self._ready_since: dict[tuple[str, str], float] = {}  # claims adoptable since (clock), held back
        self.pods = Informer(api, pods_path(), POD_SELECTOR, self._kick.set, "pods", relevant=self._pod_event)
        self.claims = Informer(api, CLAIMS_PATH, CLAIM_SELECTOR, self._kick.set,
                               "claims", relevant=self.claim_needs_pass, metadata_only=True)

    def claim_needs_pass(self, kind: str, claim: dict[str, Any]) -> bool:
        """Whether a claim's watch event calls for a pass now (the webhook's own new claims mostly do not).

        A pass over every cached claim per event was most of the janitor's cost under admission load.
        Only an unowned claim whose pod is already cached can be adopted now; any other new claim has
        nothing to do until its grace period ends, so it only moves the next pass earlier when its
        deadline comes before the loop's current wake-up. Deleted claims and owned ones (our own
        adoption patches) need nothing: their pods' events drive reaping.
        """
        if kind == "ADDED":
            self._last_added = self.clock()
        meta = _meta(claim)
        if kind == "DELETED" or meta.get("deletionTimestamp"):
            return False
        if any(o.get("kind") == "Pod" for o in meta.get("ownerReferences") or []):
            return False
        pod_name = (meta.get("annotations") or {}).get(ANN_POD_NAME)
        if pod_name and (meta.get("namespace", ""), pod_name) in self.pods.items:
            return True
        created = parse_time(meta.get("creationTimestamp"))
        due = (created if created is not None else self.clock()) + self.grace
        return self._wake_at is None or due < self._wake_at

    def _pod_event(self, kind: str, pod: dict[str, Any]) -> bool:
        """Every pod event calls for a pass; a new pod also marks admissions as under way.

        The claims the pod names are remembered as used, whatever the event (a DELETED pod existed),
        so a pod that lived only between two passes still releases its claims at once.
        """
        if kind == "ADDED":
            self._last_added = self.clock()
        named = claim_refs([pod]) if _meta(pod).get("uid") else {}
        if named:
            now = self.clock()
            with self._seen_lock:
                for key in named:
                    self._seen_used.setdefault(key, now)
        return True

    def _loop(self) -> None:
        while not self._stop.is_set():
            if not self.ready():
                self._kick.wait(0.5)
                self._kick.clear()
                continue
            self._kick.clear()
            timeout = self.resync
            try:
                timeout = self.reconcile_once()
            except Exception:
                log.exception("janitor pass failed")
                timeout = 2.0
            # A burst of events (many pods admitted at once) becomes one pass, not one per event.
            self._wake_at = self.clock() + max(timeout, self.min_interval)
            self._stop.wait(self.min_interval)
            self._kick.wait(max(0.0, timeout - self.min_interval))

    def reconcile_once(self) -> float:
        """One pass over the cached state; returns how long to wait before the next unprompted pass."""
        claims = self.claims.snapshot()
        pods = self.pods.snapshot()
        now = self.clock()
        with self._seen_lock:
            seen = set(self._seen_used)
        the_plan = plan(claims, pods, now, self.grace, seen)
        self._remember_used(claims, the_plan.used, now)
        self.metrics.janitor_pending.set(
            sum(1 for c in claims if not _meta(c).get("ownerReferences") and not _meta(c).get("deletionTimestamp"))
        )
        self._ready_since = {_key(c): self._ready_since.get(_key(c), now) for c, _ in the_plan.adopt}
        hold = 0.0
        if the_plan.adopt:
            hold = adoption_delay(now, self._last_added, min(self._ready_since.values()), scheduling(pods, now))
        if hold > 0:
            the_plan.next_check = hold if the_plan.next_check is None else min(the_plan.next_check, hold)
        else:
            for claim, pod in the_plan.adopt:
                self._adopt(claim, pod)
        if the_plan.reap:
            self._reap(the_plan.reap)
        wait = self.resync if the_plan.next_check is None else min(self.resync, the_plan.next_check + 0.05)
        return max(wait, 0.05)

    def _remember_used(self, claims: list[dict[str, Any]], used: set[tuple[str, str]], now: float) -> None:
        """Add what this pass saw used; drop adopted claims (their owner reference decides now) and
        claims not cached for a grace period (deleted, or never dralab's)."""
        unowned = {_key(c) for c in claims
                   if not any(o.get("kind") == "Pod" for o in _meta(c).get("ownerReferences") or [])}
        cached = {_key(c) for c in claims}
        with self._seen_lock:
            for key in used:
                self._seen_used.setdefault(key, now)
            for key, since in list(self._seen_used.items()):
                adopted = key in cached and key not in unowned
                if adopted or (key not in cached and now - since > self.grace):
                    del self._seen_used[key]

    def _adopt(self, claim: dict[str, Any], pod: dict[str, Any]) -> None:
        ns, name = _key(claim)
        try:
            self.api.patch(claims_path(ns, name), owner_patch(claim, pod))
            self.metrics.janitor_adopted.inc()
            log.info("claim adopted by its pod", extra={"fields": {"namespace": ns, "claim": name,
                                                                    "pod": _meta(pod).get("name")}})
        except KubeError as exc:
            if exc.status not in (404, 409):
                log.warning("could not adopt claim", extra={"fields": {"claim": name, "error": str(exc)}})

    def _reap(self, claims: list[dict[str, Any]]) -> None:
        by_ns: dict[str, list[dict[str, Any]]] = {}
        for claim in claims:
            by_ns.setdefault(_key(claim)[0], []).append(claim)
        for ns, group in by_ns.items():
            # Check the live pods (not the cache) before deleting anything.
            try:
                live = self.api.list(pods_path(ns)).get("items") or []
            except KubeError as exc:
                log.warning("cannot list pods before reaping", extra={"fields": {"namespace": ns, "error": str(exc)}})
                continue
            refs = claim_refs(live)
            uids = {_meta(p).get("uid") for p in live}
            for claim in group:
                meta = _meta(claim)
                owners = [o.get("uid") for o in meta.get("ownerReferences") or [] if o.get("kind") == "Pod"]
                if (owners and any(u in uids for u in owners)) or (not owners and refs.get(_key(claim))):
                    continue
                try:
                    self.api.delete(claims_path(ns, meta.get("name", "")), uid=meta.get("uid"))
                    self.metrics.janitor_reaped.inc()
                    log.info("orphaned claim deleted", extra={"fields": {"namespace": ns, "claim": meta.get("name")}})
                except KubeError as exc:
                    if exc.status not in (404, 409):
                        log.warning("could not delete claim", extra={"fields": {"claim": meta.get("name"),
                                                                              "error": str(exc)}})
