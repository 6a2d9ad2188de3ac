"""``dralab bench driver`` writes driver.json: medians of runs with their spread, the targets, the baseline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from dralab_kit.bench.driver import PHASES, _across_runs, driver


def test_quick_memory_run_writes_the_result(tmp_path: Path) -> None:
    result = CliRunner().invoke(driver, ["--quick", "--memory", "--runs", "2", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "driver.json").read_text())
    assert data["benchmark"] == "driver" and data["runs"] == 2
    assert data["claim_source"] == "memory" and "--memory" in data["claim_source_note"]
    for key, _ in PHASES:
        assert data[key]["n"] > 0 and data[key]["p99_ms"] >= data[key]["p50_ms"] > 0
        assert len(data[key]["spread"]["p99_ms"]["runs"]) == 2
    assert data["prepare_16_claims"]["p50_per_claim_ms"] * 16 == pytest.approx(
        data["prepare_16_claims"]["p50_ms"], abs=0.05
    )
    assert set(data["targets"]) == {"prepare_1_claim_p99_ms", "prepare_16_claims_p99_per_claim_ms"}
    assert data["meets_target"] == all(t["met"] for t in data["targets"].values())
    writes = data["prepare_1_claim_concurrent_8"]["checkpoint_writes_per_call"]
    assert 0 < writes <= 1, "each call costs at most one checkpoint write"


def test_figures_are_the_median_of_the_runs_with_the_spread() -> None:
    runs = [
        {"n": 10, "p50_ms": 1.0, "p99_ms": 9.0, "p50_per_claim_ms": 1.0, "p99_per_claim_ms": 9.0},
        {"n": 10, "p50_ms": 3.0, "p99_ms": 4.0, "p50_per_claim_ms": 3.0, "p99_per_claim_ms": 4.0},
        {"n": 10, "p50_ms": 2.0, "p99_ms": 5.0, "p50_per_claim_ms": 2.0, "p99_per_claim_ms": 5.0},
    ]
    out = _across_runs(runs)
    assert (out["n"], out["p50_ms"], out["p99_ms"]) == (30, 2.0, 5.0)
    assert out["spread"]["p99_ms"] == {"min": 4.0, "max": 9.0, "runs": [9.0, 4.0, 5.0]}
