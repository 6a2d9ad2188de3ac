"""A small object-path language for reading values out of Kubernetes objects (pure).

Labs capture values with it (``spec.devices[name=npu-0-0].attributes.uuid.string``) and
``${var.path}`` uses it. Syntax, segment by segment:

- ``a.b``              mapping keys
- ``a["hami.io/dra"]``  a key that contains dots or slashes (single or double quotes)
- ``a[0]``, ``a[-1]``   list index
- ``a[name=npu-0-0]``  the first list element whose (dotted) field equals the text
- ``a[name!=x]``       the first element whose field differs
- ``a[?(@.name=="x")]`` kubectl's JSONPath filter, the same as ``a[name=x]`` (``!=`` too)
- ``a[*]``             every element; the rest of the path applies to each, giving a list
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dralab.errors import UserError


class PathError(UserError):
    """A path is malformed or does not resolve in the object."""


@dataclass(frozen=True)
class Key:
    name: str


@dataclass(frozen=True)
class Index:
    index: int


@dataclass(frozen=True)
class Filter:
    field: tuple[Any, ...]
    value: str
    negate: bool = False


@dataclass(frozen=True)
class Wildcard:
    pass


Segment = Key | Index | Filter | Wildcard

_IDENT = re.compile(r"[^.\[\]]+")
_FILTER = re.compile(r"^\s*([^=!\]]+?)\s*(!=|=)\s*(.*?)\s*$")
# kubectl's JSONPath filter: ?(@.field == "value") or ?(@.field != 'value')
_JSONPATH_FILTER = re.compile(r"""^\?\(\s*@\.?([^=!<>&|()\s]+)\s*(==|!=)\s*("[^"]*"|'[^']*'|[^\s"'()&|]+)\s*\)$""")


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def parse(path: str) -> tuple[Segment, ...]:
    """Parse ``path`` into segments; a malformed path raises PathError saying where."""
    segments: list[Segment] = []
    pos = 0
    text = path.strip()
    if not text:
        return ()
    expect_key = True
    while pos < len(text):
        ch = text[pos]
        if ch == ".":
            if expect_key:
                raise PathError(f"path {path!r}: empty segment at offset {pos}")
            pos += 1
            expect_key = True
            continue
        if ch == "[":
            end = _closing_bracket(text, pos, path)
            inner = text[pos + 1 : end].strip()
            segments.append(_bracket(inner, path))
            pos = end + 1
            expect_key = False
            continue
        match = _IDENT.match(text, pos)
        if not match or not expect_key:
            raise PathError(f"path {path!r}: unexpected {ch!r} at offset {pos}")
        segments.append(Key(match.group(0).strip()))
        pos = match.end()
        expect_key = False
    if expect_key:
        raise PathError(f"path {path!r}: ends with '.'")
    return tuple(segments)


def _closing_bracket(text: str, start: int, path: str) -> int:
    quote = ""
    for pos in range(start + 1, len(text)):
        ch = text[pos]
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "]":
            return pos
    raise PathError(f"path {path!r}: '[' at offset {start} is never closed")


def _bracket(inner: str, path: str) -> Segment:
    if inner == "*":
        return Wildcard()
    if inner[:1] in "'\"":
        return Key(_unquote(inner))
    if re.fullmatch(r"-?\d+", inner):
        return Index(int(inner))
    if inner.startswith("?"):
        return _jsonpath_filter(inner, path)
    match = _FILTER.match(inner)
    if match:
        return _filter(match.group(1), match.group(3), match.group(2) == "!=", path)
    raise PathError(
        f'path {path!r}: cannot read [{inner}] (use [0], [*], ["key"], [field=value] or [?(@.field=="value")])'
    )


def _jsonpath_filter(inner: str, path: str) -> Filter:
    """kubectl's ``?(@.field=="value")``: one comparison, == or !=, of a field with a literal."""
    match = _JSONPATH_FILTER.match(inner)
    if not match:
        raise PathError(
            f"path {path!r}: cannot read [{inner}]; a JSONPath filter compares one field with one value, "
            f'e.g. [?(@.name=="npu-0-0")] or [?(@.name!="x")]'
        )
    return _filter(match.group(1), match.group(3), match.group(2) == "!=", path)


def _filter(field_text: str, value: str, negate: bool, path: str) -> Filter:
    field = parse(field_text)
    if not field or any(not isinstance(s, Key | Index) for s in field):
        raise PathError(f"path {path!r}: filter field {field_text!r} must be a plain dotted path")
    return Filter(field=field, value=_unquote(value), negate=negate)


def text_of(value: Any) -> str:
    """How a scalar compares in a filter: YAML-ish text (``true``, ``0``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def _describe(segments: tuple[Segment, ...]) -> str:
    out = ""
    for seg in segments:
        if isinstance(seg, Key):
            out += f".{seg.name}" if _IDENT.fullmatch(seg.name) else f'["{seg.name}"]'
        elif isinstance(seg, Index):
            out += f"[{seg.index}]"
        elif isinstance(seg, Wildcard):
            out += "[*]"
        else:
            op = "!=" if seg.negate else "="
            out += f"[{_describe(seg.field).lstrip('.')}{op}{seg.value}]"
    return out.lstrip(".") or "<root>"


def _resolve(value: Any, segments: tuple[Segment, ...], done: tuple[Segment, ...]) -> Any:
    for i, seg in enumerate(segments):
        here = _describe((*done, *segments[: i + 1]))
        if isinstance(seg, Key):
            if not isinstance(value, Mapping) or seg.name not in value:
                have = ", ".join(sorted(map(str, value))) if isinstance(value, Mapping) else type(value).__name__
                raise PathError(f"{here}: not found (have: {have or 'nothing'})")
            value = value[seg.name]
        elif isinstance(seg, Index):
            if not isinstance(value, list) or not -len(value) <= seg.index < len(value):
                size = len(value) if isinstance(value, list) else type(value).__name__
                raise PathError(f"{here}: index out of range (length {size})")
            value = value[seg.index]
        elif isinstance(seg, Wildcard):
            if not isinstance(value, list):
                raise PathError(f"{here}: [*] needs a list, got {type(value).__name__}")
            rest = segments[i + 1 :]
            prefix = (*done, *segments[: i + 1])
            return [_resolve(item, rest, prefix) for item in value]
        else:
            if not isinstance(value, list):
                raise PathError(f"{here}: a filter needs a list, got {type(value).__name__}")
            value = _pick(value, seg, here)
    return value


def _pick(items: list[Any], seg: Filter, here: str) -> Any:
    seen = []
    for item in items:
        try:
            field = _resolve(item, seg.field, ())
        except PathError:
            continue
        seen.append(text_of(field))
        if (text_of(field) == seg.value) != seg.negate:
            return item
    raise PathError(f"{here}: no element matches (values seen: {', '.join(seen) or 'none'})")


def get(obj: Any, path: str | tuple[Segment, ...]) -> Any:
    """The value at ``path`` in ``obj``; PathError names the first segment that failed."""
    segments = parse(path) if isinstance(path, str) else path
    return _resolve(obj, segments, ())


def has(obj: Any, path: str) -> bool:
    """Whether ``path`` resolves in ``obj``."""
    try:
        get(obj, path)
    except PathError:
        return False
    return True
