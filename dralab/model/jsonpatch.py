"""RFC 6902 JSON Patch between two JSON documents, and applying one (for tests and offline checks).

The webhook answers with the patch from the pod it was sent to the converted pod; computing it
by difference keeps conversion a plain function from pod to pod.
"""

from __future__ import annotations

import copy
from typing import Any


def copy_json(value: Any) -> Any:
    """A deep copy of a JSON document (dicts, lists, scalars), several times faster than ``copy.deepcopy``."""
    if isinstance(value, dict):
        return {k: copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_json(v) for v in value]
    return value


def pointer_token(key: str | int) -> str:
    if isinstance(key, str) and "~" not in key and "/" not in key:
        return key
    return str(key).replace("~", "~0").replace("/", "~1")


def diff(old: Any, new: Any, path: str = "") -> list[dict[str, Any]]:
    """Operations that turn ``old`` into ``new``: recursive for mappings and equal-length lists.

    Values in the operations are shared with ``new`` (they are serialized right away); copy before mutating.
    """
    if old == new:
        return []
    if isinstance(old, dict) and isinstance(new, dict):
        ops: list[dict[str, Any]] = []
        for key in old:
            if key not in new:
                ops.append({"op": "remove", "path": f"{path}/{pointer_token(key)}"})
        for key, value in new.items():
            sub = f"{path}/{pointer_token(key)}"
            if key not in old:
                ops.append({"op": "add", "path": sub, "value": value})
            else:
                ops.extend(diff(old[key], value, sub))
        return ops
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        ops = []
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            ops.extend(diff(a, b, f"{path}/{i}"))
        return ops
    return [{"op": "replace", "path": path, "value": new}]


def _parse_pointer(path: str) -> list[str]:
    if path == "":
        return []
    return [t.replace("~1", "/").replace("~0", "~") for t in path.split("/")[1:]]


def apply(doc: Any, ops: list[dict[str, Any]]) -> Any:
    """Apply add/remove/replace operations (what :func:`diff` emits) to a copy of ``doc``."""
    out = copy.deepcopy(doc)
    for op in ops:
        tokens = _parse_pointer(op["path"])
        if not tokens:
            out = copy.deepcopy(op["value"])
            continue
        parent = out
        for token in tokens[:-1]:
            parent = parent[int(token)] if isinstance(parent, list) else parent[token]
        last = tokens[-1]
        kind = op["op"]
        if isinstance(parent, list):
            index = len(parent) if last == "-" else int(last)
            if kind == "add":
                parent.insert(index, copy.deepcopy(op["value"]))
            elif kind == "remove":
                del parent[index]
            else:
                parent[index] = copy.deepcopy(op["value"])
        else:
            if kind == "remove":
                del parent[last]
            elif kind == "replace" and last not in parent:
                raise KeyError(f"replace of missing member {op['path']}")
            else:
                parent[last] = copy.deepcopy(op["value"])
    return out
