"""Generated CEL compiles and evaluates as meant (checked with cel-python against attribute maps)."""

from __future__ import annotations

import celpy
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from dralab.model import cel
from dralab.model.denials import Denied

DOMAIN = "ascend.project-hami.io"
ENV = celpy.Environment()


def evaluate(expr: str, device: dict) -> bool:
    program = ENV.program(ENV.compile(expr))
    return bool(program.evaluate({"device": celpy.json_to_cel(device)}))


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
    result = ENV.program(ENV.compile(cel.string_literal(value))).evaluate({})
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


def test_contains_any_is_substring_matching() -> None:
    expr = cel.contains_any("d", "productName", ["A100", "H100"])
    dev = {"driver": "d", "attributes": {"d": {"productName": "NVIDIA A100-SXM4-40GB"}}}
    assert evaluate(expr, dev)
    dev["attributes"]["d"]["productName"] = "NVIDIA L4"
    assert not evaluate(expr, dev)
    assert evaluate(cel.contains_any("d", "productName", ["A100"], negate=True), dev)


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
