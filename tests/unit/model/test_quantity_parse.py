"""dralab.model.quantity: exact values, bounds before arithmetic, errors that name the field, and the
remembered parse sharing frozen results without remembering refusals."""

from __future__ import annotations

from fractions import Fraction

import pytest

from dralab.errors import UserError
from dralab.model.quantity import MAX_TEXT, parse_quantity, quantity_value, to_int


@pytest.mark.parametrize(("text", "value"), [
    ("8Gi", 8 * 2**30), ("512Mi", 512 * 2**20), ("0.5Gi", 2**29), ("14k", 14_000), ("100m", Fraction(1, 10)),
    ("1e3", 1000), ("50", 50), (8192, 8192), (" 2Ki ", 2048),
])
def test_values_are_exact(text: str | int, value: int | Fraction) -> None:
    assert quantity_value(text) == value


def test_a_repeated_text_is_parsed_once_and_shared() -> None:
    first = parse_quantity("24Gi", "a")
    again = parse_quantity(" 24Gi", "b")
    assert again is first and first.value == 24 * 2**30


@pytest.mark.parametrize(("text", "says"), [
    ("8 Gi", "is not a valid quantity"), ("1e99", "exponents beyond"), ("9" * (MAX_TEXT + 1), "characters long"),
])
def test_refusals_name_the_field_every_time(text: str, says: str) -> None:
    for field in ("spec.memory", "limits.cores"):  # a refusal is never remembered under another name
        with pytest.raises(UserError) as err:
            parse_quantity(text, field)
        assert str(err.value).startswith(f"{field}: ") and says in str(err.value)


def test_whole_numbers_only_where_asked() -> None:
    assert to_int("1Ki", "x") == 1024
    with pytest.raises(UserError, match=r"x: '100m' must be a whole number"):
        to_int("100m", "x")
