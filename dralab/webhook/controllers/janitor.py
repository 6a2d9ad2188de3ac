"""The janitor: no managed claim outlives its pod, even while the webhook is down.

Claims are created at admission, before the pod has a UID, so they cannot be owned by it yet.
The janitor watches pods and managed claims and (a) makes the pod the claim's owner as soon as a
pod referencing the claim exists (the garbage collector then frees the claim with the pod, dralab
running or not), and (b) deletes managed claims whose pod never appeared or is gone, after a
grace period. The decision for one claim is the pure :func:`decide`; :func:`plan` applies it to
every claim; the rest is watches, indexes and API calls.

Adoption is background work: its owner patches wait while dralab pods are being admitted or
scheduled (each is an apiserver write competing with the burst's own), see :func:`adoption_delay`.
Until a claim is adopted the janitor itself keeps it from outliving its pod (reaped at once once
the pod it saw is gone), so holding the patch back costs no correctness.

What a pass costs (issue 27: no pass may walk every claim on every event):

- The informers' callbacks (watch threads) only record the event (an append under a lock) and
  the claims a pod names as used; nothing there walks the cache.
- An incremental pass (every pass but those below) applies the recorded events to the janitor's
  own indexes and decides again only the *dirty* claims: the claim of a claim event; for a pod
  event, the claims that pod names (``spec.resourceClaims``, before and after the event) and the
  claims owned by its UID; and the claims whose deadline (grace period, adoption wait) has come,
  from a heap. A claim's decision reads nothing else (its object, the pods naming it, whether its
  owners' UIDs are live, the clock, the used-claim memory), so the others keep their decision.
  The adoptions and deletions decided earlier and not yet seen done (held-back owner patches, a
  delete whose DELETED event has not arrived) stay outstanding and are sent again, as a full pass
  would. The counts a pass needs (the youngest unbound pod, for :func:`adoption_delay`; the
  unowned claims, for the ``janitor_pending`` gauge) are kept from events. Cost: O(events since
  the last pass + dirty claims + outstanding actions) and O(log n) per heap entry.
- A full pass rebuilds the indexes from the informers' caches and decides every claim: O(pods +
  claims). It runs first (after both caches have synced), after a relist of either informer (a
  410 Gone replaces the cache without events), and every ``resync_seconds`` as a safety net.

Both passes take every decision from :func:`decide`, so an incremental pass decides what
:func:`plan` over the whole cache would (tests/unit/webhook/test_janitor.py checks this on random
event sequences). Index and heap state belong to the janitor thread alone; the watch threads
share only the event list (``_events_lock``) and the used-claim memory (``_seen_lock``).
"""

from __future__ import annotations

import datetime as dt
import functools
import heapq
import threading
import time
from collections.abc import Callable, Collection, Container, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from dralab.kube import Kube, KubeError
from dralab.kube.informer import Informer, Key, PodClaimLoop, key_of
from dralab.kube.paths import CLAIMS_PATH, claims_path, pods_path
from dralab.model.convert import ANN_POD_NAME, DRA_LABEL, LIFECYCLE_LABEL, POD_LABEL
from dralab.model.naming import label_value
from dralab.model.objects import MANAGED_BY
from dralab.model.podclaims import claim_names
from dralab.util import get_logger
from dralab.webhook.metrics import Metrics

log = get_logger("dralab.webhook.controllers.janitor")

CLAIM_SELECTOR = ",".join(f"{k}={v}" for k, v in MANAGED_BY.items()) + f",{LIFECYCLE_LABEL}=claim"
POD_SELECTOR = f"{DRA_LABEL}=true"
ADOPT_PENDING_AFTER = 10.0  # seconds: a pod not bound by then gets its claim's owner anyway
ADOPT_QUIET = 1.0  # seconds without a new dralab pod or claim before owner patches go out ...
ADOPT_DEFER_MAX = 10.0  # ... unless the longest-waiting adoption has waited this long already
ADOPT = "adopt"
REAP = "reap"

def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("metadata") or {}


def _pod_owners(meta: dict[str, Any]) -> list[Any]:
    """The UIDs of a claim's Pod owner references."""
    return [o.get("uid") for o in meta.get("ownerReferences") or [] if o.get("kind") == "Pod"]


def _unowned(claim: dict[str, Any]) -> bool:
    """Counted by the ``janitor_pending`` gauge: no owner reference at all, and not being deleted."""
    meta = _meta(claim)
    return not meta.get("ownerReferences") and not meta.get("deletionTimestamp")


@functools.lru_cache(maxsize=65536)
def parse_time(text: str | None) -> float | None:
    """An RFC 3339 timestamp as epoch seconds (cached: each pass sees the same timestamps again)."""
    if not text:
        return None
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


class Decision(NamedTuple):
    """One claim's verdict now: ``action`` :data:`ADOPT` (by ``pod``), :data:`REAP` or "" (nothing to do);
    ``due``: when (clock) it changes with no event (a grace period or an adoption wait ends), if it does;
    ``used``: unowned and named by a pod that has a UID."""

    action: str
    pod: dict[str, Any] | None = None
    due: float | None = None
    used: bool = False


_NOTHING = Decision("")
_REAP = Decision(REAP)
_USED = Decision("", used=True)


@dataclass
class Plan:
    """What to do now: claims to give an owner, claims to delete, and when to look again."""

    adopt: list[tuple[dict[str, Any], dict[str, Any]]] = field(default_factory=list)
    reap: list[dict[str, Any]] = field(default_factory=list)
    next_check: float | None = None
    used: set[Key] = field(default_factory=set)  # unowned claims a live pod names now

    def add(self, claim: dict[str, Any], decision: Decision, now: float) -> None:
        if decision.used:
            self.used.add(key_of(claim))
        if decision.action == ADOPT and decision.pod is not None:
            self.adopt.append((claim, decision.pod))
        elif decision.action == REAP:
            self.reap.append(claim)
        if decision.due is not None:
            wait = decision.due - now
            self.next_check = wait if self.next_check is None else min(self.next_check, wait)


def claim_refs(pods: Iterable[dict[str, Any]]) -> dict[Key, list[dict[str, Any]]]:
    """(namespace, claim name) -> pods naming that claim in ``spec.resourceClaims``."""
    refs: dict[Key, list[dict[str, Any]]] = {}
    for pod in pods:
        ns = _meta(pod).get("namespace", "")
        for name in claim_names(pod, generated=False):
            refs.setdefault((ns, name), []).append(pod)
    return refs


def decide(
    claim: dict[str, Any],
    refs: Sequence[dict[str, Any]],
    live_uids: Container[Any],
    now: float,
    grace: float,
    seen_used: Container[Key] = (),
) -> Decision:
    """Adopt, reap or leave one claim: the only place the janitor decides (pure).

    ``refs``: the cached pods naming the claim; ``live_uids``: the UIDs of all cached pods;
    ``seen_used``: as for :func:`plan`. Several pods naming one claim: the first by name that is
    not being deleted becomes its owner (whatever order the pods come in).
    """
    meta = _meta(claim)
    if meta.get("deletionTimestamp"):
        return _NOTHING
    owners = _pod_owners(meta)
    if owners:
        # the owner is gone: the garbage collector's job, done now
        return _NOTHING if any(uid in live_uids for uid in owners) else _REAP
    users = [p for p in refs if _meta(p).get("uid")]
    if users:
        staying = [p for p in users if not _meta(p).get("deletionTimestamp")]
        if not staying:
            return _USED  # its pod is being deleted: no owner needed, it is reaped once the pod is gone
        pod = staying[0] if len(staying) == 1 else min(staying, key=key_of)
        due = _adoption_due(pod)
        if due is None or now >= due:
            return Decision(ADOPT, pod, used=True)
        return Decision("", due=due, used=True)
    created = parse_time(meta.get("creationTimestamp"))
    if created is None or now >= created + grace or key_of(claim) in seen_used:
        return _REAP
    return Decision("", due=created + grace)


def plan(
    claims: Iterable[dict[str, Any]],
    pods: Iterable[dict[str, Any]],
    now: float,
    grace: float,
    seen_used: Collection[Key] = (),
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
        out.add(claim, decide(claim, refs.get(key_of(claim), ()), live_uids, now, grace, seen_used), now)
    return out


def _adoption_due(pod: dict[str, Any]) -> float | None:
    """When (clock) the claim of ``pod`` should be adopted (None: now).

    While a new pod is being scheduled, the scheduler's DRA plugin writes the claim (finalizer, then
    allocation status, each guarded by its resourceVersion); an owner patch landing in between makes
    those writes conflict and retry. So adoption waits for the binding (``spec.nodeName``), or for
    :data:`ADOPT_PENDING_AFTER` seconds for a pod that stays pending (then no scheduling is in flight
    most of the time). Until adoption, the janitor itself keeps the claim from outliving its pod.
    """
    if (pod.get("spec") or {}).get("nodeName"):
        return None
    created = parse_time(_meta(pod).get("creationTimestamp"))
    return None if created is None else created + ADOPT_PENDING_AFTER


def _scheduling_since(pod: dict[str, Any]) -> float | None:
    """The creation time of a pod that may be being scheduled (not bound, not deleting), else None."""
    meta = _meta(pod)
    if (pod.get("spec") or {}).get("nodeName") or meta.get("deletionTimestamp"):
        return None
    return parse_time(meta.get("creationTimestamp"))


def scheduling(pods: Iterable[dict[str, Any]], now: float) -> bool:
    """Whether a dralab pod is (probably) being scheduled now: not bound, not deleting, younger than
    :data:`ADOPT_PENDING_AFTER` (an older one is pending for a reason a patch does not disturb)."""
    for pod in pods:
        created = _scheduling_since(pod)
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


class ClaimIndex:
    """The janitor thread's view of the cached pods and claims, indexed for one claim's decision.

    Fed one object at a time (:meth:`put_pod`, :meth:`put_claim`: the object now, None once deleted),
    each call adds the claims whose decision it may change to ``dirty``. Not thread-safe: only the
    janitor's thread uses it.
    """

    def __init__(self) -> None:
        self.pods: dict[Key, dict[str, Any]] = {}
        self.claims: dict[Key, dict[str, Any]] = {}
        self.uids: dict[Any, int] = {}  # UID -> cached pods with it (the live UIDs of :func:`decide`)
        self.unowned: set[Key] = set()  # claims the janitor_pending gauge counts (:func:`_unowned`)
        self._named: dict[Key, tuple[Key, ...]] = {}  # pod -> the claims it names
        self._users: dict[Key, dict[Key, None]] = {}  # claim -> the pods naming it
        self._owners: dict[Key, tuple[Any, ...]] = {}  # claim -> its Pod owners' UIDs
        self._owned: dict[Any, set[Key]] = {}  # pod UID -> the claims it owns
        self._young: dict[Key, float] = {}  # pods that may be being scheduled -> creation time
        self._young_heap: list[tuple[float, Key]] = []  # (-creation time, pod): the youngest first, lazily pruned

    @classmethod
    def build(cls, pods: Iterable[dict[str, Any]], claims: Iterable[dict[str, Any]], dirty: set[Key]) -> ClaimIndex:
        index = cls()
        for pod in pods:
            index.put_pod(key_of(pod), pod, dirty)
        for claim in claims:
            index.put_claim(key_of(claim), claim, dirty)
        return index

    def refs(self, claim: Key) -> list[dict[str, Any]]:
        """The cached pods naming ``claim`` (for :func:`decide`)."""
        return [self.pods[p] for p in self._users.get(claim, ())]

    def put_pod(self, key: Key, pod: dict[str, Any] | None, dirty: set[Key]) -> None:
        old = self.pods.pop(key, None)
        if old is not None:
            for claim in self._named.pop(key, ()):
                users = self._users[claim]
                del users[key]
                if not users:
                    del self._users[claim]
                dirty.add(claim)
            uid = _meta(old).get("uid")
            left = self.uids[uid] - 1
            if left:
                self.uids[uid] = left
            else:
                del self.uids[uid]
            dirty.update(self._owned.get(uid, ()))
            self._young.pop(key, None)
        if pod is None:
            return
        self.pods[key] = pod
        names = claim_names(pod, generated=False)
        if names:
            named = tuple(dict.fromkeys((key[0], name) for name in names))  # as claim_refs([pod]) has them
            self._named[key] = named
            for claim in named:
                self._users.setdefault(claim, {})[key] = None
            dirty.update(named)
        uid = _meta(pod).get("uid")
        self.uids[uid] = self.uids.get(uid, 0) + 1
        dirty.update(self._owned.get(uid, ()))
        since = _scheduling_since(pod)
        if since is not None:
            self._young[key] = since
            heapq.heappush(self._young_heap, (-since, key))
            if len(self._young_heap) > 2 * len(self._young) + 1024:  # stale entries: rebuild
                self._young_heap = [(-t, k) for k, t in self._young.items()]
                heapq.heapify(self._young_heap)

    def put_claim(self, key: Key, claim: dict[str, Any] | None, dirty: set[Key]) -> None:
        dirty.add(key)
        if self.claims.pop(key, None) is not None:
            for uid in self._owners.pop(key, ()):
                owned = self._owned[uid]
                owned.discard(key)
                if not owned:
                    del self._owned[uid]
            self.unowned.discard(key)
        if claim is None:
            return
        self.claims[key] = claim
        meta = _meta(claim)
        if meta.get("ownerReferences"):
            owners = tuple(_pod_owners(meta))
            if owners:
                self._owners[key] = owners
                for uid in owners:
                    self._owned.setdefault(uid, set()).add(key)
        elif not meta.get("deletionTimestamp"):  # _unowned(claim)
            self.unowned.add(key)

    def scheduling(self, now: float) -> bool:
        """:func:`scheduling` over the cached pods, from the youngest candidate alone."""
        heap = self._young_heap
        while heap:
            neg, key = heap[0]
            if self._young.get(key) == -neg:
                return now + neg < ADOPT_PENDING_AFTER
            heapq.heappop(heap)
        return False


class Janitor(PodClaimLoop):
    """Runs the watches and applies :func:`decide` to the claims an event or a deadline concerns
    (every claim in a full pass: see the module's docstring)."""

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
        self._seen_used: dict[Key, float] = {}
        self._seen_lock = threading.Lock()
        self._last_added: float | None = None  # when the latest new dralab pod or claim was seen (clock)
        # Shared with the watch threads: the events not yet applied to the index, in order (True: a pod's).
        self._events: list[tuple[bool, str, dict[str, Any]]] = []
        self._events_lock = threading.Lock()
        # The janitor thread's alone from here on.
        self._index = ClaimIndex()
        self._dirty: set[Key] = set()  # claims to decide again at the next pass
        self._lists_seen: tuple[int, int] | None = None  # the informers' list counts at the last full pass
        self._last_full = float("-inf")  # when (clock) the last full pass ran
        self._due: dict[Key, float] = {}  # claim -> when its decision changes with no event ...
        self._due_heap: list[tuple[float, Key]] = []  # ... as a heap (stale entries skipped)
        self._adopting: dict[Key, tuple[dict[str, Any], dict[str, Any]]] = {}  # decided: claim, pod
        self._ready_since: dict[Key, float] = {}  # the same claims -> adoptable since (clock), oldest first
        self._reaping: dict[Key, dict[str, Any]] = {}  # decided: delete, until the claim changes or goes
        self._seen_expiry: list[tuple[float, Key]] = []  # remembered claims not cached: when to forget
        self._seen_expiring: set[Key] = set()  # ... the claims in that heap
        self.last_evaluated = 0  # claims the latest pass decided (instrumentation)
        self.last_full = False  # whether the latest pass was a full one
        self.pods = Informer(api, pods_path(), POD_SELECTOR, self._kick.set, "pods", relevant=self._pod_event)
        self.claims = Informer(api, CLAIMS_PATH, CLAIM_SELECTOR, self._kick.set,
                               "claims", relevant=self._claim_event, metadata_only=True)

    def claim_needs_pass(self, kind: str, claim: dict[str, Any]) -> bool:
        """Whether a claim's watch event calls for a pass now (the webhook's own new claims mostly do not).

        Only an unowned claim whose pod is already cached can be adopted now; any other new claim has
        nothing to do until its grace period ends, so it only moves the next pass earlier when its
        deadline comes before the loop's current wake-up. Deleted claims and owned ones (our own
        adoption patches) need nothing: their pods' events drive reaping. Every event is recorded for
        the next pass whatever this answers.
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

    def _claim_event(self, kind: str, claim: dict[str, Any]) -> bool:
        """The claim informer's callback (a watch thread): record the event, then :meth:`claim_needs_pass`."""
        with self._events_lock:
            self._events.append((False, kind, claim))
        return self.claim_needs_pass(kind, claim)

    def _pod_event(self, kind: str, pod: dict[str, Any]) -> bool:
        """The pod informer's callback (a watch thread): every pod event calls for a pass; a new pod
        also marks admissions as under way.

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
        with self._events_lock:
            self._events.append((True, kind, pod))
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
                self._lists_seen = None  # the next pass is a full one
                timeout = 2.0
            # A burst of events (many pods admitted at once) becomes one pass, not one per event.
            self._wake_at = self.clock() + max(timeout, self.min_interval)
            self._stop.wait(self.min_interval)
            self._kick.wait(max(0.0, timeout - self.min_interval))

    def reconcile_once(self, full: bool = False) -> float:
        """One pass (``full``, or when one is due: a full one); returns how long to wait before the
        next unprompted pass."""
        now = self.clock()
        lists = (self.pods.lists, self.claims.lists)  # read before the caches: a relist after it shows next pass
        full = full or lists != self._lists_seen or now - self._last_full >= self.resync
        if full:
            self._rebuild(lists, now)
        else:
            self._apply_events()
        self._take_due(now)
        keys, self._dirty = self._dirty, set()
        with self._seen_lock:
            seen = {k for k in keys if k in self._seen_used}
        used = self._decide(keys, now, seen)
        if full:  # drop what no claim is adoptable for any more (the claims of the others are gone)
            for key in [k for k in self._ready_since if k not in self._adopting]:
                del self._ready_since[key]
        self._remember_used(used, None if full else keys, now)
        self.last_evaluated, self.last_full = len(keys), full
        self.metrics.janitor_pending.set(len(self._index.unowned))
        next_check = self._next_due(now)
        hold = 0.0
        if self._adopting:
            oldest = next(iter(self._ready_since.values()))
            hold = adoption_delay(now, self._last_added, oldest, self._index.scheduling(now))
        if hold > 0:
            next_check = hold if next_check is None else min(next_check, hold)
        else:
            for claim, pod in list(self._adopting.values()):
                self._adopt(claim, pod)
        if self._reaping:
            self._reap(list(self._reaping.values()))
        wait = self.resync if next_check is None else min(self.resync, next_check + 0.05)
        wait = min(wait, self._last_full + self.resync - now)  # the next full pass
        return max(wait, 0.05)

    def _rebuild(self, lists: tuple[int, int], now: float) -> None:
        """Start a full pass: the index afresh from the caches, every claim dirty, no decision kept."""
        with self._events_lock:  # the events recorded so far are in the caches already
            pods, claims = self.pods.snapshot(), self.claims.snapshot()
            self._events = []
        self._index = ClaimIndex.build(pods, claims, self._dirty)
        self._lists_seen, self._last_full = lists, now
        self._due.clear()
        self._due_heap.clear()
        self._adopting.clear()
        self._reaping.clear()

    def _apply_events(self) -> None:
        """Start an incremental pass: the events recorded since the last pass, into the index."""
        with self._events_lock:
            events, self._events = self._events, []
        index, dirty = self._index, self._dirty
        for is_pod, kind, obj in events:
            current = None if kind == "DELETED" else obj
            if not is_pod:
                index.put_claim(key_of(obj), current, dirty)
                continue
            index.put_pod(key_of(obj), current, dirty)
            if current is None and _meta(obj).get("uid"):
                # a pod deleted before it was indexed still marked its claims used (_pod_event)
                dirty.update(claim_refs([obj]))

    def _take_due(self, now: float) -> None:
        """The claims whose deadline has come: dirty."""
        heap = self._due_heap
        while heap and heap[0][0] <= now:
            due, key = heapq.heappop(heap)
            if self._due.get(key) == due:
                del self._due[key]
                self._dirty.add(key)

    def _next_due(self, now: float) -> float | None:
        """Seconds until the earliest deadline, if any."""
        heap = self._due_heap
        while heap and self._due.get(heap[0][1]) != heap[0][0]:
            heapq.heappop(heap)
        return heap[0][0] - now if heap else None

    def _decide(self, keys: Iterable[Key], now: float, seen: Container[Key]) -> set[Key]:
        """:func:`decide` for ``keys``; keeps what it decides; returns the claims a pod uses."""
        index, used = self._index, set()
        for key in keys:
            claim = index.claims.get(key)
            d = _NOTHING if claim is None else decide(claim, index.refs(key), index.uids, now, self.grace, seen)
            if d.used:
                used.add(key)
            if claim is not None and d.action == ADOPT and d.pod is not None:
                self._adopting[key] = (claim, d.pod)
                self._ready_since.setdefault(key, now)
            elif self._adopting.pop(key, None) is not None:
                self._ready_since.pop(key, None)
            if claim is not None and d.action == REAP:
                self._reaping[key] = claim
            else:
                self._reaping.pop(key, None)
            if d.due is None:
                self._due.pop(key, None)
            elif self._due.get(key) != d.due:
                self._due[key] = d.due
                heapq.heappush(self._due_heap, (d.due, key))
        if len(self._due_heap) > 2 * len(self._due) + 1024:  # stale entries: rebuild
            self._due_heap = [(t, k) for k, t in self._due.items()]
            heapq.heapify(self._due_heap)
        return used

    def _remember_used(self, used: set[Key], checked: Iterable[Key] | None, now: float) -> None:
        """Add what this pass saw used; drop adopted claims (their owner reference decides now) and
        claims not cached for a grace period since first seen (deleted, or never dralab's).

        ``checked``: the claims that may have changed (those decided, with the remembered claims whose
        time is up); None: every remembered claim (a full pass).
        """
        claims = self._index.claims
        with self._seen_lock:
            for key in used:
                self._seen_used.setdefault(key, now)
            if checked is None:
                self._seen_expiry.clear()
                self._seen_expiring.clear()
                todo: Iterable[Key] = list(self._seen_used)
            else:
                todo = set(checked)
                while self._seen_expiry and self._seen_expiry[0][0] <= now:
                    key = heapq.heappop(self._seen_expiry)[1]
                    self._seen_expiring.discard(key)
                    todo.add(key)
            for key in todo:
                since = self._seen_used.get(key)
                if since is None:
                    continue
                claim = claims.get(key)
                if claim is not None:
                    if _pod_owners(_meta(claim)):
                        del self._seen_used[key]
                elif now - since > self.grace:
                    del self._seen_used[key]
                elif key not in self._seen_expiring:
                    self._seen_expiring.add(key)
                    heapq.heappush(self._seen_expiry, (since + self.grace, key))

    def _adopt(self, claim: dict[str, Any], pod: dict[str, Any]) -> None:
        ns, name = key_of(claim)
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
            by_ns.setdefault(key_of(claim)[0], []).append(claim)
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
                if (owners and any(u in uids for u in owners)) or (not owners and refs.get(key_of(claim))):
                    continue
                try:
                    self.api.delete(claims_path(ns, meta.get("name", "")), uid=meta.get("uid"))
                    self.metrics.janitor_reaped.inc()
                    log.info("orphaned claim deleted", extra={"fields": {"namespace": ns, "claim": meta.get("name")}})
                except KubeError as exc:
                    if exc.status not in (404, 409):
                        log.warning("could not delete claim", extra={"fields": {"claim": meta.get("name"),
                                                                              "error": str(exc)}})
