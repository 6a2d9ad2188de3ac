"""The one error type conversion raises: a denial that names the offending field and the fix."""

from __future__ import annotations

from typing import Any

from dralab.errors import UserError

_TYPE_WORDS: dict[type, str] = {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}


class Denied(UserError):
    """A pod that cannot be converted as written; ``field`` is the path the message starts with."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}")


def json_type(value: Any) -> str:
    """How a decoded JSON value's type reads in a message: ``an object``, ``a list``, ``a number``..."""
    if value is None:
        return "null"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return "a number"
    return _TYPE_WORDS.get(type(value), type(value).__name__)


def type_words(expected: type) -> str:
    """``an object`` for dict, ``a list`` for list, and so on (the JSON name of a Python type)."""
    return _TYPE_WORDS.get(expected, expected.__name__)


def check_type(container: dict[str, Any], key: str, expected: type, field: str) -> Any:
    """``container[key]`` when absent, null or of type ``expected``; else :class:`Denied` naming ``field``."""
    value = container.get(key)
    if value is not None and not isinstance(value, expected):
        raise Denied(field, f"must be {type_words(expected)}, got {json_type(value)}")
    return value
