"""The admission path for Volcano Jobs: convert each task template and make its ResourceClaimTemplates exist.

Templates are content-named and shared (the same request shape gives the same name), so creating
one that exists already is success; a failed create denies the Job rather than admitting task
templates that name a missing template. Claims are made later, per pod, by the resourceclaim
controller and owned by their pods: nothing here can leak a claim.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dralab.kube import KubeError
from dralab.kube.aio import call_api
from dralab.kube.paths import templates_path
from dralab.model.convert import Converter
from dralab.model.denials import Denied
from dralab.model.volcano import GROUP, KIND, convert_job
from dralab.util import get_logger
from dralab.webhook.handlers import respond
from dralab.webhook.limits import check_namespace

if TYPE_CHECKING:
    from dralab.webhook.controllers.budgets import BudgetGate

log = get_logger("dralab.webhook.volcano")


def is_job_request(request: dict[str, Any]) -> bool:
    kind = request.get("kind") or {}
    return kind.get("group") == GROUP and kind.get("kind") == KIND and not request.get("subResource")


class VolcanoMutator:
    """Mutates Volcano Job CREATEs with a template-lifecycle converter; creates the templates they need."""

    def __init__(self, converter: Converter, api: Any, metrics: Any, excluded: set[str],
                 budgets: BudgetGate | None = None) -> None:
        self.converter = converter
        self.api = api
        self.metrics = metrics
        self.excluded = excluded
        self.budgets = budgets  # a Job a ShareBudget covers is refused (its pods' claims come from templates)

    async def mutate(self, review: dict[str, Any]) -> dict[str, Any]:
        request = review["request"]
        uid = str(request.get("uid", ""))
        if request.get("operation") != "CREATE" or not is_job_request(request):
            return respond(uid)
        try:
            namespace = check_namespace(request.get("namespace") or "default")  # it reaches a URL path
            if namespace in self.excluded:
                return respond(uid)
            conv = convert_job(request.get("object") or {}, self.converter, namespace=namespace, request_uid=uid)
            if conv.changed and self.budgets is not None:
                await self.budgets.refuse_unenforceable(namespace, conv.objects, kind="Volcano Job")
        except Denied as exc:
            self.metrics.denials.labels("mutate").inc()
            return respond(uid, False, message=str(exc), code=400)
        if not conv.changed:
            return respond(uid)
        if self.api is not None and not request.get("dryRun"):
            for template in conv.objects:
                try:
                    await call_api(self.api.create, templates_path(namespace), template)
                except KubeError as exc:
                    if exc.status != 409:
                        self.metrics.errors.labels("mutate").inc()
                        return respond(
                            uid, False, code=500,
                            message=f"could not create ResourceClaimTemplate {namespace}/"
                            f"{template['metadata']['name']}: {exc.message}; retry the Job",
                        )
        for _ in conv.tasks:
            self.metrics.conversions.labels("volcano-task").inc()
        log.info("Volcano Job converted", extra={"fields": {"namespace": namespace, "tasks": conv.tasks}})
        return respond(uid, patch=conv.patch)


def volcano_webhook(pod_webhook: dict[str, Any]) -> dict[str, Any]:
    """The mutating webhook entry for Volcano Jobs, next to the pod one (same server, path and selectors).

    Its own match condition looks into the task templates; the pod webhook's one reads
    ``object.spec.containers``, which a Job does not have.
    """
    hook = {k: v for k, v in pod_webhook.items() if k not in ("name", "rules", "matchConditions")}
    hook["name"] = "mutate-volcano.dralab.io"
    hook["rules"] = [{"apiGroups": [GROUP], "apiVersions": ["v1alpha1"], "operations": ["CREATE"],
                      "resources": ["jobs"], "scope": "Namespaced"}]
    hook["matchConditions"] = [{
        "name": "has-tasks",
        "expression": "has(object.spec) && has(object.spec.tasks)",
    }]
    return hook
