"""Generated CEL compiles and evaluates as meant (checked with cel-python against attribute maps)."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from dralab.model import cel
from dralab.model.denials import Denied

from . import cel_eval

DOMAIN = "ascend.project-hami.io"
def evaluate(expr: str, device: dict) -> bool:
    return bool(cel_eval.evaluate(expr, {"device": device}))


def device(uuid: str = "68496E64-20E05477-92C31323-6E78030A-BD003019", product: str = "310P3") -> dict:
    return {
        "driver": DOMAIN,
        "attributes": {DOMAIN: {"uuid": uuid, "productName": product, "type": "HAMivNPUCore"}},
    }


@given(st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=80))
@example("\n")
@example('plain"quote')
@example("trailing\n")
def test_string_literal_round_trips(value: str) -> None:
    result = cel_eval.evaluate(cel.string_literal(value), {})
    assert str(result) == value


@given(
    st.lists(
        st.text(alphabet=st.characters(exclude_categories=["Cs"]), min_size=1, max_size=20), min_size=1, max_size=4
    ),
    st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=20),
)
def test_one_of_matches_exactly_the_listed_values(values: list[str], probe: str) -> None:
    expr = cel.one_of(DOMAIN, "uuid", values)
    assert evaluate(expr, device(uuid=probe)) == (probe in values)
    assert evaluate(cel.one_of(DOMAIN, "uuid", values, negate=True), device(uuid=probe)) == (probe not in values)


def test_lab20_uuid_selector_text() -> None:
    expr = cel.one_of(DOMAIN, "uuid", ["68496E64-20E05477-92C31323-6E78030A-BD003019"])
    assert expr == (
        'device.attributes["ascend.project-hami.io"].uuid in ["68496E64-20E05477-92C31323-6E78030A-BD003019"]'
    )
    assert evaluate(expr, device())
    assert not evaluate(expr, device(uuid="D8496E64-20C101B1-C0D42F23-AED8030A-40003039"))


def _gpu(product: str) -> dict:
    return {"driver": "d", "attributes": {"d": {"productName": product}}}


def test_type_match_is_substring_matching() -> None:
    expr = cel.type_match("d", "productName", ["A100", "H100"], substring=True)
    assert evaluate(expr, _gpu("NVIDIA A100-SXM4-40GB"))
    assert not evaluate(expr, _gpu("NVIDIA L4"))
    assert evaluate(cel.type_match("d", "productName", ["A100"], substring=True, negate=True), _gpu("NVIDIA L4"))


@pytest.mark.parametrize("written", ["a100", "A100", "a100-SXM4", "nvidia A100"])
@pytest.mark.parametrize("product", ["NVIDIA A100-SXM4-40GB", "nvidia a100-sxm4-40gb", "Nvidia A100-Sxm4-40GB"])
def test_type_match_ignores_case_on_both_sides_as_hami_does(written: str, product: str) -> None:
    use = cel.type_match("d", "productName", [written], substring=True)
    nouse = cel.type_match("d", "productName", [written], substring=True, negate=True)
    assert evaluate(use, _gpu(product))
    assert not evaluate(nouse, _gpu(product))  # nouse-gputype: a100 excludes the A100 card
    assert not evaluate(use, _gpu("NVIDIA H100 80GB HBM3"))
    assert evaluate(nouse, _gpu("NVIDIA H100 80GB HBM3"))


def test_exact_type_match_ignores_case_but_not_substrings() -> None:
    expr = cel.type_match("d", "productName", ["310p3"], substring=False)
    assert expr == 'device.attributes["d"].productName.upperAscii() in ["310P3"]'
    assert evaluate(expr, _gpu("310P3"))
    assert not evaluate(expr, _gpu("310P3-extra"))
    assert not evaluate(cel.type_match("d", "productName", ["310P3"], substring=False, negate=True), _gpu("310p3"))


def test_type_match_folds_only_ascii_like_cel() -> None:
    assert cel.upper_ascii("a100-ß-é") == "A100-ß-é"
    assert cel.type_match("d", "productName", ["a100", "A100"], substring=True) == (
        'device.attributes["d"].productName.upperAscii().contains("A100")'
    )


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("a", ["a"]), ("a,b", ["a", "b"]), (" a , b ,", ["a", "b"]), ("a,a", ["a"])],
)
def test_parse_values(raw: str, expected: list[str]) -> None:
    assert cel.parse_values("x/use-uuid", raw, cel.UUID) == expected


@pytest.mark.parametrize(
    "raw",
    ['a"b', "a\\b", "x" * 65, ",", "", "a b", "uu\nid", '"] || true || ["'],
)
def test_bad_uuid_values_are_denied_naming_the_annotation(raw: str) -> None:
    with pytest.raises(Denied) as info:
        cel.parse_values("hami.io/use-Ascend310P-uuid", raw, cel.UUID)
    assert str(info.value).startswith("metadata.annotations[hami.io/use-Ascend310P-uuid]: ")


def test_gpu_type_allows_spaces() -> None:
    assert cel.parse_values("nvidia.com/use-gputype", "NVIDIA A100-SXM4-40GB,L4", cel.TYPE) == [
        "NVIDIA A100-SXM4-40GB",
        "L4",
    ]
