"""The one registry of lab operations: every key a lab may use has exactly one handler."""

from __future__ import annotations

import pytest

from harness import registry
from harness.lab_ops import COLLECTOR_KINDS, OPERATIONS


def test_every_operation_has_its_handler_and_nothing_else_is_registered() -> None:
    assert set(registry.handlers()) == set(OPERATIONS)


def test_collectors_are_handled_in_the_collectors_module() -> None:
    found = registry.handlers()
    assert {k for k, fn in found.items() if fn.__module__ == "harness.collectors"} == set(COLLECTOR_KINDS)


def test_a_handler_for_an_unknown_or_taken_key_is_refused() -> None:
    with pytest.raises(ValueError, match="'frobnicate', which is no operation"):
        registry.handles("frobnicate")(lambda ctx, body, op: None)
    with pytest.raises(ValueError, match="operation 'apply' has two handlers"):
        registry.handles("apply")(lambda ctx, body, op: None)
    assert registry.handler_for("apply").__name__ == "op_apply"  # the first stays
