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
        assert data["summary"]["max_rps"][name]["median"] > 0
        assert entry["closed_loop"]["throughput_rps"] > 0
        assert entry["closed_loop"]["server_cpu_ms_per_request"] >= 0
    assert "not up" in data["handlers"]["create"]["skipped"]
    assert "ratio" in data["targets"]["convert_max_throughput_vs_noop"]
    assert "skipped" in data["targets"]["create_p99_at_100_rps"]


def test_summary_takes_ratios_inside_each_run_then_the_median_and_spread() -> None:
    from dralab.bench.admission import summarize

    def rnd(noop: float, conv: float, p99: float, errors: int = 0) -> dict:
        row = {"offered_rps": 100, "p99_ms": p99, "errors": errors}
        return {"handlers": {"noop": {"open_loop": [row], "closed_loop": {"throughput_rps": noop}},
                             "convert": {"open_loop": [row], "closed_loop": {"throughput_rps": conv}}}}

    s = summarize([rnd(100, 80, 5), rnd(200, 100, 7), rnd(50, 45, 9, errors=2)], (100,))
    assert s["convert_vs_noop_max"]["median"] == 0.8  # ratios 0.8, 0.5, 0.9 per run
    assert (s["convert_vs_noop_max"]["min"], s["convert_vs_noop_max"]["max"]) == (0.5, 0.9)
    assert s["p99_ms"]["convert"]["100"]["runs"] == [5, 7, None]  # a run with errors has no valid p99
    assert s["p99_ms"]["convert"]["100"]["median"] == 6
    assert s["errors"]["convert"]["100"] == [0, 0, 2]
