"""``dralab bench driver`` writes driver.json with the figures and the baseline of the same run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from dralab.bench.driver import driver


def test_quick_memory_run_writes_the_result(tmp_path: Path) -> None:
    result = CliRunner().invoke(driver, ["--quick", "--memory", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "driver.json").read_text())
    assert data["benchmark"] == "driver"
    assert data["claim_source"] == "memory" and "--memory" in data["claim_source_note"]
    for key in ("baseline_empty_prepare", "prepare_1_claim", "prepare_16_claims", "publish_8_devices"):
        assert data[key]["n"] > 0 and data[key]["p99_ms"] >= data[key]["p50_ms"] > 0
    assert data["prepare_16_claims"]["p50_per_claim_ms"] * 16 == pytest.approx(
        data["prepare_16_claims"]["p50_ms"], abs=0.02
    )
