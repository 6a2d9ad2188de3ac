"""A lab's pydantic errors as one line: ``<file>: steps[3] (allocation).try[1].assert: <problem and fix>``.

Paths name a step by its id as well as its position, and an operation by its key once (pydantic's
location holds it twice: the union's tag, then the field). Unknown keys come first (most often a
typo) and list the valid keys of that mapping.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError
from typing_extensions import TypeAliasType

from harness.lab_values import AT_FIELD, DNS_LABEL, NAMES_FIELD

Loc = tuple[str | int, ...]


def path(loc: Loc, data: Any) -> str:
    """``("steps", 3, "try", 1, "assert", "assert", "mach")`` as ``steps[3] (id).try[1].assert.mach``."""
    out = ""
    previous: str | int | None = None
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
            if previous == "steps" and loc[:1] == ("steps",):
                out += _step_id(data, part)
        elif part != previous:
            out += f".{part}" if out else str(part)
        previous = part
    return out


def _step_id(data: Any, index: int) -> str:
    """`` (id)`` of step ``index`` of the raw document, when it has a valid one."""
    steps = data.get("steps") if isinstance(data, Mapping) else None
    step = steps[index] if isinstance(steps, list) and index < len(steps) else None
    sid = step.get("id") if isinstance(step, Mapping) else None
    return f" ({sid})" if isinstance(sid, str) and DNS_LABEL.fullmatch(sid) else ""


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The models an annotation can hold (through unions, lists, ``Annotated`` and named aliases)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if isinstance(annotation, TypeAliasType):
        return _models_in(annotation.__value__)
    return [model for arg in typing.get_args(annotation) for model in _models_in(arg)]


def model_at(root: type[BaseModel], loc: Loc) -> type[BaseModel] | None:
    """The model whose keys are at ``loc`` inside ``root``; an operation's tag picks its model by title."""
    current: Any = root
    previous: str | int | None = None
    for part in loc:
        if isinstance(part, int):
            continue
        models = _models_in(current)
        # the tag first; the same name right after it is the operation's body field
        tagged = [m for m in models if m.model_config.get("title") == part] if part != previous else []
        previous = part
        if tagged:
            current = tagged[0]
            continue
        fields = [i for m in models for n, i in m.model_fields.items() if (i.alias or n) == part]
        if not fields:
            return None
        current = fields[0].annotation
    models = _models_in(current)
    return models[0] if len(models) == 1 else None


def describe(exc: ValidationError, data: Any, root: type[BaseModel]) -> str:
    """The first problem of ``exc`` (raised validating ``data`` as ``root``) as one line."""
    errors = exc.errors()
    first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    loc = tuple(first["loc"])
    parent = loc[:-1]
    where = path(parent, data)
    lead = f"{where}: " if where else ""
    kind = first["type"]
    if kind == "extra_forbidden":
        keys = [str(e["loc"][-1]) for e in errors if e["type"] == kind and tuple(e["loc"][:-1]) == parent]
        owner = model_at(root, parent)
        valid = f" (valid: {', '.join(sorted(i.alias or n for n, i in owner.model_fields.items()))})" if owner else ""
        return f"{lead}unknown key(s) {', '.join(keys)}{valid}"
    if kind == "missing" and loc and not isinstance(loc[-1], int):
        return f"{lead}'{loc[-1]}' is required"
    if kind == NAMES_FIELD:
        return f"{where}.{first['ctx']['message']}" if where else str(first["ctx"]["message"])
    at = path(loc, data)
    if kind == AT_FIELD:
        suffix = first["ctx"]["at"]
        at = f"{at}.{suffix}" if at and suffix else at or suffix
        return f"{at}: {first['ctx']['message']}" if at else str(first["ctx"]["message"])
    message = first["msg"].removeprefix("Value error, ")
    got = f" (got {first['input']!r})" if "input" in first and not isinstance(first["input"], Mapping) else ""
    return f"{at}: {message[0].lower()}{message[1:]}{got}" if at else f"{message}{got}"
