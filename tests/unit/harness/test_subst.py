"""${var} substitution: captures flow into manifests with their types, unknown names are errors."""

from __future__ import annotations

import pytest

from harness.subst import SubstitutionError, references, substitute


def test_whole_reference_keeps_the_type_and_inline_reference_becomes_text() -> None:
    variables = {"count": 2, "uuid": "68496E64-A", "on": True}
    assert substitute("${count}", variables) == 2
    assert substitute("n=${count} u=${uuid} ${on}", variables) == "n=2 u=68496E64-A true"


def test_substitutes_through_mappings_lists_and_keys() -> None:
    doc = {"metadata": {"annotations": {"use-${kind}": "${uuid}"}}, "list": ["${uuid}", 3]}
    out = substitute(doc, {"uuid": "U", "kind": "gpu"})
    assert out == {"metadata": {"annotations": {"use-gpu": "U"}}, "list": ["U", 3]}


def test_dotted_reference_reads_into_structured_values() -> None:
    variables = {"slice": {"devices": [{"name": "npu-0-0", "uuid": "U0"}]}}
    assert substitute("${slice.devices[name=npu-0-0].uuid}", variables) == "U0"


def test_dollar_dollar_escapes() -> None:
    assert substitute("$${literal} ${x}", {"x": "1"}) == "${literal} 1"


def test_unknown_variable_names_the_known_ones() -> None:
    with pytest.raises(SubstitutionError, match=r"unknown variable \$\{uid\}.*known: a, b"):
        substitute("${uid}", {"a": 1, "b": 2})


def test_malformed_reference_is_an_error() -> None:
    with pytest.raises(SubstitutionError, match="not a valid variable reference"):
        substitute("${1abc}", {})


def test_references_lists_variable_names() -> None:
    assert references({"a": ["${x} and ${y.z}"], "${k}": "$${not}"}) == {"x", "y", "k"}
