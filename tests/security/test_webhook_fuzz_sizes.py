"""The fuzz campaign's exponent, digit-length and size generators against the real ASGI app: every hostile
value is denied (or its body refused with 413), never admitted and never a 5xx."""

from __future__ import annotations

from dralab_kit.fuzz.admission import fuzz_admission


def test_size_attacks_are_all_denied() -> None:
    result = fuzz_admission(400, seed=14, only=("size_attacks",))["size_attacks"]
    assert result["passed"], result["examples"]
    assert result["cases"] >= 30
    assert set(result["outcomes"]) <= {"/mutate 200 denied", "/validate 200 denied", "/mutate 413", "/validate 413"}
    assert result["outcomes"].get("/mutate 200 denied", 0) > 0
