"""The admission campaign: hostile input to the real ASGI app (``dralab.webhook.server.create_app``)
with an in-memory apiserver behind the claim lifecycle, and the contract every answer must keep.

Raw bodies (not JSON, deep nesting, wrong shapes), malformed AdmissionReviews, and well-formed
reviews carrying hostile pods (odd quantities, junk where objects belong, injection attempts in
selection annotations). The contract: never a 5xx (HTTP or in the review), never an unhandled
exception, every denial starts with the field it is about, and every patch applies to the pod and
leaves no HAMi resource behind.
"""

from __future__ import annotations

import base64
import copy
import json
import logging
import re
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dralab_kit.fuzz.findings import Findings, run_cases
from dralab_kit.fuzz.strategies import NAMESPACE, namespace_attack_review, raw_body, review, size_attack_review

FIELD_ROOTS = ("kind", "apiVersion", "metadata", "spec")
# The one request field a 200 denial can be about (the others are type-checked into HTTP 400s): the webhook
# checks a pod review's namespace before anything else, so a bad one is the first wrong field.
REQUEST_FIELDS = ("request.namespace",)
DENIAL = re.compile(r"^(?P<field>[A-Za-z][^\s:]*): \S")


def memory_api() -> Any:
    """The shared in-memory apiserver, emptied past 5000 objects (a long fuzz run stays bounded)."""
    from dralab_kit.fixtures.fakeapi import FakeKube

    api = FakeKube()
    api.on_call.append(lambda _call: api.clear() if len(api.objects) > 5000 else None)
    return api


def webhook_client() -> Any:
    """A test client over the real admission app (claim lifecycle on :func:`memory_api`, no janitor)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient

    from dralab.config import default_config
    from dralab.webhook.server import build, create_app

    hook = build(default_config(), memory_api(), janitor=False)
    return TestClient(create_app(hook), raise_server_exceptions=True), hook


def check_answer(status: int, body: bytes, sent: Any, leftovers: Callable[[Any], list[str]],
                 path: str = "/mutate") -> list[tuple[str, Any]]:
    """Contract violations of one admission answer to ``path`` (pure): kinds with what shows them."""
    if status >= 500:
        return [(f"http_{status}", body[:200].decode(errors="replace"))]
    if status in (400, 413):
        return [] if body.strip() else [("empty_400_message", "")]
    if status != 200:
        return [(f"http_{status}", body[:200].decode(errors="replace"))]
    try:
        answer = json.loads(body)["response"]
    except (ValueError, KeyError, TypeError):
        return [("unparseable_answer", body[:200].decode(errors="replace"))]
    request = sent.get("request") if isinstance(sent, dict) else None
    out: list[tuple[str, Any]] = []
    if isinstance(request, dict) and isinstance(request.get("uid"), str) and answer.get("uid") != request["uid"]:
        out.append(("uid_not_echoed", answer.get("uid")))
    if not isinstance(answer.get("allowed"), bool):
        out.append(("allowed_not_bool", answer))
    code = (answer.get("status") or {}).get("code")
    if isinstance(code, int) and code >= 500:
        out.append((f"review_{code}", (answer.get("status") or {}).get("message", "")))
    elif answer.get("allowed") is False:
        message = str((answer.get("status") or {}).get("message", ""))
        match = DENIAL.match(message)
        if not match or (match["field"].split(".")[0].split("[")[0] not in FIELD_ROOTS
                         and match["field"] not in REQUEST_FIELDS):
            out.append(("denial_without_field", message))
    if isinstance(request, dict) and not (isinstance(code, int) and code >= 500):
        out += check_namespace_answer(request, answer, path)
    if answer.get("patch"):
        from dralab.model.jsonpatch import apply

        try:
            ops = json.loads(base64.b64decode(answer["patch"]))
            patched = apply(copy.deepcopy(request["object"]), ops)  # type: ignore[index]
        except Exception as exc:
            return [*out, ("patch_does_not_apply", f"{type(exc).__name__}: {exc}")]
        left = leftovers(patched)
        if left:
            out.append(("patch_leaves_hami_resources", left[:3]))
    return out


def check_namespace_answer(request: dict[str, Any], answer: dict[str, Any], path: str) -> list[tuple[str, Any]]:
    """The namespace rule (pure): a pod review whose namespace is not a DNS label is denied naming
    ``request.namespace`` wherever the webhook reads the namespace (validate: every pod review; mutate: pod
    CREATEs), before any pod field; a review with a good namespace is never denied for it."""
    kind = request.get("kind")
    if not (isinstance(kind, dict) and kind.get("kind") == "Pod" and kind.get("group", "") == ""
            and not request.get("subResource")):
        return []
    namespace = request.get("namespace")
    bad = isinstance(namespace, str) and namespace != "" and not NAMESPACE.fullmatch(namespace)
    message = str((answer.get("status") or {}).get("message", ""))
    named = match["field"] if answer.get("allowed") is False and (match := DENIAL.match(message)) else None
    if not bad:
        return [("good_namespace_denied", message)] if named == "request.namespace" else []
    if answer.get("allowed") is False:
        return [] if named == "request.namespace" else [("bad_namespace_not_named_first",
                                                         f"namespace {namespace!r} -> {message}")]
    if answer.get("allowed") is True and (path == "/validate" or request.get("operation") == "CREATE"):
        return [("bad_namespace_admitted", f"namespace {namespace!r} -> {path} allowed")]
    return []


def fuzz_admission(cases: int, seed: int | None = None, only: tuple[str, ...] = ()) -> dict[str, Any]:
    """Raw bodies, malformed reviews and hostile pods against /mutate and /validate (``only``: some)."""
    client, hook = webhook_client()
    leftovers = hook.handler.converter.leftovers
    results: dict[str, Any] = {}
    logging.disable(logging.ERROR)
    started = time.monotonic()
    shares = {
        "raw_bodies": (raw_body, cases // 5),
        "malformed_reviews": (review(typed=False), cases * 2 // 5),
        "hostile_pods": (review(typed=True), cases - cases // 5 - cases * 2 // 5),
        "size_attacks": (size_attack_review(), max(1, cases // 10)),
        "namespace_attacks": (namespace_attack_review(), max(1, cases // 10)),
    }
    for target, (strategy, n) in shares.items():
        if only and target not in only:
            continue
        found = Findings()

        def check(value: Any, found: Findings = found, target: str = target) -> None:
            body = value if isinstance(value, bytes) else json.dumps(value).encode()
            path = "/mutate" if target == "raw_bodies" or found.cases % 3 else "/validate"
            try:
                resp = client.post(path, content=body, headers={"Content-Type": "application/json"})
            except Exception as exc:  # an exception the app let escape: the server answers 500
                found.seen(f"{path} 500")
                found.problem(f"http_500 {_where(exc)}", _short(body))
                return
            found.seen(f"{path} {resp.status_code}" + ("" if resp.status_code != 200 else
                                                        (" allowed" if b'"allowed":true' in resp.content
                                                         else " denied")))
            for kind, example in check_answer(resp.status_code, resp.content, value, leftovers, path):
                found.problem(kind, {"sent": _short(body), "got": example})
            if target == "size_attacks" and resp.status_code == 200 and b'"allowed":true' in resp.content:
                found.problem("size_attack_admitted", _short(body))

        run_cases(strategy, n, check, seed)
        results[target] = found.as_dict()
    client.close()
    logging.disable(logging.NOTSET)
    results["seconds"] = round(time.monotonic() - started, 1)
    return results


def _where(exc: BaseException) -> str:
    """``Type at file:line`` of the innermost dralab frame of an exception (where to fix it)."""
    import traceback

    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "/dralab/" in f.filename]
    frame = frames[-1] if frames else None
    at = f" at {Path(frame.filename).name}:{frame.lineno}" if frame else ""
    return f"{type(exc).__name__}{at}"


def _short(body: bytes) -> str:
    text = body.decode(errors="replace")
    return text if len(text) <= 400 else f"{text[:200]}...({len(text)} bytes)...{text[-100:]}"


def baseline_checks() -> dict[str, Any]:
    """A well-formed Lab 20 pod passes the same checks (a checker that flags everything proves nothing)."""
    from dralab_kit.fixtures.pods import sharing_pod

    client, hook = webhook_client()
    sent = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u-1", "kind": {"group": "", "version": "v1", "kind": "Pod"}, "namespace": "team-a",
                        "operation": "CREATE", "object": sharing_pod("ok")}}
    resp = client.post("/mutate", content=json.dumps(sent).encode())
    client.close()
    problems = check_answer(resp.status_code, resp.content, sent, hook.handler.converter.leftovers)
    patched = b'"patch"' in resp.content
    return {"admission_ok": not problems and patched, "admission_problems": problems}
