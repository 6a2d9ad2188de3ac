"""The fast JSON helpers fall back to ``json`` wherever orjson refuses a value."""

from __future__ import annotations

import json

import pytest

from dralab.jsonio import dumps, loads


def test_dumps_is_compact_and_round_trips() -> None:
    value = {"a": [1, 2.5, None, True], "b": {"c": "ü"}}
    assert dumps(value) == json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
    assert loads(dumps(value)) == value


def test_dumps_falls_back_for_what_orjson_refuses() -> None:
    big = {"n": 2**70}
    assert dumps(big) == b'{"n":1180591620717411303424}'
    assert dumps("\ud800") == b'"\\ud800"'  # a lone surrogate, escaped as json does


def test_loads_falls_back_and_keeps_int64_exact() -> None:
    assert loads(b'{"a": 1e400}') == {"a": float("inf")}
    assert loads(b'{"a": 9223372036854775807, "b": -9223372036854775808}') == {"a": 2**63 - 1, "b": -(2**63)}
    assert loads('{"s": "x"}') == {"s": "x"}


def test_loads_names_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="Expecting"):
        loads(b'{"a": ')
