"""The lab operations: what each ``try`` / ``finally`` entry does against a cluster.

Every operation gets its body with ``${vars}`` already substituted and returns an
:class:`OpOutcome` describing what it saw; an expectation that does not hold raises
:class:`StepFailed` with the last mismatch, so a failing step says what was wrong. Waits poll a
condition until a timeout (``dralab.util.wait_for``), never sleep.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from dralab import yamlio
from dralab.errors import UserError
from dralab.kube import KubeError
from dralab.model import accounting
from dralab.util import WaitTimeout, wait_for
from harness import cdi, jpath
from harness import match as matching
from harness.environment import Environment
from harness.registry import handles
from harness.resources import Ref, parse_ref, ref_of
from harness.results import OpOutcome
from harness.schema import Lab, Operation
from harness.subst import substitute


class StepFailed(AssertionError):
    """An expectation of the lab did not hold."""


@dataclass
class Context:
    """State shared by the operations of one lab run."""

    env: Environment
    lab: Lab
    namespace: str
    vars: dict[str, Any]
    marks: dict[str, float] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    applied: list[Ref] = field(default_factory=list)
    poll_interval: float = 0.05


Handler = Callable[[Context, dict[str, Any], Operation], OpOutcome]


def _outcome(op: Operation, summary: str, excerpt: Any = None, text: str | None = None) -> OpOutcome:
    return OpOutcome(kind=op.kind, where=op.where, summary=summary, excerpt=excerpt, text=text, evidence=op.evidence)


def _ref(ctx: Context, body: dict[str, Any], op: Operation) -> Ref:
    return parse_ref(body["resource"], f"{op.where}.resource").in_namespace(ctx.namespace)


def _fetch(ctx: Context, ref: Ref) -> Any:
    """An object (None when absent) or, for a list reference, ``{"items": [...]}``."""
    if ref.is_list:
        return {"items": ctx.env.client.list(ref)}
    return ctx.env.client.get(ref)


def _poll(ctx: Context, op: Operation, check: Callable[[], tuple[bool, Any, str]], what: str) -> Any:
    """Run ``check`` until it reports success; on timeout fail with its last explanation."""
    last: dict[str, Any] = {"detail": "never checked"}

    def attempt() -> Any:
        ok, value, detail = check()
        last["detail"] = detail
        return (value,) if ok else None

    try:
        return wait_for(attempt, op.effective_timeout, what, interval=ctx.poll_interval)[0]
    except WaitTimeout:
        raise StepFailed(f"{what}: not true after {op.effective_timeout:g}s: {last['detail']}") from None


def _load_manifests(ctx: Context, body: dict[str, Any], op: Operation) -> list[dict[str, Any]]:
    if "object" in body:
        return [body["object"]]
    if "objects" in body:
        return list(body["objects"])
    files = body["file"] if isinstance(body["file"], list) else [body["file"]]
    variables = {**ctx.vars, **(body.get("vars") or {})}
    docs: list[dict[str, Any]] = []
    for name in files:
        path = ctx.lab.directory / name
        try:
            loaded = [d for d in yamlio.load_all(path.read_text(), str(path)) if d]
        except yaml.YAMLError as exc:
            raise UserError(f"{op.where}: {name} is not valid YAML ({exc})") from None
        docs += [substitute(d, variables) for d in loaded]
    return docs


def _namespaced_copy(ctx: Context, obj: dict[str, Any], namespace: str) -> dict[str, Any]:
    obj = json.loads(json.dumps(obj))
    meta = obj.setdefault("metadata", {})
    if ctx.env.client.namespaced(str(obj.get("apiVersion")), str(obj.get("kind"))):
        meta.setdefault("namespace", namespace)
    return obj


@handles("apply")
def op_apply(ctx: Context, body: dict[str, Any], op: Operation) -> OpOutcome:
    namespace = str(body.get("namespace") or ctx.namespace)
    expect_error = body.get("expectError")
    applied = []
    for raw in _load_manifests(ctx, body, op):
        obj = _namespaced_copy(ctx, raw, namespace)
        ref = ref_of(obj)
        try:
            result = ctx.env.client.apply(obj)
        except KubeError as exc:
            if expect_error is None:
                raise StepFailed(f"apply {ref.describe()} was refused: {exc.message}") from None
            mismatch = (
                matching.match(expect_error, exc.message)
                if not isinstance(expect_error, str)
                else ([] if expect_error in exc.message else [f"message {exc.message!r} lacks {expect_error!r}"])
            )
            if mismatch:
                raise StepFailed(f"apply {ref.describe()} was refused differently: {'; '.join(mismatch)}") from None
            return _outcome(op, f"{ref.describe()} refused as expected: {exc.message}", {"message": exc.message})
        if expect_error is not None:
            raise StepFailed(f"apply {ref.describe()} was accepted, but the lab expected a refusal ({expect_error})")
        ctx.applied.append(ref_of(result) if result.get("metadata", {}).get("name") else ref)
        applied.append(f"{ref.kind}/{(result.get('metadata') or {}).get('name', ref.name)}")
    return _outcome(op, f"applied {', '.join(applied)}", {"applied": applied})


def _delete_refs(ctx: Context, body: dict[str, Any], op: Operation) -> tuple[list[Ref], Ref | None]:
    """The objects to delete, and the list reference they came from (None for named objects)."""
    if "resource" in body:
        ref = _ref(ctx, body, op)
        if ref.is_list:
            return [ref_of(o).in_namespace(ref.namespace) for o in ctx.env.client.list(ref)], ref
        return [ref], None
    return [ref_of(_namespaced_copy(ctx, obj, ctx.namespace)) for obj in _load_manifests(ctx, body, op)], None


def _gone(ctx: Context, ref: Ref) -> tuple[bool, Any, str]:
    """A :func:`_poll` check: ``ref`` no longer exists."""
    return ctx.env.client.get(ref) is None, True, "still present"


@handles("delete")
def op_delete(ctx: Context, body: dict[str, Any], op: Operation) -> OpOutcome:
    """Delete objects; a named object that does not exist (or an empty list) fails unless ``missingOk: true``.

    Deleting what is not there usually means an earlier step did not do what the lab thinks.
    """
    refs, listed = _delete_refs(ctx, body, op)
    missing_ok = bool(body.get("missingOk", False))
    if listed is not None and not refs and not missing_ok:
        raise StepFailed(f"nothing to delete: no {listed.describe()} (write missingOk: true if that is expected)")
    grace = body.get("gracePeriodSeconds")
    missing = []
    for ref in refs:
        if not ctx.env.client.delete(ref, grace_period_seconds=grace) and listed is None:
            missing.append(ref.describe())  # a listed object may go by itself meanwhile
    if missing and not missing_ok:
        raise StepFailed(
            f"nothing to delete: {', '.join(missing)} not found (write missingOk: true if that is expected)"
        )
    if body.get("wait", True):
        for ref in refs:
            _poll(ctx, op, partial(_gone, ctx, ref), f"{ref.describe()} is gone")
    names = ", ".join(f"{r.kind}/{r.name}" for r in refs) or "nothing"
    return _outcome(op, f"deleted {names}" + (" (and waited until gone)" if body.get("wait", True) else ""))


@handles("capture")
def op_capture(ctx: Context, body: dict[str, Any], op: Operation) -> OpOutcome:
    ref = _ref(ctx, body, op)
    paths: dict[str, str] = dict(body["values"])

    def check() -> tuple[bool, Any, str]:
        obj = _fetch(ctx, ref)
        if obj is None:
            return False, None, f"{ref.describe()} not found"
        try:
            return True, {var: jpath.get(obj, path) for var, path in paths.items()}, ""
        except jpath.PathError as exc:
            return False, None, str(exc)

    values = _poll(ctx, op, check, f"capture from {ref.describe()}")
    ctx.vars.update(values)
    summary = ", ".join(f"{k} = {_short(v)}" for k, v in values.items())
    return _outcome(op, f"captured {summary} from {ref.describe()}", values)


def _short(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _check_match(ctx: Context, body: dict[str, Any], op: Operation) -> OpOutcome:
    ref = _ref(ctx, body, op)
    started = time.monotonic()
    if body.get("absent"):

        def gone() -> tuple[bool, Any, str]:
            obj = _fetch(ctx, ref)
            present = bool(obj["items"]) if ref.is_list else obj is not None
            return not present, True, f"{ref.describe()} still present"

        _poll(ctx, op, gone, f"{ref.describe()} is absent")
        return _outcome(op, f"{ref.describe()} is absent ({time.monotonic() - started:.2f}s)")
    expected = body["match"]

    def check() -> tuple[bool, Any, str]:
        obj = _fetch(ctx, ref)
        if obj is None:
            return False, None, f"{ref.describe()} not found"
        problems = matching.match(expected, obj)
        return not problems, obj, "; ".join(problems[:8])

    obj = _poll(ctx, op, check, f"{ref.describe()} matches")
    seconds = time.monotonic() - started
    shown = matching.excerpt(expected, obj)
    return _outcome(op, f"{ref.describe()} ({seconds:.2f}s): {brief(shown)}", shown)


def brief(value: Any, limit: int = 6) -> str:
    """A one-line gist of an excerpt: its first scalars as ``name=value``."""
    pairs = matching.leaves(value)
    parts = []
    for path, leaf in pairs[:limit]:
        name = ".".join(p for p in path.replace("[", ".").replace("]", "").split(".") if not p.isdigit())
        name = ".".join(name.split(".")[-2:]) if name else "value"
        parts.append(f"{name}={_short(leaf, 48)}")
    more = f", … (+{len(pairs) - limit})" if len(pairs) > limit else ""
    return ", ".join(parts) + more if parts else "matched"


@handles("assert")
def op_assert(ctx: Context, body: dict[str, Any], op: Operation) -> OpOutcome:
    return _check_match(ctx, body, op)


@handles("wait-for")
def op_wait_for(ctx: Context, body: dict[str, Any], op: Operation) -> OpOutcome:
    return _check_match(ctx, body, op)


def _pod_events(ctx: Context, pod: str) -> list[dict[str, Any]]:
    ref = Ref("v1", "Event", namespace=ctx.namespace, field_selector=f"involvedObject.name={pod}")
    return [e for e in ctx.env.client.list(ref) if (e.get("involvedObject") or {}).get("kind", "Pod") == "Pod"]


@handles("expect-pending")
def op_expect_pending(ctx: Context, body: dict[str, Any], op: Operation) -> OpOutcome:
    pod = str(body["pod"])
    reason = str(body.get("reason", "FailedScheduling"))
    wanted = body.get("message") or []
    wanted = [wanted] if isinstance(wanted, str) else list(wanted)
    pod_ref = Ref("v1", "Pod", name=pod, namespace=ctx.namespace)

    def check() -> tuple[bool, Any, str]:
        obj = ctx.env.client.get(pod_ref)
        if obj is None:
            return False, None, f"pod {pod} not found"
        if (obj.get("spec") or {}).get("nodeName"):
            raise StepFailed(
                f"pod {pod} was scheduled to {obj['spec']['nodeName']}, the lab expects it to stay pending"
            )
        events = [e for e in _pod_events(ctx, pod) if e.get("reason") == reason]
        hits = [e for e in events if all(w in str(e.get("message", "")) for w in wanted)]
        if not hits:
            seen = "; ".join(str(e.get("message")) for e in events[-3:]) or "none"
            return False, None, f"no {reason} event with {wanted} for pod {pod} (seen: {seen})"
        return True, (obj, hits[-1]), ""

    obj, event = _poll(ctx, op, check, f"pod {pod} pending with {reason}")
    phase = (obj.get("status") or {}).get("phase", "Pending")
    if phase != "Pending":
        raise StepFailed(f"pod {pod} is {phase}, expected Pending")
    claims = []
    for name in body.get("claims") or []:
        claim = ctx.env.client.get(Ref("resource.k8s.io/v1", "ResourceClaim", name=str(name), namespace=ctx.namespace))
        if claim is None:
            raise StepFailed(f"claim {name} of pending pod {pod} not found")
        if (claim.get("status") or {}).get("allocation"):
            raise StepFailed(f"claim {name} is allocated, but pod {pod} is pending")
        claims.append(name)
    excerpt = {
        "pod": {"name": pod, "phase": phase, "nodeName": None},
        "event": {"type": event.get("type"), "reason": event.get("reason"), "message": event.get("message"),
                  "count": event.get("count")},
        "claimsUnallocated": claims,
    }  # fmt: skip
    return _outcome(op, f"pod {pod} Pending: {reason}: {event.get('message')}", excerpt)


def _claim_uid_and_node(ctx: Context, body: dict[str, Any]) -> tuple[str, list[str]]:
    node = body.get("node")
    if "uid" in body:
        uid = str(body["uid"])
        claim = None
    else:
        ref = Ref("resource.k8s.io/v1", "ResourceClaim", name=str(body["claim"]), namespace=ctx.namespace)
        claim = ctx.env.client.get(ref)
        if claim is None:
            raise StepFailed(f"claim {body['claim']} not found in {ctx.namespace}")
        uid = str(claim["metadata"]["uid"])
    if node:
        return uid, [str(node)]
    if claim is not None:
        selector = ((claim.get("status") or {}).get("allocation") or {}).get("nodeSelector") or {}
        for term in selector.get("nodeSelectorTerms") or []:
            for field_ in term.get("matchFields") or []:
                if field_.get("key") == "metadata.name" and field_.get("values"):
                    return uid, [str(v) for v in field_["values"]]
    nodes = [n["metadata"]["name"] for n in ctx.env.client.list(Ref("v1", "Node"))]
    return uid, nodes


def _require(ctx: Context, capability: str, what: str) -> None:
    if capability not in ctx.env.capabilities:
        raise UserError(f"{what} needs the {capability!r} capability, which profile {ctx.env.profile.name} lacks")


def _node_view(ctx: Context, uid: str, nodes: list[str]) -> dict[str, Any]:
    views = [(n, cdi.claim_view(ctx.env.node_dir(n), uid)) for n in nodes]
    for node, view in views:
        if view["exists"] or view["records"]:
            return {"node": node, "uid": uid, **view}
    node, view = views[0] if views else ("", cdi.claim_view(Path("/nonexistent"), uid))
    return {"node": node, "uid": uid, **view}


def _capture_from(ctx: Context, body: dict[str, Any], view: Any, op: Operation) -> dict[str, Any]:
    captured = {}
    for var, path in (body.get("capture") or {}).items():
        try:
            captured[var] = jpath.get(view, str(path))
        except jpath.PathError as exc:
            raise StepFailed(f"{op.where}: capture {var}: {exc}") from None
    ctx.vars.update(captured)
    return captured


@handles("read-cdi")
def op_read_cdi(ctx: Context, body: dict[str, Any], op: Operation) -> OpOutcome:
    _require(ctx, "node-files", "read-cdi")
    uid, nodes = _claim_uid_and_node(ctx, body)
    expected = body.get("expect")
    absent = body.get("absent", False)

    def check() -> tuple[bool, Any, str]:
        view = _node_view(ctx, uid, nodes)
        if absent:
            if view["exists"]:
                return False, view, f"CDI spec {', '.join(view['files'])} still on node {view['node']}"
            problems = matching.match(expected, view) if expected is not None else []
            return not problems, view, "the spec is gone, but " + "; ".join(problems[:8])
        if not view["exists"]:
            return False, view, f"no CDI spec for claim {uid} on node(s) {', '.join(nodes)}"
        problems = matching.match(expected, view) if expected is not None else []
        return not problems, view, "; ".join(problems[:8])

    view = _poll(ctx, op, check, f"CDI spec of claim {uid}")
    captured = _capture_from(ctx, body, view, op)
    if absent:
        # the spec is gone and ``expect`` (e.g. unprepared: true) held
        shown = {"uid": uid, "exists": False, "unprepared": view["unprepared"], "records": view["records"]}
        if expected is not None:
            shown.update(matching.excerpt(expected, view))
        return _outcome(op, f"no CDI spec for claim {uid} on node {view['node']}: {brief(shown, limit=4)}", shown)
    shown = matching.excerpt(expected, view) if expected is not None else {}
    shown = {"node": view["node"], "files": view["files"], "cdiDeviceIDs": view["cdiDeviceIDs"], **shown}
    summary = f"CDI spec {', '.join(view['files'])} on node {view['node']}"
    if expected is not None:
        summary += f": {brief(matching.excerpt(expected, view), limit=8)}"
    if captured:
        summary += "; captured " + ", ".join(captured)
    return _outcome(op, summary, shown)


@handles("run-with-claim-env")
def op_run_with_claim_env(ctx: Context, body: dict[str, Any], op: Operation) -> OpOutcome:
    _require(ctx, "node-files", "run-with-claim-env")
    _require(ctx, "host-probe", "run-with-claim-env")
    uid, nodes = _claim_uid_and_node(ctx, body)
    view = _poll(ctx, op, lambda: ((v := _node_view(ctx, uid, nodes))["exists"], v, f"no CDI spec for {uid}"),
                 f"CDI spec of claim {uid}")  # fmt: skip
    env = {**view["env"], **{str(k): str(v) for k, v in (body.get("env") or {}).items()}}
    try:
        from dralab import vcore
    except ImportError as exc:
        raise UserError(f"run-with-claim-env needs dralab.vcore ({exc})") from None
    steps = [int(s) for s in body["steps"]] if body.get("steps") is not None else None
    result = vcore.run_probe(env, str(body["vendor"]), steps)
    data = _plain(result)
    problems = matching.match(body["expect"], data) if body.get("expect") is not None else []
    if problems:
        raise StepFailed(f"probe with the env of claim {uid}: " + "; ".join(problems[:8]))
    _capture_from(ctx, body, data, op)
    shown = matching.excerpt(body.get("expect") or {}, data) if body.get("expect") else data
    env_shown = {k: v for k, v in env.items() if k not in ("LD_PRELOAD", "PATH")}
    return _outcome(
        op, f"probe with the CDI env of claim {uid}: {brief(shown, limit=8)}", {"env": env_shown, "result": shown}
    )


def _plain(value: Any) -> Any:
    """Plain data from a result object: dataclass fields plus its public properties (e.g. ``total_mib``)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
        for name in dir(type(value)):
            if not name.startswith("_") and isinstance(getattr(type(value), name, None), property):
                out[name] = _plain(getattr(value, name))
        return out
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if hasattr(value, "__dict__") and not isinstance(value, type):
        return {k: _plain(v) for k, v in vars(value).items() if not k.startswith("_")}
    return value


def _parse_output(text: str, how: str | None) -> Any:
    if how == "env":
        return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    if how == "json":
        return json.loads(text)
    if how == "lines":
        return [line for line in text.splitlines() if line.strip()]
    return text


def _kubectl() -> str:
    """kubectl from PATH, else the one the local cluster built."""
    found = shutil.which("kubectl")
    if found:
        return found
    try:
        from dralab_kit.cluster.build import binary_path

        built = binary_path("kubectl")
    except ImportError:
        built = None
    if built is not None and built.is_file():
        return str(built)
    raise UserError("exec-in-pod needs kubectl: put it on PATH or run `dralab cluster build`")


def _exec_command(ctx: Context, pod: str, container: str | None, argv: list[str]) -> list[str]:
    """``kubectl exec`` in the run's namespace (through the kubelet: on the node profile, 127.0.0.1)."""
    cmd = [_kubectl(), "exec", "-n", ctx.namespace, pod]
    if ctx.env.kubeconfig:
        cmd[1:1] = ["--kubeconfig", str(ctx.env.kubeconfig)]
    if ctx.env.context:
        cmd[1:1] = ["--context", ctx.env.context]
    if container:
        cmd += ["-c", container]
    return [*cmd, "--", *argv]


@handles("exec-in-pod")
def op_exec_in_pod(ctx: Context, body: dict[str, Any], op: Operation) -> OpOutcome:
    _require(ctx, "container-exec", "exec-in-pod")
    command = body["command"]
    argv = ["sh", "-c", command] if isinstance(command, str) else [str(c) for c in command]
    cmd = _exec_command(ctx, str(body["pod"]), str(body["container"]) if body.get("container") else None, argv)
    expected = body.get("expect")

    def check() -> tuple[bool, Any, str]:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=op.effective_timeout, check=False)
        view = {"exitCode": proc.returncode, "stdout": _parse_output(proc.stdout, body.get("parse")),
                "stderr": proc.stderr}  # fmt: skip
        problems = (
            matching.match(expected, view)
            if expected is not None
            else ([] if proc.returncode == 0 else [f"exit code {proc.returncode}: {proc.stderr.strip()[:200]}"])
        )
        return not problems, view, "; ".join(problems[:8])

    view = _poll(ctx, op, check, f"exec {shlex.join(argv)} in pod {body['pod']}")
    _capture_from(ctx, body, view, op)
    shown = matching.excerpt(expected, view) if expected is not None else {"exitCode": view["exitCode"]}
    return _outcome(op, f"exec in pod {body['pod']}: {shlex.join(argv)}", shown)


def _qty_text(value: Fraction) -> str:
    return str(int(value)) if value.denominator == 1 else str(float(value))


def capacity_view(slices: list[dict[str, Any]], claims: list[dict[str, Any]], driver: str) -> dict[str, Any]:
    """Per device of ``driver``: its capacity, what the allocated claims consume, what is free, and which claims.

    Consumption is ``dralab.model.accounting``'s (an exclusive result holds the whole device, an
    admin-access result nothing). Quantities are plain numbers as text (bytes, cores), so
    ``$quantity`` matches ``8Gi`` against them.
    """
    mine = [s for s in slices if (s.get("spec") or {}).get("driver") == driver]
    capacities = accounting.device_capacities(mine)
    nodes: dict[accounting.DeviceKey, Any] = {}  # the node of each device's slice
    for spec in (s.get("spec") or {} for s in mine):
        pool = str((spec.get("pool") or {}).get("name", ""))
        for dev in spec.get("devices") or []:
            nodes[(driver, pool, str(dev.get("name", "")))] = spec.get("nodeName")
    uses = [u for u in accounting.uses(claims, capacities) if u.known]
    consumed = accounting.per_device(uses)
    view: dict[str, Any] = {"devices": {}, "overcommitted": []}
    for key, caps in sorted(capacities.items(), key=lambda item: item[0][2]):
        used = {k: consumed.get(key, {}).get(k, Fraction(0)) for k in caps}
        free = {k: caps[k] - used[k] for k in caps}
        if any(v < 0 for v in free.values()):
            view["overcommitted"].append(key[2])
        view["devices"][key[2]] = {
            "pool": key[1],
            "node": nodes.get(key),
            "capacity": {k: _qty_text(v) for k, v in caps.items()},
            "consumed": {k: _qty_text(v) for k, v in used.items()},
            "free": {k: _qty_text(v) for k, v in free.items()},
            "claims": sorted(f"{u.namespace}/{u.claim}" for u in uses if u.device == key),
        }
    return view


@handles("device-capacity")
def op_device_capacity(ctx: Context, body: dict[str, Any], op: Operation) -> OpOutcome:
    """The driver's devices with capacity, consumed (sum over every allocated claim) and free, matched by ``expect``."""
    driver = str(body["driver"])
    node = body.get("node")
    expected = body.get("expect")
    slice_ref = Ref("resource.k8s.io/v1", "ResourceSlice", field_selector=f"spec.driver={driver}")
    claim_ref = Ref("resource.k8s.io/v1", "ResourceClaim")  # every namespace: other tenants consume too

    def check() -> tuple[bool, Any, str]:
        slices = [
            s for s in ctx.env.client.list(slice_ref) if not node or (s.get("spec") or {}).get("nodeName") == node
        ]
        if not slices:
            return False, None, f"no ResourceSlice of driver {driver}" + (f" on node {node}" if node else "")
        view = capacity_view(slices, ctx.env.client.list(claim_ref), driver)
        problems = matching.match(expected, view) if expected is not None else []
        if view["overcommitted"]:
            problems.insert(0, f"device(s) {', '.join(view['overcommitted'])} consumed beyond capacity")
        return not problems, view, "; ".join(problems[:8])

    view = _poll(ctx, op, check, f"capacity of the {driver} devices")
    captured = _capture_from(ctx, body, view, op)
    shown = matching.excerpt(expected, view) if expected is not None else view
    summary = f"{driver}: {brief(shown, limit=8)}" + ("; captured " + ", ".join(captured) if captured else "")
    return _outcome(op, summary, shown)


@handles("dralab")
def op_dralab(ctx: Context, body: dict[str, Any], op: Operation) -> OpOutcome:
    """Run one dralab command with the run's kubeconfig (once: commands such as ``migrate apply`` change things)."""
    args = [str(a) for a in body["args"]]
    env = dict(os.environ)
    if ctx.env.kubeconfig:
        env["KUBECONFIG"] = str(ctx.env.kubeconfig)
    proc = subprocess.run([sys.executable, "-m", "dralab.cli", *args], capture_output=True, text=True, env=env,
                          timeout=op.effective_timeout, check=False)
    view = {"exitCode": proc.returncode, "stdout": _parse_output(proc.stdout, body.get("parse")),
            "stderr": proc.stderr}  # fmt: skip
    expected = body.get("expect")
    problems = (
        matching.match(expected, view)
        if expected is not None
        else ([] if proc.returncode == 0 else [f"exit code {proc.returncode}: {proc.stderr.strip()[:300]}"])
    )
    if problems:
        raise StepFailed(f"dralab {shlex.join(args)}: " + "; ".join(problems[:8]))
    _capture_from(ctx, body, view, op)
    shown = matching.excerpt(expected, view) if expected is not None else {"exitCode": view["exitCode"]}
    return _outcome(op, f"dralab {shlex.join(args)}", shown, text=proc.stdout[-4000:])


@handles("probe-in-pod")
def op_probe_in_pod(ctx: Context, body: dict[str, Any], op: Operation) -> OpOutcome:
    """vcore's probe inside a running container: the CDI spec's library mount and /etc/ld.so.preload
    are what enforce the quota there, with the container's own claim env."""
    _require(ctx, "container-exec", "probe-in-pod")
    _require(ctx, "container-probe", "probe-in-pod")
    try:
        from dralab import vcore
    except ImportError as exc:
        raise UserError(f"probe-in-pod needs dralab.vcore ({exc})") from None
    vendor = vcore.normalise_vendor(str(body["vendor"]))
    steps = [int(s) for s in body["steps"]] if body.get("steps") is not None else [2050]
    argv = [PROBE_COMMAND, "--vendor", vendor, "--steps", ",".join(str(s) for s in steps), "--max-steps", "1000"]
    extra_env = [f"{k}={v}" for k, v in (body.get("env") or {}).items()]
    if extra_env:
        argv = ["env", *extra_env, *argv]
    pod = str(body["pod"])
    container = str(body["container"]) if body.get("container") else None
    cmd = _exec_command(ctx, pod, container, argv)
    expected = body.get("expect")

    def check() -> tuple[bool, Any, str]:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=op.effective_timeout, check=False)
        data = _plain(vcore.parse_probe_output(proc.stdout, proc.stderr, proc.returncode, vendor))
        if not data.get("allocations"):
            return False, data, f"probe in pod {pod} ran no allocation (exit {proc.returncode}): {proc.stderr[-300:]}"
        problems = matching.match(expected, data) if expected is not None else []
        return not problems, data, "; ".join(problems[:8])

    data = _poll(ctx, op, check, f"vcore probe in pod {pod}")
    _capture_from(ctx, body, data, op)
    shown = matching.excerpt(expected, data) if expected is not None else data
    env_cmd = _exec_command(ctx, pod, container, ["env"])
    env_out = subprocess.run(env_cmd, capture_output=True, text=True, timeout=op.effective_timeout, check=False)
    container_env = _parse_output(env_out.stdout, "env")
    claim_env = {k: v for k, v in container_env.items() if k.startswith(("NPU_", "ASCEND_", "CUDA_", "NVIDIA_"))}
    return _outcome(
        op,
        f"vcore probe inside pod {pod} (preloaded through the CDI spec): {brief(shown, limit=8)}",
        {"containerEnv": claim_env, "result": shown, "refusalLine": (data.get("refusal") or {}).get("line")},
    )


PROBE_COMMAND = "vcore-probe"  # on PATH in the node profile's lab image (dralab_kit.cluster.node.images)

