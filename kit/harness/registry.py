"""The one registry of lab operations: each operation key's handler, beside its body model.

What a lab file may say is :data:`harness.lab_ops.OPERATIONS` (key -> body model, which the schema
and the loader read); what the key does is the function registered here with :func:`handles`, in
:mod:`harness.ops` or :mod:`harness.collectors`. A new operation is its body model and one decorated
function; :func:`handler_for` finds it, and a unit test checks that every key has exactly one.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from harness.lab_ops import OPERATIONS

Handler = Callable[..., Any]  # (Context, body, Operation) -> OpOutcome: see harness.ops
HANDLER_MODULES = ("harness.ops", "harness.collectors")  # imported on first lookup: they register
_handlers: dict[str, Handler] = {}


def handles(kind: str) -> Callable[[Handler], Handler]:
    """Register the decorated function as what operation ``kind`` does."""

    def register(fn: Handler) -> Handler:
        if kind not in OPERATIONS:
            raise ValueError(f"{fn.__name__} handles {kind!r}, which is no operation (harness.lab_ops.OPERATIONS)")
        if _handlers.get(kind, fn) is not fn:
            raise ValueError(f"operation {kind!r} has two handlers: {_handlers[kind].__name__} and {fn.__name__}")
        _handlers[kind] = fn
        return fn

    return register


def handlers() -> dict[str, Handler]:
    """Every registered handler by operation key (the handler modules imported first)."""
    for module in HANDLER_MODULES:
        importlib.import_module(module)
    return dict(_handlers)


def handler_for(kind: str) -> Handler:
    """What operation ``kind`` does; a key without a handler is a bug of the kit, said as such."""
    found = handlers().get(kind)
    if found is None:
        raise LookupError(f"lab operation {kind!r} has no handler: register one with @handles({kind!r})")
    return found
