"""HAMi units: canonicalized quantities, binary bytes, refusals of milli/fractional values."""

from __future__ import annotations

import pytest

from dralab.model.denials import Denied
from dralab.model.hami_units import compute_units, cores_percent, device_count, memory_bytes, same_quantity

MIB = 1024 * 1024


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("8192", 8192 * MIB),  # Lab 20: 8192 MiB -> 8589934592
        (8192, 8192 * MIB),
        ("14k", 14000 * MIB),  # the apiserver's canonical form of 14000 (Lab 20 Step 9 ctrl-b)
        ("14000", 14000 * MIB),  # offline, un-canonicalized
        ("3k", 3000 * MIB),
        ("1M", 1_000_000 * MIB),
        ("1.5k", 1500 * MIB),
        ("8e3", 8000 * MIB),
        ("16Gi", 16 * 1024**3),  # binary suffix: bytes, not MiB
        ("512Mi", 512 * MIB),
        ("0.5Gi", 512 * MIB),
        ("1Ki", 1024),
    ],
)
def test_memory_units(text: object, expected: int) -> None:
    assert memory_bytes(text, "f") == expected


def test_lab20_memory_is_8589934592() -> None:
    assert str(memory_bytes("8192", "f")) == "8589934592"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("500m", "milli"),
        ("0", "no memory"),
        ("-1", "no memory"),
        ("1.5", "whole number of MiB"),
        ("0.3Ki", "whole number of bytes"),
        ("abc", "not a valid quantity"),
        ("8 Gi", "not a valid quantity"),
    ],
)
def test_memory_refusals_name_the_field(text: str, message: str) -> None:
    with pytest.raises(Denied, match=message) as info:
        memory_bytes(text, "spec.containers[0].resources.limits[nvidia.com/gpumem]")
    assert str(info.value).startswith("spec.containers[0].resources.limits[nvidia.com/gpumem]: ")


@pytest.mark.parametrize(("text", "expected"), [("0", 0), ("50", 50), ("100", 100), (40, 40)])
def test_cores(text: object, expected: int) -> None:
    assert cores_percent(text, "f") == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("101", "outside 0..100"),
        ("1k", "outside"),
        ("-1", "outside"),
        ("0.5", "whole percentage"),
        ("500m", "whole percentage"),
    ],
)
def test_cores_refusals(text: str, message: str) -> None:
    with pytest.raises(Denied, match=message):
        cores_percent(text, "f")


@pytest.mark.parametrize(("text", "expected"), [("1", 1), (2, 2), ("8", 8)])
def test_count(text: object, expected: int) -> None:
    assert device_count(text, "f") == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [("0", "requests no device"), ("-2", "no device"), ("1.5", "whole number"), ("500m", "whole number")],
)
def test_count_refusals(text: str, message: str) -> None:
    with pytest.raises(Denied, match=message):
        device_count(text, "f")


@pytest.mark.parametrize(
    ("pct", "reference", "expected"),
    [(0, 120, 0), (1, 120, 2), (50, 120, 60), (100, 120, 120), (1, 60, 1), (33, 60, 20), (50, 64, 32)],
)
def test_compute_units(pct: int, reference: int, expected: int) -> None:
    assert compute_units(pct, reference) == expected


def test_same_quantity_sees_canonical_forms() -> None:
    assert same_quantity("14000", "14k")
    assert not same_quantity("14000", "14Ki")
