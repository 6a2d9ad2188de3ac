"""CEL selectors for claims: escaped string literals and the card-selection annotations.

Annotation values are user input. They are checked against what a ResourceSlice attribute can
hold (a value that can never match is denied, naming the annotation) and are always rendered as
escaped CEL string literals, so no value can change the expression's structure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from dralab.model.denials import Denied

# A DRA string attribute holds at most 64 bytes.
MAX_VALUE_LEN = 64
MAX_VALUES = 32
_UUID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]*$")
_TYPE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._:+()/-]*$")
_PLAIN = re.compile(r'^[\x20-\x21\x23-\x5b\x5d-\x7e]*$')  # printable ASCII without '"' and '\\'
_SIMPLE_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def string_literal(value: str) -> str:
    """``value`` as a double-quoted CEL string literal that evaluates to exactly ``value``."""
    if _PLAIN.fullmatch(value):
        return f'"{value}"'
    out = []
    for ch in value:
        if ch in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[ch])
        elif ch.isprintable() and not (0xD800 <= ord(ch) <= 0xDFFF):
            out.append(ch)
        elif ord(ch) <= 0xFFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    return '"' + "".join(out) + '"'


def list_literal(values: Iterable[str]) -> str:
    return "[" + ", ".join(string_literal(v) for v in values) + "]"


def attribute(domain: str, name: str) -> str:
    """``device.attributes["<domain>"].<name>`` (``name`` is a fixed identifier from the vendor table)."""
    return f"device.attributes[{string_literal(domain)}].{name}"


def one_of(domain: str, name: str, values: list[str], negate: bool = False) -> str:
    """The attribute equals one of ``values`` (or, negated, none of them)."""
    expr = f"{attribute(domain, name)} in {list_literal(values)}"
    return f"!({expr})" if negate else expr


def capacity_equals(domain: str, name: str, value: int) -> str:
    """The device's published capacity ``name`` is exactly ``value`` (a quantity comparison)."""
    return f"device.capacity[{string_literal(domain)}].{name}.compareTo(quantity({string_literal(str(value))})) == 0"


_ASCII_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")


def upper_ascii(value: str) -> str:
    """``value`` with ASCII letters upper-cased and nothing else changed: CEL's ``upperAscii()``."""
    return value.translate(_ASCII_UPPER)


def type_match(domain: str, name: str, values: list[str], *, substring: bool, negate: bool = False) -> str:
    """The attribute matches one of the device types ``values``, ignoring case as HAMi does.

    HAMi upper-cases both the card's type and the annotation's entry before comparing, so
    ``a100`` selects ``NVIDIA A100-SXM4-40GB``. The attribute side uses ``upperAscii()`` from the
    strings extension that Kubernetes' DRA CEL environment includes (its base environment); the
    literal side is upper-cased here. ``substring`` is HAMi's GPU matching (``contains``), else
    the whole type must be equal.
    """
    attr = f"{attribute(domain, name)}.upperAscii()"
    wanted = list(dict.fromkeys(upper_ascii(v) for v in values))  # "a100" and "A100" are one entry
    if substring:
        expr = " || ".join(f"{attr}.contains({string_literal(v)})" for v in wanted)
        if len(wanted) > 1 or negate:
            expr = f"({expr})"
    else:
        expr = f"{attr} in {list_literal(wanted)}"
        if negate:
            expr = f"({expr})"
    return f"!{expr}" if negate else expr


@dataclass(frozen=True)
class SelectionKind:
    """What a selection annotation lists: device uuids or device types."""

    noun: str
    pattern: re.Pattern[str]
    allowed: str


UUID = SelectionKind("device uuid", _UUID, "letters, digits, '.', '_', ':', '-'")
TYPE = SelectionKind("device type", _TYPE, "letters, digits, space, '.', '_', ':', '+', '(', ')', '/', '-'")


def parse_values(annotation: str, raw: object, kind: SelectionKind) -> list[str]:
    """The comma-separated list an annotation holds, each entry checked; deny what can never match."""
    field = f"metadata.annotations[{annotation}]"
    if not isinstance(raw, str):
        raise Denied(field, "must be a string of comma-separated values")
    values = [v.strip() for v in raw.split(",")]
    values = [v for v in values if v]
    if not values:
        raise Denied(field, f"names no {kind.noun}; list one or more, comma-separated, or remove the annotation")
    if len(values) > MAX_VALUES:
        raise Denied(field, f"lists {len(values)} values; at most {MAX_VALUES} are allowed")
    for value in values:
        if len(value) > MAX_VALUE_LEN or not kind.pattern.fullmatch(value):
            shown = value if len(value) <= 80 else value[:77] + "..."
            raise Denied(
                field,
                f"{shown!r} is not a valid {kind.noun} (1-{MAX_VALUE_LEN} characters: {kind.allowed}); "
                "copy the value from the ResourceSlice",
            )
    # keep order, drop repeats
    return list(dict.fromkeys(values))
