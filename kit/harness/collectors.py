"""Diagnostics collected when a step fails: events, describe-like dumps, component logs.

Collectors never fail a step themselves: what they cannot read they say in their text, so the
report of a failed run always shows what could be seen.
"""

from __future__ import annotations

import fnmatch
from collections import deque
from pathlib import Path
from typing import Any

import yaml

from harness.ops import Context, _outcome, _ref
from harness.registry import handles
from harness.resources import Ref
from harness.results import OpOutcome
from harness.schema import Operation

DEFAULT_LOG_COMPONENTS = ("webhook", "driver*", "kubelet*", "scheduler", "controller-manager")
_DROP_META = ("managedFields",)


def _event_line(event: dict[str, Any]) -> str:
    obj = event.get("involvedObject") or event.get("regarding") or {}
    when = (
        event.get("lastTimestamp")
        or event.get("eventTime")
        or (event.get("metadata") or {}).get("creationTimestamp", "")
    )
    count = event.get("count") or ((event.get("series") or {}).get("count")) or 1
    message = str(event.get("message") or event.get("note") or "").replace("\n", " ")
    return f"{when}  {event.get('type', '')}  {event.get('reason', '')}  {obj.get('kind', '')}/{obj.get('name', '')}  (x{count})  {message}"  # noqa: E501


@handles("events")
def collect_events(ctx: Context, body: dict[str, Any], op: Operation) -> OpOutcome:
    ref = Ref("v1", "Event", namespace=ctx.namespace)
    if body.get("resource"):
        target = _ref(ctx, body, op)
        if target.name:
            ref = Ref("v1", "Event", namespace=target.namespace or ctx.namespace,
                      field_selector=f"involvedObject.name={target.name}")  # fmt: skip
    events = ctx.env.client.list(ref)
    reasons = body.get("reasons")
    if reasons:
        events = [e for e in events if e.get("reason") in reasons]
    events.sort(key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))
    text = "\n".join(_event_line(e) for e in events) or "(no events)"
    return _outcome(op, f"{len(events)} event(s) in {ref.namespace}", text=text)


def _clean(obj: dict[str, Any]) -> dict[str, Any]:
    meta = dict(obj.get("metadata") or {})
    for key in _DROP_META:
        meta.pop(key, None)
    return {**obj, "metadata": meta}


@handles("describe")
def collect_describe(ctx: Context, body: dict[str, Any], op: Operation) -> OpOutcome:
    ref = _ref(ctx, body, op)
    objects = ctx.env.client.list(ref) if ref.is_list else [o for o in [ctx.env.client.get(ref)] if o]
    parts = []
    for obj in objects:
        name = (obj.get("metadata") or {}).get("name")
        part = f"--- {obj.get('kind', ref.kind)} {name}\n" + yaml.safe_dump(_clean(obj), sort_keys=False)
        if ref.namespaced and name:
            events = ctx.env.client.list(Ref("v1", "Event", namespace=ref.namespace or ctx.namespace,
                                             field_selector=f"involvedObject.name={name}"))  # fmt: skip
            if events:
                part += "Events:\n" + "\n".join("  " + _event_line(e) for e in events) + "\n"
        parts.append(part)
    text = "\n".join(parts) or f"(no {ref.describe()})"
    return _outcome(op, f"described {len(objects)} {ref.kind}(s)", text=text)


def _tail(path: Path, lines: int) -> str:
    with path.open(errors="replace") as fh:
        return "".join(deque(fh, maxlen=lines))


def log_files(logs_dir: Path, patterns: list[str] | tuple[str, ...]) -> list[tuple[str, Path]]:
    """Log files under ``logs_dir`` whose component name matches a pattern (``driver/*`` or ``driver*``)."""
    found = []
    for path in sorted(logs_dir.rglob("*.log")):
        component = str(path.relative_to(logs_dir).with_suffix(""))
        if any(fnmatch.fnmatch(component, p) or fnmatch.fnmatch(component.replace("/", "-"), p.replace("/", "-"))
               for p in patterns):  # fmt: skip
            found.append((component, path))
    return found


@handles("logs")
def collect_logs(ctx: Context, body: dict[str, Any], op: Operation) -> OpOutcome:
    logs_dir = ctx.env.logs_dir
    if "component-logs" not in ctx.env.capabilities or logs_dir is None:
        return _outcome(op, "component logs are not observable on this profile", text="(no logs)")
    patterns = list(body.get("components") or DEFAULT_LOG_COMPONENTS)
    lines = int(body.get("tail", 80))
    files = log_files(Path(logs_dir), patterns)
    text = "\n".join(f"==> {component} ({path}) <==\n{_tail(path, lines)}" for component, path in files)
    return _outcome(op, f"tail of {len(files)} component log(s)", text=text or f"(no logs matching {patterns})")
