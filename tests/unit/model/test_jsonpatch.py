"""JSON Patch by difference: applying the diff always gives the target document."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dralab.model import jsonpatch

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3),
    max_leaves=12,
)


@given(JSON, JSON)
def test_apply_of_diff_is_the_target(a: object, b: object) -> None:
    assert jsonpatch.apply(a, jsonpatch.diff(a, b)) == b


def test_keys_with_slashes_and_tildes_are_escaped() -> None:
    ops = jsonpatch.diff({"labels": {}}, {"labels": {"hami.io/dra": "true", "a~b": "1"}})
    assert {"op": "add", "path": "/labels/hami.io~1dra", "value": "true"} in ops
    assert {"op": "add", "path": "/labels/a~0b", "value": "1"} in ops


def test_equal_documents_give_no_operations() -> None:
    assert jsonpatch.diff({"a": [1, {"b": 2}]}, {"a": [1, {"b": 2}]}) == []
