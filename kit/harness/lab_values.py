"""Values of the lab format: their types, the checks with a one-line hint each, and how a check fails.

A validator here raises :func:`problem` (the message follows the field's path) or :func:`named`
(a helper such as :func:`harness.resources.parse_ref` already wrote the field's name first);
:mod:`harness.lab_errors` turns both into ``<file>: <path>: <message>``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, ValidationInfo, WithJsonSchema
from pydantic_core import PydanticCustomError
from typing_extensions import TypeAliasType

from dralab.errors import UserError
from harness import match as matching
from harness.resources import parse_ref

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
VAR_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
AT_FIELD = "lab_at_field"  # message follows the failing field's path
NAMES_FIELD = "lab_names_field"  # message starts with the failing field's own name


def problem(message: str, at: str = "") -> PydanticCustomError:
    """An error whose message follows its path (``<path>[.at]: message``)."""
    return PydanticCustomError(AT_FIELD, "{message}", {"message": message, "at": at})


def named(message: str) -> PydanticCustomError:
    """An error from a helper that wrote the field's own name first (``resource: ...``)."""
    return PydanticCustomError(NAMES_FIELD, "{message}", {"message": message})


def seconds(value: Any) -> float:
    """Seconds from ``30``, ``"30s"``, ``"2m"``, ``"500ms"``, ``"1h"``; ValueError says how to write one."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    found = None if isinstance(value, bool) else _DURATION.match(str(value))
    if not found:
        raise ValueError(f"{value!r} is not a duration (write 30s, 2m or a number of seconds)")
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}[found.group(2)]
    return float(found.group(1)) * scale


def _duration(value: Any) -> float:
    try:
        return seconds(value)
    except ValueError as exc:
        raise problem(str(exc)) from None


def _strings(value: Any) -> Any:
    if value is None or isinstance(value, str):
        return value
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise problem("must be a list of strings")
    return value


def dns_label(what: str, value: Any) -> Any:
    if not isinstance(value, str) or not DNS_LABEL.fullmatch(value):
        raise problem(f"{what} (got {value!r})")
    return value


def mapping_or_empty(value: Any) -> Any:
    """``None`` is empty; anything but a mapping is refused."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise problem("must be a mapping")
    return dict(value)


def _variables(value: Any) -> Any:
    """``{variable: where to read it}``: the names must be usable as ``${name}``."""
    value = mapping_or_empty(value)
    for var in value:
        if not VAR_NAME.fullmatch(str(var)):
            raise problem(f"{var!r} is not a valid variable name")
    return value


def _resource(value: Any) -> Any:
    try:
        parse_ref(value, "resource")
    except UserError as exc:
        raise named(str(exc)) from None
    return value


def _matcher(value: Any, info: ValidationInfo) -> Any:
    try:
        matching.validate(value, str(info.field_name))
    except UserError as exc:
        raise named(str(exc)) from None
    return value


def _manifests(value: Any, info: ValidationInfo) -> Any:
    """Manifest files must exist next to the lab (when the context names its folder)."""
    names = _strings(value)
    lab_dir = (info.context or {}).get("lab_dir")
    for name in [names] if isinstance(names, str) else names or []:
        if lab_dir is not None and not (Path(lab_dir) / name).is_file():
            raise problem(f"{name} not found next to the lab ({lab_dir})")
    return value


def shaped(check: type | tuple[type, ...], hint: str, nonempty: bool = False) -> BeforeValidator:
    """A value of type ``check`` (non-empty if asked), else the hint says what to write."""

    def run(value: Any) -> Any:
        if not isinstance(value, check) or (nonempty and not value):
            raise problem(hint)
        return value

    return BeforeValidator(run)


# named types are defined once in the schema's $defs, under the alias's name; mypy wants that name to
# be the variable's, so the aliases are bound under their $defs names and then under the names we use
duration = TypeAliasType(
    "duration",
    Annotated[
        float,
        BeforeValidator(_duration),
        WithJsonSchema({"anyOf": [{"type": "number"}, {"type": "string", "pattern": _DURATION.pattern}]}),
    ],
)
strings = TypeAliasType("strings", Annotated[str | list[str] | None, BeforeValidator(_strings)])
Seconds = duration
Strings = strings
Resource = Annotated[Any, AfterValidator(_resource), Field(description="Kind/name, Kind, or {kind, name, ...}")]
Matcher = Annotated[Any, AfterValidator(_matcher), Field(description="a partial object; $operators allowed")]
Variables = Annotated[dict[str, Any], BeforeValidator(_variables)]
Manifests = Annotated[str | list[str], BeforeValidator(_manifests)]
Absent = Annotated[bool, shaped(bool, "must be true or false")]
Mapping_ = Annotated[dict[str, Any] | None, BeforeValidator(mapping_or_empty)]


def tuple_of(value: str | list[str] | None) -> tuple[str, ...]:
    """A :data:`Strings` value as a tuple (one string is a list of one)."""
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)
