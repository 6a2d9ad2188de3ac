"""What the webhook creates and deletes for a converted pod, in either lifecycle mode.

``claim``: each planned ResourceClaim is created at admission (never on dry runs). A name held by
another pod's claim gets a hashed variant; if any create fails, the claims this request already
created are deleted before the pod is denied, so a failed admission leaves nothing behind.
``template``: the shared, content-named ResourceClaimTemplates are created if missing; the
resourceclaim controller then makes pod-owned claims from them.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from typing import Any

import anyio

from dralab.model import naming
from dralab.model.convert import (
    ANN_ADMISSION_UID,
    ANN_POD_NAME,
    LIFECYCLE_LABEL,
    Conversion,
    Converter,
)
from dralab.model.objects import MANAGED_BY
from dralab.util import get_logger
from dralab.webhook.budgets import BudgetGate
from dralab.webhook.kube import ApiError, AsyncKubeApi, KubeApi, claims_path, templates_path
from dralab.webhook.metrics import Metrics

MAX_ATTEMPTS = 4
TEMPLATE_CACHE_SECONDS = 60.0

log = get_logger("dralab.webhook.lifecycle")


class LifecycleError(Exception):
    """Creating a pod's objects failed; the message says which object and why."""


def is_managed_claim(claim: dict[str, Any]) -> bool:
    labels = (claim.get("metadata") or {}).get("labels") or {}
    managed = all(labels.get(k) == v for k, v in MANAGED_BY.items())
    return managed and labels.get(LIFECYCLE_LABEL) == "claim"


def claim_belongs_to(claim: dict[str, Any], pod: dict[str, Any]) -> bool:
    """Whether ``claim`` was made for ``pod``: owned by it, or annotated with its name and not owned by another."""
    meta = claim.get("metadata") or {}
    pod_meta = pod.get("metadata") or {}
    owners = [o for o in meta.get("ownerReferences") or [] if o.get("kind") == "Pod"]
    if owners:
        return any(o.get("uid") == pod_meta.get("uid") for o in owners)
    annotated = (meta.get("annotations") or {}).get(ANN_POD_NAME)
    return annotated is None or annotated == pod_meta.get("name")


class ClaimLifecycle:
    """Creates (or, for deleted pods, removes) the objects behind a conversion."""

    def __init__(
        self,
        converter: Converter,
        api: KubeApi | AsyncKubeApi | None,
        metrics: Metrics,
        clock: Callable[[], float] = time.monotonic,
        budgets: BudgetGate | None = None,
    ) -> None:
        self.converter = converter
        self.api = api
        self.metrics = metrics
        self.clock = clock
        self.budgets = budgets  # ShareBudgets, checked over the claims this webhook creates
        self._templates: dict[tuple[str, str], float] = {}

    async def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Await an asyncio API; run a blocking one in a worker thread."""
        if inspect.iscoroutinefunction(fn):
            return await fn(*args)
        return await anyio.to_thread.run_sync(fn, *args)

    async def admit(
        self, pod: dict[str, Any], namespace: str, uid: str | None, *, dry_run: bool = False, create: bool = True
    ) -> Conversion:
        """Convert ``pod`` and, unless ``dry_run`` or not ``create``, make its objects exist."""
        conv = self.converter.convert(pod, namespace=namespace, request_uid=uid)
        if not conv.changed or dry_run or not create or self.api is None:
            return conv
        if self.converter.lifecycle == "template":
            await self._ensure_templates(conv)
            return conv
        if self.budgets is not None:
            async with self.budgets.admit(namespace, conv.objects):  # held until the claims exist
                return await self._create_claims(pod, namespace, uid or "", conv)
        return await self._create_claims(pod, namespace, uid or "", conv)

    async def _create_claims(self, pod: dict[str, Any], namespace: str, uid: str, conv: Conversion) -> Conversion:
        assert self.api is not None
        created: dict[str, str] = {}  # name -> uid
        renames: dict[str, str] = {}
        for attempt in range(MAX_ATTEMPTS):
            restart = False
            for plan, claim in zip(conv.plans, conv.objects, strict=True):
                name = claim["metadata"]["name"]
                if name in created:
                    continue
                try:
                    made = await self._call(self.api.create, claims_path(namespace), claim)
                except ApiError as exc:
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
            return await self._call(self.api.get, claims_path(namespace, name))
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise LifecycleError(f"could not read ResourceClaim {namespace}/{name}: {exc.message}") from None

    async def _rollback(self, namespace: str, created: dict[str, str]) -> None:
        assert self.api is not None
        for name, claim_uid in created.items():
            try:
                await self._call(self.api.delete, claims_path(namespace, name), claim_uid or None)
                self.metrics.claims_rolled_back.inc()
            except ApiError as exc:
                if exc.status != 404:
                    log.warning(
                        "rollback could not delete a claim; the janitor will reap it",
                        extra={"fields": {"namespace": namespace, "name": name, "error": str(exc)}},
                    )

    async def _ensure_templates(self, conv: Conversion) -> None:
        assert self.api is not None
        now = self.clock()
        for template in conv.objects:
            key = (conv.namespace, template["metadata"]["name"])
            if self._templates.get(key, 0.0) > now:
                continue
            try:
                await self._call(self.api.create, templates_path(conv.namespace), template)
                self.metrics.templates_created.inc()
            except ApiError as exc:
                if exc.status != 409:
                    raise LifecycleError(
                        f"could not create ResourceClaimTemplate {key[0]}/{key[1]}: {exc.message}; retry the pod"
                    ) from None
            self._templates[key] = now + TEMPLATE_CACHE_SECONDS

    async def cleanup(self, pod: dict[str, Any], namespace: str) -> list[str]:
        """Delete the managed claims a deleted pod referenced (best effort); returns the names deleted."""
        if self.api is None:
            return []
        deleted = []
        for ref in (pod.get("spec") or {}).get("resourceClaims") or []:
            name = ref.get("resourceClaimName")
            if not name:
                continue
            try:
                claim = await self._call(self.api.get, claims_path(namespace, name))
                if not is_managed_claim(claim) or not claim_belongs_to(claim, pod):
                    continue
                await self._call(self.api.delete, claims_path(namespace, name), claim["metadata"].get("uid"))
                deleted.append(name)
                self.metrics.claims_deleted.inc()
            except ApiError as exc:
                if exc.status not in (404, 409):
                    log.warning(
                        "could not delete a deleted pod's claim; the garbage collector or janitor will",
                        extra={"fields": {"namespace": namespace, "name": name, "error": str(exc)}},
                    )
        return deleted
