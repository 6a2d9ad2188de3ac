"""cel-python with the one strings-extension function dralab's selectors use.

Kubernetes' DRA CEL environment includes cel-go's strings extension (``upperAscii()``);
cel-python does not ship it, so this adds it as a function written here: ASCII letters only,
like cel-go's.
"""

from __future__ import annotations

from typing import Any

import celpy
from celpy import celtypes

ENV = celpy.Environment()


def _upper_ascii(value: celtypes.StringType) -> celtypes.StringType:
    return celtypes.StringType("".join(chr(ord(c) - 32) if "a" <= c <= "z" else c for c in str(value)))


FUNCTIONS = {"upperAscii": _upper_ascii}


def evaluate(expr: str, activation: dict[str, Any]) -> Any:
    """``expr`` evaluated with ``activation``'s JSON values as CEL values."""
    program = ENV.program(ENV.compile(expr), functions=FUNCTIONS)
    return program.evaluate({k: celpy.json_to_cel(v) for k, v in activation.items()})
