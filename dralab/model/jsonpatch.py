"""RFC 6902 JSON Patch between two JSON documents, and applying one (for tests and offline checks).

The webhook answers with the patch from the pod it was sent to the converted pod; computing it
by difference keeps conversion a plain function from pod to pod. The difference and its
application come from the ``jsonpatch`` library: it compares values as JSON (so ``1`` and
``true`` differ, which Python's ``==`` does not see) and is kept by others. This module only
fixes the calling convention dralab uses: plain lists of operation dicts, never mutating inputs.
"""

from __future__ import annotations

import functools
from typing import Any

import jsonpatch as _lib


def copy_json(value: Any) -> Any:
    """A deep copy of a JSON document (dicts, lists, scalars), several times faster than ``copy.deepcopy``."""
    if isinstance(value, dict):
        return {k: copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_json(v) for v in value]
    return value


def diff(old: Any, new: Any) -> list[dict[str, Any]]:
    """Operations that turn ``old`` into ``new`` (empty when they are equal as JSON)."""
    return list(_lib.JsonPatch.from_diff(old, new).patch)


_MISSING = object()


def _at(doc: Any, parts: tuple[str | int, ...]) -> Any:
    for part in parts:
        if isinstance(doc, dict):
            doc = doc.get(part, _MISSING)
            if doc is _MISSING:
                return _MISSING
        elif isinstance(doc, list) and isinstance(part, int) and 0 <= part < len(doc):
            doc = doc[part]
        else:
            return _MISSING
    return doc


def subtree_ops(old: Any, new: Any, paths: list[tuple[str | int, ...]]) -> list[dict[str, Any]]:
    """Operations that turn ``old`` into ``new`` when they differ only inside the subtrees at ``paths``.

    The converter knows where it writes, so it need not search both pods for differences (the library's
    full difference costs more than the conversion). Each subtree is replaced, added at its highest
    missing ancestor, or removed (a subtree present in both is replaced even if equal); pointers are
    escaped by the ``jsonpatch`` library. The operations are not re-parsed per admission (that cost as
    much as the conversion); the tests apply them with the library to every converted pod. Callers
    must name every place they change: the result is exact only then.
    """
    ops: list[dict[str, Any]] = []
    seen: set[tuple[str | int, ...]] = set()
    for path in paths:
        before, after = _at(old, path), _at(new, path)
        if before is not _MISSING and after is not _MISSING:
            if before is after:
                continue
            where, op, value = path, "replace", after
        elif after is not _MISSING:  # add the highest missing ancestor whole
            where = path
            while len(where) > 1 and _at(old, where[:-1]) is _MISSING:
                where = where[:-1]
            op, value = "add", _at(new, where)
        elif before is not _MISSING:
            where, op, value = path, "remove", _MISSING
        else:
            continue
        if where in seen:
            continue
        seen.add(where)
        ops.append({"op": op, "path": pointer(where)} if value is _MISSING else
                   {"op": op, "path": pointer(where), "value": value})
    return ops


@functools.lru_cache(maxsize=4096)
def pointer(parts: tuple[str | int, ...]) -> str:
    """The JSON pointer of ``parts``, escaped by the library (cached: pods touch the same few places)."""
    return _lib.JsonPointer.from_parts(list(parts)).path


def apply(doc: Any, ops: list[dict[str, Any]]) -> Any:
    """Apply ``ops`` to a copy of ``doc``; a patch that does not fit raises ``jsonpatch.JsonPatchException``."""
    return _lib.apply_patch(doc, ops, in_place=False)
