"""``${var}`` substitution in lab manifests and operations (pure, no I/O).

Captured values (a uuid read from a ResourceSlice, a claim's UID) flow into later steps this
way, so a manifest never hard-codes what the cluster decides. Rules:

- ``${name}`` is replaced by the variable's value; ``${name.path}`` reads into a structured
  value with the object-path syntax of :mod:`harness.jpath`.
- A string that is exactly one ``${...}`` keeps the variable's type (an int stays an int).
- ``$${`` writes a literal ``${``.
- An unknown variable is an error naming the variables that do exist.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from dralab.errors import UserError
from harness import jpath

_REF = re.compile(r"\$\$\{|\$\{([^}]*)\}")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


class SubstitutionError(UserError):
    """A ``${...}`` reference names no known variable or is malformed."""


def _lookup(expr: str, variables: Mapping[str, Any]) -> Any:
    name, _, rest = expr.strip().partition(".")
    if not _NAME.match(name):
        raise SubstitutionError(f"${{{expr}}} is not a valid variable reference (use ${{name}} or ${{name.path}})")
    if name not in variables:
        known = ", ".join(sorted(variables)) or "none"
        raise SubstitutionError(
            f"unknown variable ${{{name}}}: define it under 'vars' or capture it in an earlier step (known: {known})"
        )
    value = variables[name]
    if rest:
        try:
            value = jpath.get(value, rest)
        except jpath.PathError as exc:
            raise SubstitutionError(f"${{{expr}}}: {exc}") from None
    return value


def _as_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    return str(value)


def substitute_text(text: str, variables: Mapping[str, Any]) -> Any:
    """Substitute every ``${...}`` in ``text``; a lone reference returns the raw value."""
    whole = _REF.fullmatch(text)
    if whole and whole.group(0) != "$${":
        return _lookup(whole.group(1), variables)

    def repl(match: re.Match[str]) -> str:
        if match.group(0) == "$${":
            return "${"
        return _as_text(_lookup(match.group(1), variables))

    return _REF.sub(repl, text)


def substitute(value: Any, variables: Mapping[str, Any]) -> Any:
    """Substitute recursively through mappings (keys and values), lists and strings."""
    if isinstance(value, str):
        return substitute_text(value, variables)
    if isinstance(value, Mapping):
        return {
            (_as_text(substitute_text(k, variables)) if isinstance(k, str) else k): substitute(v, variables)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [substitute(v, variables) for v in value]
    return value


def references(value: Any) -> set[str]:
    """The variable names ``value`` refers to (used to check a lab before running it)."""
    found: set[str] = set()
    if isinstance(value, str):
        for match in _REF.finditer(value):
            if match.group(0) != "$${":
                found.add(match.group(1).strip().partition(".")[0])
    elif isinstance(value, Mapping):
        for k, v in value.items():
            found |= references(k) | references(v)
    elif isinstance(value, list | tuple):
        for v in value:
            found |= references(v)
    return found
