"""HAMi request values (count, memory, cores) read the way HAMi reads them, exactly.

The apiserver canonicalizes quantities before a webhook sees them (``14000`` arrives as
``14k``), so the suffix alone cannot tell a user's unit: no suffix or a decimal suffix is a
count of MiB (HAMi reads the number), a binary suffix can only come from the user and means
bytes. Milli and fractional values are refused, never rounded.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from dralab.errors import UserError
from dralab.model.denials import Denied
from dralab.model.quantity import BINARY, MIB, Quantity, parse_quantity

MAX_CORES = 100
# Upper bounds of what one container may ask for. A larger value is a typo or an attack: it would make a
# claim no node can ever satisfy, so it is refused at admission, naming the field.
MAX_DEVICES = 64
MAX_MEMORY_BYTES = 2**50  # 1 PiB per device
# Whole numbers with an optional suffix: nearly every real request; parsed without Fractions.
_WHOLE = re.compile(r"^(\d{1,20})(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$")
_WHOLE_SCALE = {**BINARY, "": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}


def _parse(text: object, field: str) -> Quantity:
    raw = text if isinstance(text, str) else str(text)
    whole = _WHOLE.fullmatch(raw)
    if whole:
        number, suffix = int(whole[1]), whole[2] or ""
        return Quantity(text=raw, number=number, suffix=suffix, value=number * _WHOLE_SCALE[suffix])  # type: ignore[arg-type]
    try:
        return parse_quantity(raw, field)
    except UserError as exc:
        detail = str(exc).removeprefix(f"{field}: ")
        if len(raw) <= 40 and "not a valid quantity" in detail:
            detail = f"{raw!r} is not a valid quantity; write a whole number such as 8192"
        raise Denied(field, detail) from None


def device_count(text: object, field: str) -> int:
    """The number of devices: a whole number of at least 1."""
    q = _parse(text, field)
    if not q.is_integer:
        raise Denied(field, f"{q.text!r} is not a whole number of devices; request 1 or more")
    if q.value < 1:
        raise Denied(field, f"{q.text!r} requests no device; request 1 or more, or remove the resource")
    if q.value > MAX_DEVICES:
        raise Denied(field, f"{q.text!r} devices is more than {MAX_DEVICES}, the most one container may request")
    return int(q.value)


def memory_bytes(text: object, field: str) -> int:
    """Device memory in bytes: ``8192``/``14k`` are MiB (HAMi's unit), ``16Gi`` is bytes."""
    q = _parse(text, field)
    if q.suffix in ("n", "u", "m"):
        raise Denied(field, f"{q.text!r} is a milli/micro quantity; memory is a whole number of MiB such as 8192")
    if q.value <= 0:
        raise Denied(field, f"{q.text!r} requests no memory; request a positive number of MiB or remove the resource")
    if q.is_binary:
        if not q.is_integer:
            raise Denied(field, f"{q.text!r} is not a whole number of bytes; use a whole MiB count such as 8192")
        value: Fraction | int = int(q.value)
    elif not q.is_integer:
        raise Denied(field, f"{q.text!r} is not a whole number of MiB; memory is a whole number of MiB such as 8192")
    else:
        value = q.value * MIB if q.value <= MAX_MEMORY_BYTES else q.value  # no multiplication of absurd values
    if value > MAX_MEMORY_BYTES:
        raise Denied(field, f"{q.text!r} is more than 1 PiB of device memory; request a real device share in MiB")
    return int(value)


def cores_percent(text: object, field: str) -> int:
    """Compute share in percent of one device: a whole number from 0 to 100."""
    q = _parse(text, field)
    if not q.is_integer:
        raise Denied(field, f"{q.text!r} is not a whole percentage; request 0 to {MAX_CORES}")
    value = int(q.value)
    if value < 0 or value > MAX_CORES:
        raise Denied(field, f"{q.text!r} is outside 0..{MAX_CORES}; cores are a percentage of one device")
    return value


def compute_units(percent: int, reference: int) -> int:
    """``percent`` of a card with ``reference`` compute units: ``ceil(pct * reference / 100)``, at least 1.

    0 stays 0: no compute reservation.
    """
    if percent == 0:
        return percent
    return max(1, math.ceil(Fraction(percent * reference, 100)))


def same_quantity(a: object, b: object) -> bool:
    """Whether two quantity texts are the same value (``14000`` and ``14k``)."""
    if str(a) == str(b):
        return True
    try:
        return parse_quantity(str(a)).value == parse_quantity(str(b)).value
    except UserError:
        return str(a) == str(b)
