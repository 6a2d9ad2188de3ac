"""``dralab bench vcore``: result parsing, the summary, and a quick run writing vcore.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from dralab_kit.bench.vcore import Sample, parse_result, summarise, vcore
from dralab.errors import UserError


def test_parse_result_line() -> None:
    out = "proc ns_per_pair=10.0 cpu_ns_per_pair=9.0\nresult procs=1 iterations=5 failed=0 ns_per_pair_mean=10.0 "
    out += "ns_per_pair_max=10.0 cpu_ns_per_pair_mean=9.0\n"
    assert parse_result(out) == Sample(10.0, 9.0)
    with pytest.raises(UserError, match="failed"):
        parse_result(out.replace("failed=0", "failed=2"))
    with pytest.raises(UserError, match="no result"):
        parse_result("")


def test_summary_uses_medians_and_best_of_cpu() -> None:
    base = [Sample(100, 50), Sample(300, 40), Sample(200, 60)]
    lib = [Sample(400, 120), Sample(250, 100), Sample(500, 110)]
    result = summarise(base, lib, 1)
    assert result["baseline_ns_per_pair"] == 200 and result["vcore_ns_per_pair"] == 400
    assert result["overhead_ns_per_pair"] == 200
    assert result["overhead_cpu_ns_per_pair"] == 110 - 50
    assert result["best_overhead_cpu_ns_per_pair"] == 100 - 40


def test_quick_bench_writes_vcore_json(vcore_build, tmp_path: Path) -> None:
    res = CliRunner().invoke(vcore, ["--quick", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    data = json.loads((tmp_path / "vcore.json").read_text())
    assert data["benchmark"] == "vcore"
    for key in ("single_process", "contended_8"):
        assert data[key]["baseline_ns_per_pair"] > 0
        assert data[key]["vcore_ns_per_pair"] > 0
    assert data["contended_8"]["processes"] == 8
    assert isinstance(data["meets_target"], bool)
    assert set(data["verdicts"]) == {"single_process_cpu_overhead", "contended_wall_overhead", "throttle_accuracy"}
    assert [r["limit_pct"] for r in data["throttle"]["limits"]] == [25, 50, 75]
    assert all(0 < r["busy_pct"] <= 100 for r in data["throttle"]["limits"])
    assert data["context"]["run"] == "quick" and data["context"]["load_average"]["start"]
