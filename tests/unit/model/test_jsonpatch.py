"""JSON Patch by difference: the patch, applied by an independent RFC 6902 implementation, gives the target."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from dralab.model import jsonpatch

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3),
    max_leaves=12,
)


def as_json(doc: Any) -> str:
    """JSON text with sorted keys: equal only when the documents are equal as JSON (``1`` is not ``true``)."""
    return json.dumps(doc, sort_keys=True)


def apply_independently(doc: Any, ops: list[dict[str, Any]]) -> Any:
    """Apply ``ops`` by hand through JSON text round trips, so the check does not trust the diff's own library."""
    out = json.loads(json.dumps(doc))
    for op in ops:
        tokens = [t.replace("~1", "/").replace("~0", "~") for t in op["path"].split("/")[1:]]
        if op["op"] in ("move", "copy"):
            source = [t.replace("~1", "/").replace("~0", "~") for t in op["from"].split("/")[1:]]
            value = _get(out, source)
            if op["op"] == "move":
                out = _remove(out, source)
            out = _add(out, tokens, json.loads(json.dumps(value)))
        elif op["op"] == "remove":
            out = _remove(out, tokens)
        elif op["op"] == "replace":
            out = _remove(out, tokens) if tokens else None
            out = _add(out, tokens, op["value"])
        elif op["op"] == "add":
            out = _add(out, tokens, op["value"])
        elif op["op"] == "test":
            assert as_json(_get(out, tokens)) == as_json(op["value"])
        else:
            raise AssertionError(f"unexpected operation {op}")
    return out


def _get(doc: Any, tokens: list[str]) -> Any:
    for t in tokens:
        doc = doc[int(t)] if isinstance(doc, list) else doc[t]
    return doc


def _remove(doc: Any, tokens: list[str]) -> Any:
    parent = _get(doc, tokens[:-1])
    del parent[int(tokens[-1]) if isinstance(parent, list) else tokens[-1]]
    return doc


def _add(doc: Any, tokens: list[str], value: Any) -> Any:
    if not tokens:
        return json.loads(json.dumps(value))
    parent = _get(doc, tokens[:-1])
    last = tokens[-1]
    if isinstance(parent, list):
        parent.insert(len(parent) if last == "-" else int(last), json.loads(json.dumps(value)))
    else:
        parent[last] = json.loads(json.dumps(value))
    return doc


@given(JSON, JSON)
def test_apply_of_diff_is_the_target(a: object, b: object) -> None:
    ops = jsonpatch.diff(a, b)
    assert as_json(jsonpatch.apply(a, ops)) == as_json(b)
    assert as_json(apply_independently(a, ops)) == as_json(b)


def test_an_integer_that_becomes_a_boolean_is_replaced() -> None:
    # Python says 1 == True; JSON and the apiserver do not.
    assert jsonpatch.diff({"a": 1}, {"a": True}) == [{"op": "replace", "path": "/a", "value": True}]
    assert jsonpatch.diff({"a": [0]}, {"a": [False]}) == [{"op": "replace", "path": "/a/0", "value": False}]
    assert as_json(jsonpatch.apply({"a": 1}, jsonpatch.diff({"a": 1}, {"a": True}))) == '{"a": true}'


def test_keys_with_slashes_and_tildes_are_escaped() -> None:
    ops = jsonpatch.diff({"labels": {}}, {"labels": {"hami.io/dra": "true", "a~b": "1"}})
    assert {"op": "add", "path": "/labels/hami.io~1dra", "value": "true"} in ops
    assert {"op": "add", "path": "/labels/a~0b", "value": "1"} in ops


def test_equal_documents_give_no_operations() -> None:
    assert jsonpatch.diff({"a": [1, {"b": 2}]}, {"a": [1, {"b": 2}]}) == []


def test_inputs_are_not_mutated() -> None:
    old, new = {"a": [1, 2]}, {"a": [2]}
    ops = jsonpatch.diff(old, new)
    assert jsonpatch.apply(old, ops) == new
    assert old == {"a": [1, 2]}


@given(st.dictionaries(st.text(max_size=4), JSON, max_size=4), st.dictionaries(st.text(max_size=4), JSON, max_size=4))
def test_subtree_ops_give_the_target_when_every_changed_place_is_named(a: dict, b: dict) -> None:
    paths = [(k,) for k in {**a, **b}]
    ops = jsonpatch.subtree_ops(a, b, paths)
    assert as_json(jsonpatch.apply(a, ops)) == as_json(b)
    assert as_json(apply_independently(a, ops)) == as_json(b)


def test_subtree_ops_add_the_highest_missing_ancestor_and_escape_keys() -> None:
    old = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "resources": {"limits": {"x": 1}}}]}}
    new = {"metadata": {"name": "p", "labels": {"hami.io/dra": "true"}},
           "spec": {"containers": [{"name": "c", "resources": {"claims": [{"name": "r"}]}}],
                    "resourceClaims": [{"name": "r"}]}}
    ops = jsonpatch.subtree_ops(old, new, [("metadata", "labels", "hami.io/dra"), ("spec", "resourceClaims"),
                                           ("spec", "containers", 0, "resources")])
    assert ops == [
        {"op": "add", "path": "/metadata/labels", "value": {"hami.io/dra": "true"}},
        {"op": "add", "path": "/spec/resourceClaims", "value": [{"name": "r"}]},
        {"op": "replace", "path": "/spec/containers/0/resources", "value": {"claims": [{"name": "r"}]}},
    ]
    old["metadata"]["labels"] = {"a~b": "1"}
    new["metadata"]["labels"] = {"a~b": "1", "hami.io/dra": "true"}
    ops = jsonpatch.subtree_ops(old, new, [("metadata", "labels", "hami.io/dra")])
    assert ops == [{"op": "add", "path": "/metadata/labels/hami.io~1dra", "value": "true"}]
    assert jsonpatch.subtree_ops(old, {"metadata": {"name": "p"}}, [("metadata", "labels")]) == [
        {"op": "remove", "path": "/metadata/labels"}]


def test_every_converted_pods_patch_applies_with_the_library_to_the_converted_pod() -> None:
    from dralab.config import default_config
    from dralab.model.convert import Converter

    npu = {"huawei.com/Ascend310P": "1", "huawei.com/Ascend310P-memory": "4096"}
    pods = [
        {"metadata": {"name": "bare"}, "spec": {"containers": [{"name": "a", "resources": {"limits": npu}}]}},
        {"metadata": {"generateName": "gen-", "labels": {"team/x": "a~b"}},
         "spec": {"containers": [{"name": "plain", "image": "x"},
                                 {"name": "b", "resources": {"limits": {**npu, "cpu": "1"}, "requests": npu}}],
                  "initContainers": [{"name": "init", "resources": {"limits": npu}}],
                  "resourceClaims": [{"name": "other", "resourceClaimName": "mine"}]}},
    ]
    converter = Converter(default_config().vendors)
    for pod in pods:
        conv = converter.convert(pod, namespace="ns", request_uid="u-1")
        assert conv.changed
        assert as_json(jsonpatch.apply(pod, conv.patch)) == as_json(conv.pod)
        assert as_json(apply_independently(pod, conv.patch)) == as_json(conv.pod)
