"""What the webhook creates and deletes for a converted pod, in either lifecycle mode.

``claim``: each planned ResourceClaim is created at admission (never on dry runs). A name held by
another pod's claim gets a hashed variant; if any create fails, the claims this request already
created are deleted before the pod is denied, so a failed admission leaves nothing behind.
``template``: the shared, content-named ResourceClaimTemplates are created if missing; the
resourceclaim controller then makes pod-owned claims from them. A template is created once per
process, whatever the number of admissions: those arriving while its first create is in flight wait
for that one call (at 500 nodes, 4,000 pods created at once each sent their own create, 420 of them,
each answered 409 by an overloaded apiserver). Once a template is known to exist, it is re-created
(409 if it is still there) every :data:`TEMPLATE_CACHE_SECONDS` in the background, and no admission
waits on that check: when every admission of the process waited on it, each re-check held up
admission for the length of one create on an overloaded apiserver (2.8 s on average in a 500-node
fill; README "Scale", item 18). A template deleted by hand is made again by the first admission
after the re-check is due; the claims of pods admitted before it exists wait, as
kube-controller-manager retries them. The namespace's creation
rate is charged for the templates created the first time, not for pods that create nothing nor for
the re-checks (at most one per template, process and period).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from typing import Any

import anyio

from dralab.kube import AsyncKube, Kube, KubeError
from dralab.kube.aio import call_api
from dralab.kube.paths import claims_path, templates_path
from dralab.model import naming
from dralab.model.convert import (
    ANN_ADMISSION_UID,
    Conversion,
    Converter,
)
from dralab.util import get_logger
from dralab.webhook.controllers.budgets import BudgetGate
from dralab.webhook.limits import NamespaceRate
from dralab.webhook.metrics import Metrics

MAX_ATTEMPTS = 4
TEMPLATE_CACHE_SECONDS = 60.0
# kube-controller-manager's resourceclaim controller remembers the claims it just made in a cache that held
# 100 entries before 1.37 (kubernetes/kubernetes#140217, fixed by #140227): under load it can make a second
# claim for a pod, and that pod never runs. Checked in v1.35.4 and v1.36.3 (100, no GET) and v1.37.2 (fixed).
FIRST_SAFE_TEMPLATE_MINOR = 37

log = get_logger("dralab.webhook.lifecycle")


def template_lifecycle_warning(lifecycle: str, version: str | None) -> str | None:
    """What to tell the operator who runs the template lifecycle on a Kubernetes whose controller can make
    two claims for one pod (README "Scale", item 11); None when there is nothing to say. Pure: ``version``
    is the apiserver's (:func:`dralab.versions.server_version`), None when it could not be read."""
    if lifecycle != "template" or version is None:
        return None
    minor = int(version.split(".")[1])
    if minor >= FIRST_SAFE_TEMPLATE_MINOR:
        return None
    return (f"webhook.lifecycle is template on Kubernetes {version}: its kube-controller-manager can make a "
            "second claim for a pod when many pods are created at once (kubernetes/kubernetes#140217, fixed in "
            f"1.{FIRST_SAFE_TEMPLATE_MINOR}), and that pod stays Pending; use webhook.lifecycle: claim on this "
            f"version, or Kubernetes 1.{FIRST_SAFE_TEMPLATE_MINOR} or newer")


class LifecycleError(Exception):
    """Creating a pod's objects failed; the message says which object and why."""

    code = 500


class RateLimited(LifecycleError):
    """The namespace used up its claim creation rate (HTTP 429 in the review: retry later)."""

    code = 429


class DeadlinePassed(LifecycleError):
    """The admission's deadline passed before every object existed; what was made is rolled back."""

    code = 504


class ClaimLifecycle:
    """Creates (or, for deleted pods, removes) the objects behind a conversion."""

    def __init__(
        self,
        converter: Converter,
        api: Kube | AsyncKube | None,
        metrics: Metrics,
        clock: Callable[[], float] = time.monotonic,
        budgets: BudgetGate | None = None,
        rate: NamespaceRate | None = None,
    ) -> None:
        self.converter = converter
        self.api = api
        self.metrics = metrics
        self.clock = clock
        self.budgets = budgets  # ShareBudgets, checked over the claims this webhook creates
        self.rate = rate  # per-namespace claim creation rate (forged reviews cannot flood a namespace)
        self._convert_threads: anyio.CapacityLimiter | None = None
        self._templates: dict[tuple[str, str], float] = {}  # (namespace, template) -> known to exist until
        self._template_creates: dict[tuple[str, str], asyncio.Future[None]] = {}  # creates in flight

    async def admit(
        self,
        pod: dict[str, Any],
        namespace: str,
        uid: str | None,
        *,
        dry_run: bool = False,
        create: bool = True,
        deadline: float | None = None,
        offload: bool = False,
    ) -> Conversion:
        """Convert ``pod`` and, unless ``dry_run`` or not ``create``, make its objects exist.

        ``deadline`` (on ``clock``): no object is created after it; ``offload``: convert in a worker thread.
        """
        conv = await self._convert(pod, namespace, uid, offload)
        if not conv.changed or dry_run or not create or self.api is None:
            return conv
        if self.converter.lifecycle == "template":
            if self.budgets is not None:  # a budgeted namespace is refused: templates' claims escape the gate
                await self.budgets.refuse_unenforceable(namespace, conv.objects)
            await self._ensure_templates(conv)
            return conv
        self._charge(namespace, len(conv.objects))
        if self.budgets is not None:
            async with self.budgets.admit(namespace, conv.objects):  # held until the claims exist
                return await self._create_claims(pod, namespace, uid or "", conv, deadline)
        return await self._create_claims(pod, namespace, uid or "", conv, deadline)

    def _charge(self, namespace: str, objects: int) -> None:
        """Take ``objects`` from the namespace's creation rate, or refuse the pod (429: retry later)."""
        if self.rate is not None and not self.rate.take(namespace, objects):
            self.metrics.refused.labels("rate_limited").inc()
            raise RateLimited(
                f"namespace {namespace} created more ResourceClaims or ResourceClaimTemplates through dralab than "
                f"its rate allows (webhook.claimCreateRatePerSecond {self.rate.rate:g}, claimCreateBurst "
                f"{self.rate.burst:g}); retry the pod later"
            )

    async def _convert(self, pod: dict[str, Any], namespace: str, uid: str | None, offload: bool) -> Conversion:
        if not offload:
            return self.converter.convert(pod, namespace=namespace, request_uid=uid)
        if self._convert_threads is None:
            self._convert_threads = anyio.CapacityLimiter(4)

        def run() -> Conversion:
            return self.converter.convert(pod, namespace=namespace, request_uid=uid)

        return await anyio.to_thread.run_sync(run, limiter=self._convert_threads)

    async def _create_claims(
        self, pod: dict[str, Any], namespace: str, uid: str, conv: Conversion, deadline: float | None = None
    ) -> Conversion:
        assert self.api is not None
        created: dict[str, str] = {}  # name -> uid
        renames: dict[str, str] = {}
        for attempt in range(MAX_ATTEMPTS):
            restart = False
            for plan, claim in zip(conv.plans, conv.objects, strict=True):
                name = claim["metadata"]["name"]
                if name in created:
                    continue
                if deadline is not None and self.clock() >= deadline:
                    await self._rollback(namespace, created)
                    self.metrics.refused.labels("deadline").inc()
                    raise DeadlinePassed(
                        f"the admission deadline passed before ResourceClaim {namespace}/{name} was created; "
                        "nothing was left behind, retry the pod"
                    )
                try:
                    made = await call_api(self.api.create, claims_path(namespace), claim)
                except KubeError as exc:
                    if exc.status != 409:
                        await self._rollback(namespace, created)
                        raise LifecycleError(
                            f"could not create ResourceClaim {namespace}/{name}: {exc.message}; "
                            "nothing was left behind, retry the pod"
                        ) from None
                    holder = await self._holder(namespace, name)
                    if holder is not None and (holder.get("metadata", {}).get("annotations") or {}).get(
                        ANN_ADMISSION_UID
                    ) == uid:
                        created[name] = holder["metadata"].get("uid", "")
                        continue
                    if holder is not None:
                        self.metrics.collisions.inc()
                        renames[plan.base] = naming.collision_variant(plan.base, f"{uid}:{attempt}")
                        log.info(
                            "claim name taken by another pod's claim; using a variant",
                            extra={"fields": {"namespace": namespace, "name": name, "variant": renames[plan.base]}},
                        )
                    restart = True
                    break
                created[name] = made.get("metadata", {}).get("uid", "")
                self.metrics.claims_created.inc()
            if not restart:
                return conv
            conv = self.converter.convert(pod, namespace=namespace, request_uid=uid, renames=renames)
        await self._rollback(namespace, created)
        raise LifecycleError(
            f"could not find a free ResourceClaim name in {namespace} after {MAX_ATTEMPTS} attempts; retry the pod"
        )

    async def _holder(self, namespace: str, name: str) -> dict[str, Any] | None:
        assert self.api is not None
        try:
            return await call_api(self.api.get, claims_path(namespace, name))
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise LifecycleError(f"could not read ResourceClaim {namespace}/{name}: {exc.message}") from None

    async def _rollback(self, namespace: str, created: dict[str, str]) -> None:
        assert self.api is not None
        for name, claim_uid in created.items():
            try:
                delete = functools.partial(self.api.delete, uid=claim_uid or None)  # only the claim we made
                await call_api(delete, claims_path(namespace, name))
                self.metrics.claims_rolled_back.inc()
            except KubeError as exc:
                if exc.status != 404:
                    log.warning(
                        "rollback could not delete a claim; the janitor will reap it",
                        extra={"fields": {"namespace": namespace, "name": name, "error": str(exc)}},
                    )

    async def _ensure_templates(self, conv: Conversion) -> None:
        for template in conv.objects:
            key = (conv.namespace, template["metadata"]["name"])
            known_until = self._templates.get(key)
            if known_until is not None and known_until > self.clock():
                continue
            pending = self._template_creates.get(key)
            if pending is None:
                if known_until is None:  # a first create is charged; a re-check of a known one is not
                    self._charge(conv.namespace, 1)
                pending = asyncio.ensure_future(self._create_template(key, template))
                self._template_creates[key] = pending
                pending.add_done_callback(functools.partial(self._created, key))
            if known_until is not None:
                continue  # it existed: re-checked in the background, nobody waits (module docstring)
            # shielded: an admission cut off by its deadline leaves the create to finish for the others
            await asyncio.shield(pending)

    def _created(self, key: tuple[str, str], done: asyncio.Future[None]) -> None:
        self._template_creates.pop(key, None)
        if done.cancelled():
            return
        # read here too: when every waiter was cut off, or nobody waited (a re-check), its failure is not unread
        error = done.exception()
        if error is not None and key in self._templates:
            log.warning("re-checking a ResourceClaimTemplate failed; the next admission tries again",
                        extra={"fields": {"namespace": key[0], "name": key[1], "error": str(error)}})

    async def _create_template(self, key: tuple[str, str], template: dict[str, Any]) -> None:
        assert self.api is not None
        try:
            await call_api(self.api.create, templates_path(key[0]), template)
            self.metrics.templates_created.inc()
        except KubeError as exc:
            if exc.status != 409:
                raise LifecycleError(
                    f"could not create ResourceClaimTemplate {key[0]}/{key[1]}: {exc.message}; retry the pod"
                ) from None
        self._templates[key] = self.clock() + TEMPLATE_CACHE_SECONDS
