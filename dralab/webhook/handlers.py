"""AdmissionReview v1 in, AdmissionReview v1 out: the /mutate and /validate decisions.

Transport-free (the server passes decoded JSON), so every decision is testable without HTTP.
"""

from __future__ import annotations

import base64
import contextlib
from typing import Any

import anyio
import orjson

from dralab.jsonio import dumps
from dralab.model.denials import Denied, check_type, json_type
from dralab.util import get_logger
from dralab.webhook.lifecycle import ClaimLifecycle, LifecycleError
from dralab.webhook.limits import check_namespace, check_pod_names
from dralab.webhook.metrics import Metrics

log = get_logger("dralab.webhook.handlers")


class BadReview(ValueError):
    """The body is not an AdmissionReview v1 with a request (HTTP 400)."""


# The request fields the handlers read, with the JSON type each must have when present (null = absent).
# The apiserver always sends these types; checking them once here lets the handlers trust the shape.
_REQUEST_FIELDS: dict[str, type] = {
    "uid": str,
    "kind": dict,
    "subResource": str,
    "namespace": str,
    "operation": str,
    "object": dict,
    "oldObject": dict,
    "dryRun": bool,
}
_KIND_FIELDS = ("group", "version", "kind")
# A pod's deepest fields sit about 15 levels below the review; the recursive steps of conversion
# (copy, diff, encode) need the body bounded far below Python's recursion limit.
MAX_DEPTH = 100


def nesting_exceeds(value: Any, limit: int) -> bool:
    """Whether decoded JSON nests objects/lists more than ``limit`` levels deep (iterative: no recursion)."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node
        for child in children:
            if isinstance(child, (dict, list)):
                if depth >= limit:
                    return True
                stack.append((child, depth + 1))
    return False


def check_request(request: dict[str, Any]) -> None:
    """Raise :class:`BadReview` naming the first request field of the wrong JSON type."""
    try:
        for name, expected in _REQUEST_FIELDS.items():
            check_type(request, name, expected, f"request.{name}")
        kind = request.get("kind") or {}
        for name in _KIND_FIELDS:
            check_type(kind, name, str, f"request.kind.{name}")
    except Denied as exc:
        raise BadReview(str(exc)) from None


def parse_review(body: bytes) -> dict[str, Any]:
    """The decoded AdmissionReview, its request checked for shape; :class:`BadReview` (HTTP 400) otherwise."""
    # Each level of nesting needs its own '{' or '['; a body with at most MAX_DEPTH of them cannot nest
    # deeper (counting bytes is cheap, walking the decoded document is not).
    openers = body.count(b"{") + body.count(b"[")
    try:
        review = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        if openers > MAX_DEPTH and "depth" in str(exc):  # orjson stops at 1024 levels
            raise BadReview("body is not an AdmissionReview: JSON nested too deeply") from None
        raise BadReview(f"body is not JSON: {exc}") from None
    if not isinstance(review, dict) or not isinstance(review.get("request"), dict):
        raise BadReview("expected an AdmissionReview with a request")
    if openers > MAX_DEPTH and nesting_exceeds(review, MAX_DEPTH):
        raise BadReview(f"body is not an AdmissionReview: JSON nested more than {MAX_DEPTH} levels deep")
    version = review.get("apiVersion")
    if version not in (None, "admission.k8s.io/v1"):
        shown = repr(version[:60]) if isinstance(version, str) else json_type(version)
        raise BadReview(f"unsupported AdmissionReview version {shown}; use admission.k8s.io/v1")
    check_request(review["request"])
    return review


def respond(
    uid: str,
    allowed: bool = True,
    *,
    patch: list[dict[str, Any]] | None = None,
    message: str | None = None,
    code: int | None = None,
    warnings: list[str] | None = None,
) -> dict[str, Any]:
    """An AdmissionReview v1 response."""
    response: dict[str, Any] = {"uid": uid, "allowed": allowed}
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(dumps(patch)).decode()
    if message is not None or code is not None:
        response["status"] = {"code": code or (200 if allowed else 400), "message": message or ""}
        if not allowed:
            response["status"]["reason"] = "Invalid" if (code or 400) < 500 else "InternalError"
    if warnings:
        response["warnings"] = warnings
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


class AdmissionHandler:
    """The two admission endpoints over one converter and claim lifecycle."""

    def __init__(
        self,
        lifecycle: ClaimLifecycle,
        metrics: Metrics,
        excluded_namespaces: set[str],
        deadline_seconds: float = 8.0,
    ) -> None:
        self.lifecycle = lifecycle
        self.converter = lifecycle.converter
        self.metrics = metrics
        self.excluded = set(excluded_namespaces)
        self.deadline_seconds = deadline_seconds  # one deadline per admission, below timeoutSeconds
        self.volcano: Any = None  # dralab.webhook.volcano.VolcanoMutator: Volcano Jobs (set by server.build)
        self.extended: Any = None  # dralab.webhook.extended.DeviceClassWatch: DRAExtendedResource warnings
        self._conversions: dict[str, Any] = {}  # vendor -> its conversions counter

    def _is_pod(self, request: dict[str, Any]) -> bool:
        kind = request.get("kind") or {}
        return kind.get("kind") == "Pod" and kind.get("group", "") == "" and not request.get("subResource")

    async def mutate(self, review: dict[str, Any], *, create: bool = True, offload: bool = False) -> dict[str, Any]:
        request = review["request"]
        uid = str(request.get("uid", ""))
        if self.volcano is not None and (request.get("kind") or {}).get("group") == "batch.volcano.sh":
            return await self.volcano.mutate(review)
        if request.get("operation") != "CREATE" or not self._is_pod(request):
            return respond(uid)
        pod = request.get("object") or {}
        try:
            # Names are checked before anything else reads them: a namespace such as x/../kube-system
            # must neither pass the exclusion check nor reach a URL path.
            namespace = check_namespace(request.get("namespace") or "default")
            if namespace in self.excluded:
                return respond(uid)
            meta = pod.get("metadata") if isinstance(pod, dict) else None
            if isinstance(meta, dict):
                check_pod_names(meta.get("name"), meta.get("generateName"))
            deadline = self.lifecycle.clock() + self.deadline_seconds
            dry_run = bool(request.get("dryRun"))
            # Only API calls and offloaded conversions wait; without them nothing could be cut off, so the
            # cancel scope (a sizeable share of a conversion-only admission) is left out.
            waits = (create and not dry_run) or offload
            with anyio.fail_after(self.deadline_seconds) if waits else contextlib.nullcontext():
                conv = await self.lifecycle.admit(
                    pod, namespace, uid, dry_run=dry_run, create=create, deadline=deadline,
                    offload=offload,
                )
        except Denied as exc:
            self.metrics.denials.labels("mutate").inc()
            return respond(uid, False, message=str(exc), code=400)
        except TimeoutError:
            self.metrics.refused.labels("deadline").inc()
            self.metrics.denials.labels("mutate").inc()
            return respond(
                uid, False, code=504,
                message=f"dralab could not finish this admission within {self.deadline_seconds:g} s "
                "(webhook.admissionDeadlineSeconds); retry the pod",
            )
        except LifecycleError as exc:
            if exc.code >= 500:
                self.metrics.errors.labels("mutate").inc()
            self.metrics.denials.labels("mutate").inc()
            return respond(uid, False, message=str(exc), code=exc.code)
        except Exception as exc:
            self.metrics.errors.labels("mutate").inc()
            log.exception("mutate failed", extra={"fields": {"uid": uid, "namespace": namespace}})
            return respond(uid, False, message=f"dralab webhook internal error: {type(exc).__name__}", code=500)
        if not conv.changed:
            return respond(uid)
        for vendor in conv.vendors:
            counter = self._conversions.get(vendor)
            if counter is None:  # vendors come from the config: a handful of children, bound once each
                counter = self._conversions[vendor] = self.metrics.conversions.labels(vendor)
            counter.inc()
        warnings = self.extended.warnings(pod, conv.pod) if self.extended is not None else None
        return respond(uid, patch=conv.patch, warnings=warnings)

    async def validate(self, review: dict[str, Any], *, offload: bool = False) -> dict[str, Any]:
        """Deny pods that still carry HAMi resources. Never a side effect: anyone who reaches the webhook
        can forge a review, so a DELETE review frees nothing (owner references, the garbage collector and
        the janitor free claims)."""
        request = review["request"]
        uid = str(request.get("uid", ""))
        if not self._is_pod(request):
            return respond(uid)
        try:
            namespace = check_namespace(request.get("namespace") or "default")
        except Denied as exc:
            self.metrics.denials.labels("validate").inc()
            return respond(uid, False, message=str(exc), code=400)
        if namespace in self.excluded:
            return respond(uid)
        operation = request.get("operation")
        if operation not in ("CREATE", "UPDATE"):
            return respond(uid)
        pod = request.get("object") or {}
        if self.converter.opted_out(pod):
            return respond(uid)
        try:
            left = self.converter.leftovers(pod)
        except Denied as exc:
            self.metrics.denials.labels("validate").inc()
            return respond(uid, False, message=str(exc), code=400)
        if operation == "UPDATE":
            # Only what this update introduced: pods admitted before dralab keep working (finalizers, labels).
            try:
                before = set(self.converter.leftovers(request.get("oldObject") or {}))
            except Denied:
                before = set()  # an unreadable old pod excuses nothing: judge the new one whole
            left = [f for f in left if f not in before]
        if left:
            self.metrics.denials.labels("validate").inc()
            return respond(
                uid,
                False,
                code=400,
                message=(
                    f"{left[0]}: the pod still carries HAMi resources after mutation ({len(left)} field(s)); "
                    "make sure dralab's mutating webhook runs and no later webhook adds them back"
                ),
            )
        return respond(uid)
