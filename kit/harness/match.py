"""Partial object matching with simple expressions, as lab assertions use it (pure).

``match(expected, actual)`` returns the list of mismatches (empty: it matches):

- a mapping matches when every key it names matches in ``actual`` (other keys are ignored);
- a list matches a list of the same length element by element;
- a scalar must be equal (and of the same kind: ``"50"`` is not ``50``);
- a mapping whose keys all start with ``$`` is an operator:

  ``$eq`` ``$ne`` ``$in`` ``$notIn`` ``$regex`` ``$contains`` (substring, or some list item
  matches) ``$startsWith`` ``$len`` ``$gt`` ``$gte`` ``$lt`` ``$lte`` (numbers or Kubernetes
  quantities) ``$quantity`` (equal as quantities: ``8Gi`` == ``8589934592``) ``$each`` (every
  list item matches) ``$distinct`` (list items pairwise different) ``$exists`` / ``$absent``
  (the key is there or not) ``$any`` / ``$all`` (lists of matchers) ``$not`` (a matcher).

``excerpt(expected, actual)`` keeps only the parts of ``actual`` that ``expected`` talks about:
the live evidence a report shows next to an assertion.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from dralab.errors import UserError
from dralab.model.quantity import parse_quantity

_MISSING = object()

OPERATORS = (
    "$eq", "$ne", "$in", "$notIn", "$regex", "$contains", "$startsWith", "$len", "$gt", "$gte", "$lt", "$lte",
    "$quantity", "$each", "$distinct", "$exists", "$absent", "$any", "$all", "$not",
)  # fmt: skip


class MatchSyntaxError(UserError):
    """An expected value uses an unknown operator or a wrong operand."""


def leaves(value: Any, path: str = "") -> list[tuple[str, Any]]:
    """Every scalar in ``value`` with its path, in document order (for one-line evidence)."""
    if isinstance(value, Mapping):
        return [pair for k, v in value.items() for pair in leaves(v, _join(path, k))]
    if isinstance(value, list):
        return [pair for i, v in enumerate(value) for pair in leaves(v, _join(path, i))]
    return [(path, value)]


def is_operator(value: Any) -> bool:
    return isinstance(value, Mapping) and bool(value) and all(isinstance(k, str) and k.startswith("$") for k in value)


def _show(value: Any) -> str:
    if value is _MISSING:
        return "<missing>"
    text = json.dumps(value, default=str, sort_keys=True)
    return text if len(text) <= 200 else text[:197] + "..."


def _join(path: str, key: Any) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    key = str(key)
    if re.fullmatch(r"[A-Za-z0-9_-]+", key):
        return f"{path}.{key}" if path else key
    return f'{path}["{key}"]'


def _number(value: Any, where: str) -> Fraction:
    if isinstance(value, bool):
        raise ValueError(f"{where}: {value!r} is not a number")
    if isinstance(value, int | float):
        return Fraction(value)
    return parse_quantity(str(value), where).value


def validate(expected: Any, where: str = "match") -> None:
    """Raise MatchSyntaxError for unknown operators anywhere in ``expected`` (checked when a lab loads)."""
    if isinstance(expected, Mapping):
        if is_operator(expected):
            for op, operand in expected.items():
                if op not in OPERATORS:
                    raise MatchSyntaxError(f"{where}: unknown operator {op} (known: {', '.join(OPERATORS)})")
                if op in ("$each", "$not", "$contains"):
                    validate(operand, f"{where}.{op}")
                elif op in ("$any", "$all"):
                    if not isinstance(operand, list):
                        raise MatchSyntaxError(f"{where}.{op}: needs a list of matchers")
                    for i, sub in enumerate(operand):
                        validate(sub, f"{where}.{op}[{i}]")
                elif op in ("$in", "$notIn") and not isinstance(operand, list):
                    raise MatchSyntaxError(f"{where}.{op}: needs a list of values")
                elif op == "$regex":
                    try:
                        re.compile(str(operand))
                    except re.error as exc:
                        raise MatchSyntaxError(f"{where}.$regex: invalid regular expression ({exc})") from None
            return
        for key, sub in expected.items():
            validate(sub, _join(where, key))
    elif isinstance(expected, list):
        for i, sub in enumerate(expected):
            validate(sub, f"{where}[{i}]")


def match(expected: Any, actual: Any, path: str = "") -> list[str]:
    """Mismatches of ``actual`` against ``expected``, each as ``path: what was wrong``."""
    where = path or "<root>"
    if is_operator(expected):
        return _operators(expected, actual, path)
    if actual is _MISSING:
        if isinstance(expected, Mapping) and expected:
            # a missing mapping is checked key by key, so {allocation: {$absent: true}} holds
            return [m for key, sub in expected.items() for m in match(sub, _MISSING, _join(path, key))]
        return [f"{where}: missing (expected {_show(expected)})"]
    if isinstance(expected, Mapping):
        if not isinstance(actual, Mapping):
            return [f"{where}: expected a mapping, got {_show(actual)}"]
        out: list[str] = []
        for key, sub in expected.items():
            out += match(sub, actual.get(key, _MISSING), _join(path, key))
        return out
    if isinstance(expected, list):
        if not isinstance(actual, list):
            return [f"{where}: expected a list, got {_show(actual)}"]
        if len(expected) != len(actual):
            return [f"{where}: expected {len(expected)} items, got {len(actual)}: {_show(actual)}"]
        out = []
        for i, (sub, item) in enumerate(zip(expected, actual, strict=True)):
            out += match(sub, item, _join(path, i))
        return out
    if type(expected) is not type(actual) and not (_is_num(expected) and _is_num(actual)):
        return [f"{where}: expected {_show(expected)}, got {_show(actual)}"]
    if expected != actual:
        return [f"{where}: expected {_show(expected)}, got {_show(actual)}"]
    return []


def _is_num(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def matches(expected: Any, actual: Any) -> bool:
    return not match(expected, actual)


def _operators(ops: Mapping[str, Any], actual: Any, path: str) -> list[str]:
    out: list[str] = []
    for op, operand in ops.items():
        out += _operator(op, operand, actual, path)
    return out


def _operator(op: str, operand: Any, actual: Any, path: str) -> list[str]:
    where = path or "<root>"
    fail = [f"{where}: expected {op} {_show(operand)}, got {_show(actual)}"]
    if op == "$exists":
        return [] if (actual is not _MISSING) == bool(operand) else fail
    if op == "$absent":
        return [] if (actual is _MISSING) == bool(operand) else fail
    if op == "$not":
        return fail if matches(operand, actual) else []
    if op == "$any":
        return [] if any(matches(sub, actual) for sub in operand) else fail
    if op == "$all":
        return [m for sub in operand for m in match(sub, actual, path)]
    if actual is _MISSING:
        return [f"{where}: missing (expected {op} {_show(operand)})"]
    if op == "$eq":
        return match(operand, actual, path)
    if op == "$ne":
        return fail if matches(operand, actual) else []
    if op == "$in":
        return [] if any(matches(v, actual) for v in operand) else fail
    if op == "$notIn":
        return fail if any(matches(v, actual) for v in operand) else []
    if op == "$regex":
        return [] if isinstance(actual, str) and re.search(str(operand), actual) else fail
    if op == "$startsWith":
        return [] if isinstance(actual, str) and actual.startswith(str(operand)) else fail
    if op == "$contains":
        if isinstance(actual, str):
            return [] if str(operand) in actual else fail
        if isinstance(actual, list):
            return [] if any(matches(operand, item) for item in actual) else fail
        if isinstance(actual, Mapping):
            return [] if matches(operand, actual) else fail
        return fail
    if op == "$len":
        if not isinstance(actual, list | str | Mapping):
            return fail
        if matches(operand, len(actual)):
            return []
        return [f"{where}: expected length {_show(operand)}, got {len(actual)}"]
    if op == "$each":
        if not isinstance(actual, list):
            return fail
        return [m for i, item in enumerate(actual) for m in match(operand, item, _join(path, i))]
    if op == "$distinct":
        if not isinstance(actual, list):
            return fail
        keys = [json.dumps(v, sort_keys=True, default=str) for v in actual]
        return [] if (len(set(keys)) == len(keys)) == bool(operand) else fail
    if op in ("$gt", "$gte", "$lt", "$lte", "$quantity"):
        try:
            left, right = _number(actual, where), _number(operand, f"{where} {op}")
        except (UserError, ValueError):
            return fail
        ok = {
            "$gt": left > right,
            "$gte": left >= right,
            "$lt": left < right,
            "$lte": left <= right,
            "$quantity": left == right,
        }[op]
        return [] if ok else fail
    raise MatchSyntaxError(f"{where}: unknown operator {op}")


_SIZE_ONLY = {"$len", "$distinct", "$exists", "$absent"}


def excerpt(expected: Any, actual: Any) -> Any:
    """The part of ``actual`` that ``expected`` names: what an assertion looked at."""
    if is_operator(expected) and set(expected) <= _SIZE_ONLY and isinstance(actual, list | Mapping):
        return f"<{len(actual)} items>"
    if is_operator(expected) or not isinstance(expected, Mapping | list):
        return actual
    if isinstance(expected, Mapping) and isinstance(actual, Mapping):
        return {k: excerpt(v, actual[k]) for k, v in expected.items() if k in actual}
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        return [excerpt(e, a) for e, a in zip(expected, actual, strict=True)]
    return actual
