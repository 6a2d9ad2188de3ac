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
