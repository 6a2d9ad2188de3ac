"""pydantic validation errors as dralab's one-line ``UserError``: the field path, what is wrong, the fix.

Typed models (pydantic v2) describe dralab's file formats and export their JSON Schema; this
module keeps their errors as plain as hand-written checks were: ``<source>: <path> <problem>``,
one line, naming the valid keys or values. A validator whose message already names its field
raises :func:`fail`; a plain ``ValueError`` from a field validator gets the field's path in front.
"""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic.json_schema import GenerateJsonSchema
from pydantic_core import PydanticCustomError

from dralab.errors import UserError

_OWN = "dralab_message"


def fail(message: str) -> PydanticCustomError:
    """An error whose message is complete (it names its field): raise it from a validator."""
    return PydanticCustomError(_OWN, "{message}", {"message": message})


def dotted(loc: tuple[str | int, ...]) -> str:
    """``("hosts", 0, "role")`` as ``hosts[0].role``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _model_at(model: type[BaseModel], loc: tuple[str | int, ...]) -> type[BaseModel] | None:
    """The model class found at ``loc`` inside ``model`` (through lists, tuples, dicts and optionals)."""
    current: Any = model
    for part in loc:
        current = _unwrap(current)
        if isinstance(part, int) or not (isinstance(current, type) and issubclass(current, BaseModel)):
            continue
        info = current.model_fields.get(str(part))
        if info is None:
            return None
        current = info.annotation
    current = _unwrap(current)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _unwrap(annotation: Any) -> Any:
    """The model inside ``X | None``, ``list[X]``, ``tuple[X, ...]`` or ``dict[str, X]``."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType, list, tuple, dict):
        for arg in typing.get_args(annotation):
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                return arg
    return annotation


def field_names(model: type[BaseModel]) -> list[str]:
    """The keys a model accepts, as written in the file (aliases where set)."""
    return sorted(info.alias or name for name, info in model.model_fields.items())


def one_line(exc: ValidationError, model: type[BaseModel], key_prefix: str = "", root: str = "") -> str:
    """The first problem of ``exc`` as one line; unknown or missing keys of one mapping come together.

    ``key_prefix`` goes before top-level keys in paths (``dralab:`` for Pulumi config keys);
    ``root`` names the top-level mapping in messages about its keys (``unknown config key(s)``).
    """
    errors = exc.errors()
    first = errors[0]
    loc = tuple(first["loc"])
    parent = loc[:-1]
    parent_path = key_prefix + dotted(parent) if parent else ""
    siblings = [
        str(e["loc"][-1]) for e in errors if e["loc"] and e["type"] == first["type"] and tuple(e["loc"][:-1]) == parent
    ]
    if first["type"] == "extra_forbidden":
        owner = _model_at(model, parent)
        valid = f" (valid: {', '.join(field_names(owner))})" if owner is not None else ""
        if parent:
            return f"unknown key(s) {', '.join(siblings)} in {parent_path}{valid}"
        where = f"{root} " if root else ""
        return f"unknown {where}key(s) {', '.join(key_prefix + k for k in siblings)}{valid}"
    if first["type"] == "missing":
        if parent and not isinstance(loc[-1], int):
            return f"{parent_path} lacks {', '.join(siblings)}"
        return f"'{key_prefix}{dotted(loc)}' is required"
    if first["type"] == _OWN:
        return str(first["ctx"]["message"])
    path = key_prefix + dotted(loc) if loc else ""
    message = first["msg"].removeprefix("Value error, ")
    if first["type"] == "value_error":
        return f"{path} {message}" if path else message
    got = f" (got {first['input']!r})" if "input" in first and not isinstance(first["input"], dict) else ""
    return f"{path}: {message[0].lower()}{message[1:]}{got}" if path else f"{message}{got}"


def validate(model: type[BaseModel], data: Any, source: str, key_prefix: str = "", root: str = "") -> Any:
    """``model.model_validate(data)``, or a ``UserError`` ``"<source>: <one line>"``."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        prefix = f"{source}: " if source else ""
        raise UserError(prefix + one_line(exc, model, key_prefix, root)) from None


def json_schema(
    model: type[BaseModel], title: str, description: str, generator: type[GenerateJsonSchema] = GenerateJsonSchema
) -> dict[str, Any]:
    """The model's JSON Schema (draft 2020-12) for editors, with a title and description.

    ``generator``: pydantic's schema generator, or a subclass that tunes its output.
    """
    schema = model.model_json_schema(by_alias=True, schema_generator=generator)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        **schema,
        "title": title,
        "description": description,
    }
