"""ShareBudgets at admission (the gate) and in the background (status, metrics, overshoot flag).

Concurrency: the gate holds one lock per namespace from the budget check until the pod's claims
exist, so one process's admissions of a namespace queue up locally; server workers (``--workers``)
and replicas are other processes, so the gate also holds, over the same span, an apiserver-held
lock on each ShareBudget the pod touches (:mod:`dralab.webhook.controllers.budget_lock`: an annotation written
with the budget's resourceVersion as precondition). Inside both it reads the namespace's claims
fresh (a quorum LIST, not a cache): whoever held the lock before has created its claims, so the
next check sees them and the budget is not overshot, whichever worker or replica admits the pod.
Claims made past the webhook (by hand, native DRA) can still take a namespace over its budget; the
reconciler flags any overshoot (the ``Overshoot`` condition in the budget's status and
``dralab_budget_overshoot``) instead of hiding it.

Namespaces without a budget for the pod's device classes take no lock and make no LIST per pod:
which namespaces have budgets is cached for :data:`BUDGET_CACHE_SECONDS` (a budget created just now
applies to pods admitted after that); where a budget applies, the lock is taken and the budgets and
claims are read fresh inside it, as above. The cache is refilled from the apiserver's watch cache
(``resourceVersion=0``), not with a quorum LIST: a quorum LIST is served from the watch cache only once
that cache has caught up with etcd's current revision, and for a kind that rarely changes (ShareBudgets)
that wait is for etcd's next progress notification, 46-82 ms measured under claim-create load, with
every admission of the namespace in that worker waiting on it every 2 s. The answer is cached for 2 s
anyway, so a watch cache a few milliseconds behind adds nothing to what the cache already allows.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Callable, Collection
from typing import Any
from urllib.parse import quote

import anyio
from prometheus_client import CollectorRegistry, Counter, Gauge

from dralab.errors import UserError
from dralab.kube import AsyncKube, Kube, KubeError
from dralab.kube.aio import call_api
from dralab.kube.paths import CLAIMS_PATH, claims_path
from dralab.model import budget as model
from dralab.model.denials import Denied
from dralab.util import get_logger
from dralab.webhook.controllers.budget_lock import BudgetLock

log = get_logger("dralab.webhook.controllers.budgets")

GROUP_PATH = f"/apis/{model.API_VERSION}"
CRD_RECHECK_SECONDS = 5.0
BUDGET_CACHE_SECONDS = 2.0


def budgets_path(namespace: str | None = None, name: str | None = None) -> str:
    if namespace is None:
        return f"{GROUP_PATH}/{model.PLURAL}"
    base = f"{GROUP_PATH}/namespaces/{quote(namespace)}/{model.PLURAL}"
    return f"{base}/{quote(name)}" if name else base


class BudgetMetrics:
    """Budget limits, use, overshoot and denials, on the webhook's registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        labels = ["namespace", "budget", "device_class", "resource"]
        self.limit = Gauge("dralab_budget_limit", "ShareBudget limit (bytes or cores)", labels, registry=registry)
        self.used = Gauge("dralab_budget_used", "What the namespace's claims request", labels, registry=registry)
        self.overshoot = Gauge(
            "dralab_budget_overshoot", "Use past the budget (0 when within it)", labels, registry=registry
        )
        self.denials = Counter(
            "dralab_budget_denials_total", "Pods denied for a ShareBudget", ["namespace", "device_class"],
            registry=registry,
        )
        self._seen: set[tuple[str, ...]] = set()

    def publish(self, budget: model.Budget, used: model.Demand) -> tuple[str, ...]:
        over = model.overshoot(budget, used)
        base = (budget.namespace, budget.name, budget.device_class)
        for resource, limit, value, extra in (
            (model.MEMORY, budget.memory, used.amount.memory, over.memory),
            (model.CORES, budget.cores, used.amount.cores, over.cores),
        ):
            key = (*base, resource)
            if limit is not None:
                self.limit.labels(*key).set(limit)
            self.used.labels(*key).set(value)
            self.overshoot.labels(*key).set(extra)
            self._seen.add(key)
        return base

    def forget_except(self, keep: set[tuple[str, ...]]) -> None:
        """Drop the series of budgets that no longer exist."""
        for key in list(self._seen):
            if key[:3] in keep:
                continue
            for gauge in (self.limit, self.used, self.overshoot):
                with contextlib.suppress(KeyError):
                    gauge.remove(*key)
            self._seen.discard(key)


class BudgetGate:
    """Admission: deny a pod whose claims would take its namespace past a ShareBudget."""

    def __init__(
        self, api: Kube | AsyncKube, metrics: BudgetMetrics, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.api = api
        self.metrics = metrics
        self.clock = clock
        self._locks: dict[str, anyio.Lock] = {}
        self.shared = BudgetLock(api)  # across workers and replicas (budget_lock.py)
        self._absent_until = 0.0  # the CRD is not installed: no budgets until then
        self._classes: dict[str, tuple[frozenset[str], float]] = {}  # namespace -> (budgeted classes, until)
        self._refreshing: dict[str, asyncio.Future[frozenset[str]]] = {}

    async def _get(self, path: str, cached: bool = False) -> dict[str, Any]:
        """GET an object or a list (a GET of a collection path is a quorum LIST; ``cached``: a LIST from the
        apiserver's watch cache, see the module docstring)."""
        return await call_api(self.api.get, path, params={"resourceVersion": "0"} if cached else None)

    async def budgets(self, namespace: str, cached: bool = False) -> list[model.Budget]:
        """The namespace's ShareBudgets (none while the CRD is not installed)."""
        return [b for b, _ in await self._budget_objects(namespace, cached)]

    async def _budget_objects(self, namespace: str, cached: bool = False) -> list[tuple[model.Budget, dict[str, Any]]]:
        """The namespace's ShareBudgets, parsed and as read (the lock needs their resourceVersion);
        ``cached``: from the apiserver's watch cache, for the which-namespaces-have-budgets cache only."""
        if self.clock() < self._absent_until:
            return []
        try:
            listed = await self._get(budgets_path(namespace), cached=cached)
        except KubeError as exc:
            if exc.status == 404:
                self._absent_until = self.clock() + CRD_RECHECK_SECONDS
                return []
            raise
        out = []
        for obj in listed.get("items") or []:
            try:
                out.append((model.parse_budget(obj), obj))
            except UserError as exc:  # the CRD's schema makes this rare; never let it block admission
                log.warning("ignoring an invalid ShareBudget", extra={"fields": {"error": str(exc)}})
        return out

    async def _budgeted(self, namespace: str, demand: Collection[str]) -> bool:
        """Whether a budget of ``namespace`` may cover a class of ``demand`` (cached; see the module docstring)."""
        classes, until = self._classes.get(namespace, (frozenset(), 0.0))
        if self.clock() >= until:
            # One LIST per namespace at a time: admissions arriving meanwhile wait for its answer.
            pending = self._refreshing.get(namespace)
            if pending is None:
                pending = asyncio.ensure_future(self._refresh(namespace))
                self._refreshing[namespace] = pending
                pending.add_done_callback(lambda _: self._refreshing.pop(namespace, None))
            classes = await asyncio.shield(pending)
        return any(c in classes for c in demand)

    async def _refresh(self, namespace: str) -> frozenset[str]:
        classes = frozenset(b.device_class for b in await self.budgets(namespace, cached=True))
        self._classes[namespace] = (classes, self.clock() + BUDGET_CACHE_SECONDS)
        if len(self._classes) > 10_000:  # forged namespace names cannot grow it without bound
            now = self.clock()
            self._classes = {k: v for k, v in self._classes.items() if v[1] > now}
        return classes

    async def refuse_unenforceable(self, namespace: str, templates: list[dict[str, Any]], kind: str = "pod") -> None:
        """Deny (fail closed) a ``kind`` whose ResourceClaimTemplates a ShareBudget of ``namespace`` covers.

        With templates, kube-controller-manager makes the claims after admission, so nothing can hold
        them to the budget from the check until they exist (what :meth:`admit` does for the claims the
        webhook makes): admitting would let the namespace past its budget unchecked.
        """
        classes = {c for t in templates for c in model.claim_classes({"spec": (t.get("spec") or {}).get("spec")})}
        if not classes or not await self._budgeted(namespace, classes):
            return
        covered = sorted(classes & self._classes[namespace][0])
        for device_class in covered:
            self.metrics.denials.labels(namespace, device_class).inc()
        raise Denied(
            f"ShareBudget of namespace {namespace} for {', '.join(covered)}",
            f"this {kind}'s claims would come from ResourceClaimTemplates, which kube-controller-manager turns "
            "into claims after admission, so dralab cannot hold them to the budget; set webhook.lifecycle: claim "
            "for Pods (Volcano Jobs always use templates) to admit it within the budget, or delete the budget",
        )

    @contextlib.asynccontextmanager
    async def admit(self, namespace: str, claims: list[dict[str, Any]]) -> AsyncIterator[None]:
        """Check ``claims`` against the namespace's budgets; hold the namespace until the body created them."""
        # Most namespaces have no budget: ask with the claims' classes first, add up the demand only when needed.
        classes = {c for claim in claims for c in model.claim_classes(claim)}
        if not classes or not await self._budgeted(namespace, classes):
            yield
            return
        demand: dict[str, model.Demand] = {}
        for claim in claims:
            for device_class, d in model.claim_demand(claim).items():
                demand[device_class] = demand.get(device_class, model.Demand()) + d
        lock = await self._hold(namespace)
        held: list[tuple[str, str]] = []  # (budget path, token) of the apiserver-held locks
        try:
            every = await self._budget_objects(namespace)
            # the cache keeps every budgeted class of the namespace, not only those this pod asks for
            budgeted = frozenset(b.device_class for b, _ in every)
            self._classes[namespace] = (budgeted, self.clock() + BUDGET_CACHE_SECONDS)
            found = [(b, o) for b, o in every if b.device_class in demand]
            budgets = [b for b, _ in found]
            if budgets:
                for b, obj in sorted(found, key=lambda pair: pair[0].name):  # one order: no deadlock
                    path = budgets_path(b.namespace, b.name)
                    held.append((path, await self.shared.acquire(path, obj)))
                existing = (await self._get(claims_path(namespace))).get("items") or []
                for b in budgets:
                    used = model.namespace_use(existing, b.device_class)
                    why = model.refusal(b, used, demand[b.device_class])
                    if why is not None:
                        self.metrics.denials.labels(namespace, b.device_class).inc()
                        raise Denied(f"ShareBudget {b.ref}", why)
            yield
        finally:
            with anyio.CancelScope(shield=True):  # a deadline must not leave the budgets locked
                for path, token in reversed(held):
                    await self.shared.release(path, token)
            if not lock.statistics().tasks_waiting:
                del self._locks[namespace]  # a lock per namespace being admitted, not per namespace ever seen
            lock.release()

    async def _hold(self, namespace: str) -> anyio.Lock:
        """Acquire the namespace's current lock (one dropped while we waited is not current: retry)."""
        while True:
            lock = self._locks.setdefault(namespace, anyio.Lock())
            await lock.acquire()
            if self._locks.get(namespace) is lock:
                return lock
            lock.release()


class BudgetReconciler:
    """Keeps every ShareBudget's status and the budget metrics equal to what the claims request.

    Watches claims and budgets (the janitor's informer); each change leads to one pass that
    recomputes use per budget and writes the status where it changed. Overshoot is flagged, never
    corrected: deleting a team's pods is the team's call.
    """

    def __init__(self, api: Kube, metrics: BudgetMetrics, min_interval: float = 0.2) -> None:
        from dralab.kube.informer import Informer

        self.api = api
        self.metrics = metrics
        self.min_interval = min_interval
        self._kick = threading.Event()
        self._stop = threading.Event()
        # A claim event matters only in a namespace with a budget: the webhook's own claims elsewhere cost nothing.
        self.claims = Informer(api, CLAIMS_PATH, "", self._kick.set, "budget-claims",
                               relevant=self._has_budget)
        self.budgets = Informer(api, budgets_path(), "", self._kick.set, "budgets")
        self._thread = threading.Thread(target=self._loop, name="budgets", daemon=True)
        self._written: dict[tuple[str, str], dict[str, Any]] = {}
        self._watching = False
        self._claims_watched = False

    def _has_budget(self, kind: str, claim: dict[str, Any]) -> bool:
        namespace = (claim.get("metadata") or {}).get("namespace", "")
        return any(key[0] == namespace for key in list(self.budgets.items))

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._kick.set()
        if self._watching:
            if self._claims_watched:
                self.claims.stop()
            self.budgets.stop()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _crd_installed(self) -> bool:
        try:
            self.api.get(GROUP_PATH)
            return True
        except KubeError:
            return False

    def _loop(self) -> None:
        while not self._stop.is_set() and not self._crd_installed():
            self._stop.wait(CRD_RECHECK_SECONDS)
        if self._stop.is_set():
            return
        self._watching = True
        self.budgets.start()
        while not self._stop.is_set():
            self._kick.wait(30.0)
            self._kick.clear()
            if not self.budgets.synced.is_set():
                continue
            # Every claim in the cluster is watched only once some ShareBudget exists: without budgets
            # there is nothing to count, and decoding each claim the webhook creates would be wasted.
            if self.budgets.items and not self._claims_watched:
                self._claims_watched = True
                self.claims.start()
            if self._claims_watched and not self.claims.synced.is_set():
                continue
            try:
                self.reconcile_once()
            except Exception:
                log.exception("budget pass failed")
            self._stop.wait(self.min_interval)  # a burst of events becomes one pass

    def reconcile_once(self) -> int:
        """One pass over the cached state; returns how many statuses were written."""
        by_ns: dict[str, list[dict[str, Any]]] = {}
        for claim in self.claims.snapshot():
            by_ns.setdefault((claim.get("metadata") or {}).get("namespace", ""), []).append(claim)
        keep: set[tuple[str, ...]] = set()
        written = 0
        for obj in self.budgets.snapshot():
            try:
                b = model.parse_budget(obj)
            except UserError:
                continue
            used = model.namespace_use(by_ns.get(b.namespace, []), b.device_class)
            keep.add(self.metrics.publish(b, used))
            status = model.status_of(b, used)
            status["observedGeneration"] = (obj.get("metadata") or {}).get("generation", 0)
            key = (b.namespace, b.name)
            if self._written.get(key) == status and obj.get("status", {}).get("used") == status["used"]:
                continue
            try:
                self.api.patch(budgets_path(b.namespace, b.name) + "/status", {"status": status})
                self._written[key] = status
                written += 1
            except KubeError as exc:
                if exc.status != 404:
                    log.warning("could not write budget status", extra={"fields": {"budget": b.ref, "error": str(exc)}})
        self.metrics.forget_except(keep)
        return written
