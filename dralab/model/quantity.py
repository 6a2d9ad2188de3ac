"""Kubernetes resource quantities: parsing and formatting, exactly (no floats).

A quantity is ``<signed number><suffix>`` where the suffix is binary (Ki..Ei), decimal
(n, u, m, "", k, M, G, T, P, E) or a decimal exponent (e3, E6). Values are kept as
``Fraction`` so "0.5Gi" and "512Mi" compare equal without rounding.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from dralab.errors import UserError

BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
MIB = 2**20
# Bounds checked on the text, before any arithmetic: exact arithmetic on "1e9999999" or on thousands of
# digits takes seconds (and int() of more than 4300 digits raises). No real quantity comes near them.
MAX_TEXT = 64
MAX_EXPONENT = 64

_QUANTITY = re.compile(r"^(?P<num>[+-]?(?:\d+\.?\d*|\.\d+))(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$")


@dataclass(frozen=True)
class Quantity:
    """A parsed quantity: the number as written, its suffix, and its exact value."""

    text: str
    number: Fraction
    suffix: str
    value: Fraction

    @property
    def is_binary(self) -> bool:
        return self.suffix in BINARY

    @property
    def is_integer(self) -> bool:
        return self.value.denominator == 1


def parse_quantity(text: str | int, what: str = "quantity") -> Quantity:
    """Parse ``text`` as a Kubernetes quantity; ``what`` names it in the error message."""
    raw = str(text).strip()
    if len(raw) > MAX_TEXT:
        raise UserError(
            f"{what}: {raw[:20]!r}... is {len(raw)} characters long; a quantity has at most {MAX_TEXT} "
            "(write it with a suffix such as 16Gi or 14k)"
        )
    try:
        return _parse(raw)
    except _Invalid as exc:
        raise UserError(f"{what}: {exc}") from None


class _Invalid(ValueError):
    """Why a quantity's text is refused (its field is named by :func:`parse_quantity`)."""


@lru_cache(maxsize=4096)
def _parse(raw: str) -> Quantity:
    """The quantity of ``raw`` (at most MAX_TEXT characters), remembered: a fleet's claims, slices and pods
    repeat a handful of texts ("8Gi", "50") thousands of times, and exact parsing is the monitor's and the
    accounting's largest cost per claim. Quantities are frozen, so a remembered one is safe to share;
    refusals are not remembered."""
    match = _QUANTITY.match(raw)
    if not match:
        raise _Invalid(
            f"{raw!r} is not a valid quantity (expected a number with an optional suffix such as 8192, 14k, 16Gi)"
        )
    number = Fraction(match["num"])
    suffix = match["suffix"] or ""
    if suffix in BINARY:
        scale = Fraction(BINARY[suffix])
    elif suffix in DECIMAL:
        scale = DECIMAL[suffix]
    else:  # exponent form
        exponent = int(suffix[1:])
        if abs(exponent) > MAX_EXPONENT:
            raise _Invalid(
                f"{raw!r} has exponent {exponent}; exponents beyond +-{MAX_EXPONENT} are refused "
                "(write the value with a suffix such as 16Gi or 14k)"
            )
        scale = Fraction(10) ** exponent
    return Quantity(text=raw, number=number, suffix=suffix, value=number * scale)


def quantity_value(text: str | int, what: str = "quantity") -> Fraction:
    """The exact numeric value of a quantity."""
    return parse_quantity(text, what).value


def to_int(text: str | int, what: str = "quantity") -> int:
    """The value of a quantity that must be a whole number (e.g. bytes or cores)."""
    q = parse_quantity(text, what)
    if not q.is_integer:
        raise UserError(f"{what}: {q.text!r} must be a whole number")
    return int(q.value)


def format_binary(value: int) -> str:
    """The canonical text the apiserver uses for an integer byte count: the largest exact binary suffix.

    ``8589934592`` -> ``8Gi``; ``22571646976`` -> ``21525Mi``; values that are not a multiple of 1024
    stay plain.
    """
    if value == 0:
        return "0"
    for suffix, scale in sorted(BINARY.items(), key=lambda kv: -kv[1]):
        if value % scale == 0:
            return f"{value // scale}{suffix}"
    return str(value)


def mib(value_bytes: int | Fraction) -> int:
    """Bytes to whole MiB, rounding up (a quota never shrinks below what was granted)."""
    whole = Fraction(value_bytes)
    return int(-(-whole // MIB))
