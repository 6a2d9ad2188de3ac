"""JSON Schema of ``lab.yaml``, for editors and CI (``dralab schema lab``).

Built from :mod:`harness.schema`'s own tables (operations, their keys, the lab, step, prerequisite and
namespace keys), so a key added there appears here. The schema checks shape only; what needs the
lab's folder or its order (manifest files, ``${vars}`` defined before use, step ids of ``proves``)
stays with :func:`harness.schema.parse_lab`, which every run applies anyway.
"""

from __future__ import annotations

from typing import Any

from harness import schema as lab

_DNS_LABEL = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
_STRINGS = {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}, {"type": "null"}]}
_DURATION = {"anyOf": [{"type": "number"}, {"type": "string", "pattern": lab._DURATION.pattern}]}
_COMMON: dict[str, Any] = {
    "description": {"type": "string"},
    "requires": _STRINGS,
    "evidence": {"type": "string"},
    "timeout": _DURATION,
    "mark": {"type": "string"},
    "measure": {
        "type": "object",
        "properties": {"since": {"type": "string"}, "as": {"type": "string"}},
        "required": ["since", "as"],
        "additionalProperties": False,
    },
}


def _body(spec: lab.OpSpec) -> dict[str, Any]:
    """An operation's body: its keys, the required ones, and exactly one of each ``one_of`` group."""
    properties: dict[str, Any] = {key: {} for key in sorted(spec.keys)}
    properties["timeout"] = _DURATION  # accepted inside the body too
    if "absent" in properties:
        properties["absent"] = {"type": "boolean"}
    body: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if spec.required:
        body["required"] = list(spec.required)
    groups = [{"oneOf": [{"required": [key]} for key in group]} for group in spec.one_of]
    if groups:
        body["allOf"] = groups
    if not spec.required and not spec.one_of:
        return {"anyOf": [body, {"type": "null"}]}
    return body


def _operation(kind: str, spec: lab.OpSpec) -> dict[str, Any]:
    return {
        "type": "object",
        "title": kind,
        "description": spec.doc,
        "properties": {kind: _body(spec), **_COMMON},
        "required": [kind],
        "additionalProperties": False,
    }


def _operations(collectors_only: bool) -> dict[str, Any]:
    """A list of operations (or of collectors only), by reference to ``$defs``."""
    ref = {"$ref": "#/$defs/collector" if collectors_only else "#/$defs/operation"}
    return {"anyOf": [{"type": "array", "items": ref}, {"type": "null"}]}


def _definitions() -> dict[str, Any]:
    ops = {kind: _operation(kind, spec) for kind, spec in lab.OPERATIONS.items()}
    collectors = [{"$ref": f"#/$defs/op-{kind}"} for kind, spec in lab.OPERATIONS.items() if spec.collector]
    return {
        **{f"op-{kind}": op for kind, op in ops.items()},
        "operation": {"oneOf": [{"$ref": f"#/$defs/op-{kind}"} for kind in ops]},
        "collector": {"oneOf": collectors},
    }


def _closed(keys: set[str] | tuple[str, ...], **properties: Any) -> dict[str, Any]:
    """An object with exactly ``keys`` (typed where ``properties`` says), or nothing."""
    props = {key: properties.get(key, {}) for key in sorted(keys)}
    return {"anyOf": [{"type": "object", "properties": props, "additionalProperties": False}, {"type": "null"}]}


def lab_schema() -> dict[str, Any]:
    """The lab format's JSON Schema (draft 2020-12)."""
    step = {
        "type": "object",
        "properties": {
            "id": {"type": "string", "pattern": _DNS_LABEL},
            "title": {"type": "string"},
            "description": {"type": "string"},
            "proves": _STRINGS,
            "requires": _STRINGS,
            "try": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/operation"}},
            "catch": _operations(True),
            "finally": _operations(False),
        },
        "required": ["id", "try"],
        "additionalProperties": False,
    }
    mapping = {"anyOf": [{"type": "object"}, {"type": "null"}]}
    properties: dict[str, Any] = {
        "apiVersion": {"const": lab.API_VERSION},
        "kind": {"const": "Lab"},
        "name": {"type": "string", "pattern": _DNS_LABEL, "description": "dralab lab run NAME"},
        "title": {"type": "string"},
        "source": {"type": "string"},
        "description": {"type": "string"},
        "profiles": _STRINGS,
        "prerequisites": _closed(lab._PREREQ_KEYS, vendors=_STRINGS, capabilities=_STRINGS),
        "namespace": _closed(lab._NS_KEYS, prefix={"type": "string"}, labels=mapping, annotations=mapping),
        "vars": mapping,
        "profileVars": {
            "anyOf": [{"type": "object", "additionalProperties": mapping}, {"type": "null"}],
            "description": "per-profile values of declared vars",
        },
        "catch": _operations(True),
        "cleanup": _operations(False),
        "proved": {
            "anyOf": [
                {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"id": {}, "claim": {}, "evidence": {}},
                        "required": ["id", "claim"],
                        "additionalProperties": False,
                    },
                },
                {"type": "null"},
            ]
        },
        "steps": {"type": "array", "minItems": 1, "items": step},
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "dralab lab",
        "description": "A lab: labs/<name>/lab.yaml (checked in full whenever dralab loads it: lab list, lab run)",
        "type": "object",
        "properties": properties,
        "required": ["apiVersion", "kind", "name", "steps"],
        "additionalProperties": False,
        "$defs": _definitions(),
    }
