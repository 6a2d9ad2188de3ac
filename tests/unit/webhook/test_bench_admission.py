"""The admission benchmark runs end to end (tiny durations) and records why it skips the create handler."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from dralab.bench.admission import admission


@pytest.mark.slow
def test_bench_writes_results_and_skip_reason(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        admission, ["--quick", "--duration", "0.3", "--cluster", "no-such-cluster-here", "--out", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "admission.json").read_text())
    assert data["baseline"] == "noop"
    for name in ("noop", "convert"):
        entry = data["handlers"][name]
        assert entry["open_loop"][0]["offered_rps"] == 100
        assert entry["open_loop"][0]["errors"] == 0 and entry["open_loop"][0]["completed"] > 0
        assert entry["closed_loop"]["throughput_rps"] > 0
        assert entry["closed_loop"]["server_cpu_ms_per_request"] >= 0
    assert "not up" in data["handlers"]["create"]["skipped"]
    assert "ratio" in data["targets"]["convert_max_throughput_vs_noop"]
    assert "skipped" in data["targets"]["create_p99_at_100_rps"]
