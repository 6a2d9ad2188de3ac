"""Object paths: how labs point at values inside Kubernetes objects."""

from __future__ import annotations

import pytest

from harness.jpath import PathError, get, has, parse

SLICE = {
    "metadata": {"labels": {"hami.io/dra": "true"}},
    "spec": {
        "devices": [
            {"name": "npu-0-0", "attributes": {"uuid": {"string": "U0"}, "index": {"int": 0}}},
            {"name": "npu-1-0", "attributes": {"uuid": {"string": "U1"}, "index": {"int": 1}}},
        ]
    },
}


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("spec.devices[0].name", "npu-0-0"),
        ("spec.devices[-1].name", "npu-1-0"),
        ("spec.devices[name=npu-1-0].attributes.uuid.string", "U1"),
        ("spec.devices[attributes.index.int=1].name", "npu-1-0"),
        ("spec.devices[name!=npu-0-0].name", "npu-1-0"),
        ("spec.devices[*].attributes.uuid.string", ["U0", "U1"]),
        ('metadata.labels["hami.io/dra"]', "true"),
        ("metadata.labels['hami.io/dra']", "true"),
        ("", SLICE),
    ],
)
def test_paths_resolve(path: str, value: object) -> None:
    assert get(SLICE, path) == value


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("spec.device", r"spec.device: not found \(have: devices\)"),
        ("spec.devices[5]", "index out of range"),
        ("spec.devices[name=npu-9-9]", "no element matches.*npu-0-0, npu-1-0"),
        ("metadata[0]", "index out of range"),
    ],
)
def test_missing_values_say_where(path: str, message: str) -> None:
    with pytest.raises(PathError, match=message):
        get(SLICE, path)
    assert not has(SLICE, path)


@pytest.mark.parametrize("path", ["a..b", "a.", "a[", "a[x y z]", ".a"])
def test_malformed_paths_are_rejected(path: str) -> None:
    with pytest.raises(PathError):
        parse(path)


@pytest.mark.parametrize(
    ("jsonpath", "ours"),
    [
        (
            'spec.devices[?(@.name=="npu-1-0")].attributes.uuid.string',
            "spec.devices[name=npu-1-0].attributes.uuid.string",
        ),
        ("spec.devices[?(@.name == 'npu-1-0')].name", "spec.devices[name=npu-1-0].name"),
        ("spec.devices[?(@.attributes.index.int==1)].name", "spec.devices[attributes.index.int=1].name"),
        ('spec.devices[?(@.name!="npu-0-0")].name', "spec.devices[name!=npu-0-0].name"),
        ('spec.devices[?(@.name=="a]b")].name', "spec.devices[name='a]b'].name"),
    ],
)
def test_kubectl_jsonpath_filters_mean_the_same_as_ours(jsonpath: str, ours: str) -> None:
    assert parse(jsonpath) == parse(ours)
    if "a]b" not in ours:
        assert get(SLICE, jsonpath) == get(SLICE, ours)


def test_a_jsonpath_filter_that_matches_nothing_lists_what_it_saw() -> None:
    with pytest.raises(PathError, match=r"no element matches.*npu-0-0, npu-1-0"):
        get(SLICE, 'spec.devices[?(@.name=="npu-9-9")]')


@pytest.mark.parametrize(
    "path",
    [
        'spec.devices[?(@.name>"a")]',  # only == and != are understood
        "spec.devices[?(@.name)]",  # an existence test
        'spec.devices[?(@.name=="a" && @.x=="b")',  # never closed
        'spec.devices[?(@.a[*]=="b")]',  # the field must be a plain dotted path
    ],
)
def test_unsupported_jsonpath_filters_are_refused_with_an_example(path: str) -> None:
    with pytest.raises(PathError, match=r'\[\?\(@\.name=="npu-0-0"\)\]|never closed|plain dotted path'):
        parse(path)


def test_a_jsonpath_filter_with_two_conditions_is_refused_not_half_read() -> None:
    with pytest.raises(PathError, match="compares one field with one value"):
        parse('spec.devices[?(@.name=="a" && @.x=="b")]')
