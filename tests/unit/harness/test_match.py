"""Partial matching and its operators, as assertions in labs use them."""

from __future__ import annotations

import pytest

from harness.match import MatchSyntaxError, excerpt, match, validate

CLAIM = {
    "metadata": {"name": "c", "finalizers": ["resource.kubernetes.io/delete-protection"]},
    "spec": {"devices": {"requests": [{"name": "npu", "exactly": {"count": 1, "capacity": {"requests": {
        "memory": "8589934592", "cores": "50"}}}}]}},
    "status": {"allocation": {"devices": {"results": [{"device": "npu-0-0", "shareID": "be06", "consumedCapacity": {
        "memory": "8Gi", "cores": "50"}}]}}},
}  # fmt: skip


def test_partial_mapping_match_ignores_other_keys() -> None:
    assert match({"metadata": {"name": "c"}}, CLAIM) == []


def test_mismatch_names_the_path_and_both_values() -> None:
    problems = match({"status": {"allocation": {"devices": {"results": [{"device": "npu-1-0"}]}}}}, CLAIM)
    assert problems == ['status.allocation.devices.results[0].device: expected "npu-1-0", got "npu-0-0"']


def test_types_are_strict_for_strings_and_numbers() -> None:
    assert match({"spec": {"devices": {"requests": [{"exactly": {"count": "1"}}]}}}, CLAIM)
    assert not match({"spec": {"devices": {"requests": [{"exactly": {"count": 1}}]}}}, CLAIM)


def test_lists_match_positionally_with_equal_length() -> None:
    assert match({"metadata": {"finalizers": []}}, CLAIM) == [
        'metadata.finalizers: expected 0 items, got 1: ["resource.kubernetes.io/delete-protection"]'
    ]


@pytest.mark.parametrize(
    ("expected", "ok"),
    [
        ({"$quantity": "8589934592"}, True),
        ({"$quantity": "8192Mi"}, True),
        ({"$quantity": "8G"}, False),
        ({"$gt": "4Gi", "$lt": "9Gi"}, True),
        ({"$regex": "^8"}, True),
        ({"$in": ["8Gi", "16Gi"]}, True),
        ({"$notIn": ["8Gi"]}, False),
        ({"$ne": "8Gi"}, False),
        ({"$startsWith": "8"}, True),
        ({"$not": {"$eq": "8Gi"}}, False),
        ({"$any": [{"$eq": "1"}, {"$eq": "8Gi"}]}, True),
        ({"$all": [{"$regex": "Gi$"}, {"$quantity": "8Gi"}]}, True),
    ],
)
def test_scalar_operators(expected: dict, ok: bool) -> None:
    actual = {"memory": "8Gi"}
    assert (match({"memory": expected}, actual) == []) is ok


def test_list_operators() -> None:
    ids = {"ids": ["a", "b", "c"]}
    assert not match({"ids": {"$len": 3, "$distinct": True, "$contains": "b"}}, ids)
    assert match({"ids": {"$len": {"$gte": 4}}}, ids)
    assert not match({"ids": {"$each": {"$regex": "^[a-c]$"}}}, ids)
    assert match({"ids": {"$distinct": True}}, {"ids": ["a", "a"]})
    assert not match({"results": {"$contains": {"device": "npu-0-0"}}}, {"results": [{"device": "npu-0-0", "x": 1}]})


def test_absent_and_exists() -> None:
    assert not match({"status": {"allocation": {"$absent": True}}}, {"status": {}})
    assert not match({"status": {"allocation": {"$absent": True}}}, {})  # a missing parent mapping is fine
    assert match({"status": {"allocation": {"$absent": True}}}, CLAIM)
    assert not match({"metadata": {"name": {"$exists": True}}}, CLAIM)
    assert match({"metadata": {"uid": {"$exists": True}}}, CLAIM) == [
        "metadata.uid: expected $exists true, got <missing>"
    ]


def test_missing_value_is_reported() -> None:
    assert match({"metadata": {"uid": "x"}}, CLAIM) == ['metadata.uid: missing (expected "x")']


def test_validate_rejects_unknown_operators_and_bad_operands() -> None:
    with pytest.raises(MatchSyntaxError, match=r"a.b: unknown operator \$regx"):
        validate({"a": {"b": {"$regx": "x"}}})
    with pytest.raises(MatchSyntaxError, match="invalid regular expression"):
        validate({"a": {"$regex": "("}})
    with pytest.raises(MatchSyntaxError, match="needs a list"):
        validate({"a": {"$in": "x"}})


def test_excerpt_keeps_what_the_expectation_names() -> None:
    expected = {"status": {"allocation": {"devices": {"results": [{"device": "npu-0-0"}]}}}}
    assert excerpt(expected, CLAIM) == {"status": {"allocation": {"devices": {"results": [{"device": "npu-0-0"}]}}}}
    assert excerpt({"metadata": {"finalizers": {"$len": 1}}}, CLAIM) == {"metadata": {"finalizers": "<1 items>"}}
    assert excerpt({"metadata": {"finalizers": {"$contains": "x"}}}, CLAIM) == {
        "metadata": {"finalizers": ["resource.kubernetes.io/delete-protection"]}
    }


def test_leaves_and_brief_give_one_line_evidence() -> None:
    from harness.match import leaves
    from harness.ops import brief

    shown = {"status": {"allocation": {"devices": {"results": [{"device": "npu-0-0", "shareID": "be06"}]}}}}
    assert leaves(shown) == [
        ("status.allocation.devices.results[0].device", "npu-0-0"),
        ("status.allocation.devices.results[0].shareID", "be06"),
    ]
    assert brief(shown) == "results.device=npu-0-0, results.shareID=be06"
    assert brief({"a": list(range(8))}, limit=2) == "a=0, a=1, … (+6)"
