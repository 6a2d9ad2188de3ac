"""Benchmark evidence: results carry their context, verdicts are ratios against same-run baselines,
and the committed REPORT.md is exactly what the committed results render."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from dralab_kit.bench import bench, report
from dralab_kit.bench import concurrency as conc
from dralab_kit.bench.results import RunStart, context, write_result
from dralab_kit.bench.vcore import THROTTLE_TOLERANCE_PP, throttle_verdict, verdicts

REPO = Path(__file__).resolve().parents[3]


def test_the_committed_report_is_what_the_committed_results_render(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    assert sorted(p.name for p in (REPO / "bench" / "results").glob("*.json")), "bench/results/*.json are committed"
    run = CliRunner().invoke(bench, ["report", "--check"])
    assert run.exit_code == 0, run.output


def test_check_fails_on_drift_and_names_the_fix(tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    (results / "vcore.json").write_text(json.dumps({"measured_at": "T", "single_process": {}, "meets_target": True}))
    out = tmp_path / "REPORT.md"
    assert CliRunner().invoke(report.report, ["--results", str(results), "--out", str(out)]).exit_code == 0
    ok = CliRunner().invoke(report.report, ["--results", str(results), "--out", str(out), "--check"])
    assert ok.exit_code == 0, ok.output
    out.write_text(out.read_text().replace("met", "met (edited by hand)", 1))
    drift = CliRunner().invoke(report.report, ["--results", str(results), "--out", str(out), "--check"])
    assert drift.exit_code == 1
    assert "differs from what" in drift.output and "run `dralab bench report`" in drift.output
    out.unlink()
    assert CliRunner().invoke(report.report, ["--results", str(results), "--out", str(out), "--check"]).exit_code == 1


def test_a_result_records_where_and_when_it_was_measured(tmp_path: Path) -> None:
    start = RunStart(load_average=[1.0, 2.0, 3.0], argv=["dralab", "bench", "vcore", "--quick"])
    ctx = context(True, start)
    assert ctx["run"] == "quick" and ctx["load_average"]["start"] == [1.0, 2.0, 3.0]
    assert len(ctx["load_average"]["end"]) == 3
    assert ctx["cores"] >= 1 and ctx["kernel"] and ctx["python"]
    assert ctx["command"] == "dralab bench vcore --quick"
    assert ctx["commit"] is None or len(ctx["commit"]) == 40
    assert "go" in ctx  # None where no Go is installed: said, not guessed
    assert context(False, start)["run"] == "full" and context(None, start)["run"] == "unknown"


def test_write_result_reads_quick_from_the_running_command(tmp_path: Path) -> None:
    @click.command()
    @click.option("--quick", is_flag=True)
    def fake(quick: bool) -> None:
        write_result(tmp_path, "fake", {"figure": 1})

    assert CliRunner().invoke(fake, ["--quick"]).exit_code == 0
    data = json.loads((tmp_path / "fake.json").read_text())
    assert data["benchmark"] == "fake" and data["figure"] == 1 and data["context"]["run"] == "quick"
    assert data["measured_at"] == data["context"]["date"]


def test_concurrency_is_judged_against_plain_pods_of_the_same_run() -> None:
    dra = {"n": [1, 10, 200], "pods_per_s": [20.0, 40.0, 36.0]}
    plain = {"n": [1, 10, 200], "pods_per_s": [25.0, 50.0, 50.0]}
    v = conc.verdict(dra, plain)
    assert v["dra_to_plain_by_n"] == {"1": 0.8, "10": 0.8, "200": 0.72}
    assert v["dra_to_plain_at_judged_n"] == 0.72 and v["meets_dra_to_plain"] is False
    assert v["ratio_largest_to_10"] == 0.9 and v["flat"] is True
    assert conc.verdict(dra, {**plain, "pods_per_s": [20.0, 40.0, 40.0]})["meets_dra_to_plain"] is True
    quick = conc.verdict({"n": [1, 10, 50], "pods_per_s": [1.0, 2.0, 2.0]}, {"n": [1, 10, 50], "pods_per_s": [1, 2, 2]})
    assert quick["meets_dra_to_plain"] is None  # N=200 not run: not judged, never "met"
    text = report.render({"concurrency": {**dra, "baseline": plain, "verdict": v}})
    assert "| concurrency | DRA pods/s ÷ plain pods/s, same run, at N=200 | 0.72 | >= 0.8 | NOT met |" in text
    quick_text = report.render({"concurrency": {"n": [1, 10, 50], "pods_per_s": [1.0, 2.0, 2.0], "verdict": quick}})
    assert "not judged: the run did not reach N=200" in quick_text


def test_the_no_dralab_baseline_and_cpu_render_only_when_measured() -> None:
    dra = {"n": [10, 200], "pods_per_s": [40.0, 50.0]}
    plain = {"n": [10, 200], "pods_per_s": [50.0, 100.0]}
    rnd = {"load_average": [1.0], "pods_per_s": {"dra": {"200": 50.0}, "plain": {"200": 100.0},
                                                  "direct": {"200": 80.0}},
           "dra_to_plain": 0.5, "direct_to_plain": 0.8, "dra_to_direct": 0.625, "flatness": 1.25,
           "split": conc.gap_split(50.0, 80.0, 100.0)}
    judged = {"small_n": 10, "large_n": 200, "repeats": 1, "rounds": [rnd],
              "dra_to_plain": conc._spread([0.5]), "direct_to_plain": conc._spread([0.8]),
              "dra_to_direct": conc._spread([0.625]), "direct_pods_per_s": conc._spread([80.0]),
              "split": {k: conc._spread([v]) for k, v in rnd["split"].items()}, "flatness": conc._spread([1.25])}
    res = {**dra, "baseline": plain, "direct": {"n": [10, 200], "pods_per_s": [45.0, 80.0]}, "judged": judged,
           "verdict": conc.verdict(dra, plain, judged),
           "cpu": {"n": 200, "by_kind": {kind: {"burst": {"apiserver": 3.0, "total": 5.0},
                                                "with_cleanup": {"apiserver": 4.0, "total": 7.0}}
                                         for kind in ("dra", "direct", "plain")}}}
    text = report.render({"concurrency": res})
    assert "Baseline: DRA pods without dralab" in text
    # gap 10 ms/pod = scheduler's 2.5 + dralab's 7.5
    assert "| median | 80 | 0.8 | 0.625 | 10 | 2.5 | 7.5 |" in text
    assert "**CPU per pod at N=200**" in text and "| apiserver | 3 | 3 | 3 | 4 | 4 | 4 |" in text
    old = report.render({"concurrency": {**dra, "baseline": plain, "verdict": conc.verdict(dra, plain)}})
    assert "without dralab" not in old and "CPU per pod" not in old


def test_throttle_accuracy_is_judged_within_five_points() -> None:
    v = throttle_verdict({25: [0.24, 0.25, 0.26], 50: [0.46, 0.47], 75: [0.69, 0.69]})
    rows = {r["limit_pct"]: r for r in v["limits"]}
    assert rows[25]["busy_pct"] == 25.0 and rows[25]["met"]
    assert rows[50]["error_pp"] == -3.5 and rows[50]["met"]
    assert rows[75]["error_pp"] == -6.0 and not rows[75]["met"]
    assert v["met"] is False and v["tolerance_pp"] == THROTTLE_TOLERANCE_PP


def test_vcore_verdicts_judge_single_cpu_and_contended_wall() -> None:
    results = {"single_process": {"best_overhead_cpu_ns_per_pair": 80.0},
               "contended_8": {"overhead_ns_per_pair": 7000.0}}  # fmt: skip
    throttle = throttle_verdict({25: [0.25]})
    v = verdicts(results, throttle)
    assert v["single_process_cpu_overhead"]["met"] is True
    assert v["contended_wall_overhead"]["met"] is False and v["contended_wall_overhead"]["ns_per_pair"] == 7000.0
    assert v["throttle_accuracy"] == {"tolerance_pp": 5.0, "worst_error_pp": 0.0, "met": True}
    text = report.render({"vcore": {**results, "verdicts": v, "throttle": {"kernels": 1, **throttle}}})
    assert "wall clock | 7000 ns | <= 5000 ns | NOT met |" in text
    assert "| 25 | 25 | 0 | 25.0 | met |" in text


def test_cluster_reports_recorded_builds_or_not_measured() -> None:
    build = {"wrapper": "etcd", "binaries": ["etcd"], "seconds": 31.5, "finished": "2026-12-01T08:00:00Z",
             "go": "go1.26.8", "modules": {"go.etcd.io/etcd/server/v3": "v3.6.5"}, "go_cache_was_present": False,
             "cpus": 2}  # fmt: skip
    text = report.render({"cluster": {"recorded_builds": {"builds": {"etcd": build}}}})
    assert "| etcd | etcd | 31.5 s | 2026-12-01T08:00:00Z | go1.26.8 | go.etcd.io/etcd/server/v3 v3.6.5 |" in text
    assert "Not measured: no build was recorded" in report.render({"cluster": {"recorded_builds": {"builds": "x"}}})


def test_admission_repeats_show_the_apiservers_own_share_when_measured() -> None:
    from dralab_kit.bench.sections.admission import apiserver_share

    def spread(v: float) -> dict:
        return {"median": v, "min": v, "max": v}

    summary = {"apiserver_mean_ms": {"create": {"200": spread(39.4)}, "direct": {"200": spread(16.0)}},
               "apiserver_share_over_25ms": {"create": {"200": spread(0.391)}, "direct": {"200": spread(0.079)}}}
    text = "\n".join(apiserver_share(summary, ["200"]))
    assert "| create | 39.4 / 0.391 |" in text and "| direct | 16 / 0.079 |" in text
    assert apiserver_share({}, ["200"]) == []  # older results: nothing to show


@pytest.mark.parametrize(("value", "target", "shown"), [
    (1.196, 1.2, "1.196"),  # would print "1.2" beside "<= 1.2" and be met
    (1.204, 1.2, "1.204"),  # would print "1.2" beside "<= 1.2" and be NOT met
    (1.2, 1.2, "1.2"),
    (1.42, 1.2, "1.42"),
    (0.9, 0.9, "0.9"),
    (None, 1.2, "-"),
    (1.1996, 1.2, "1.1996"),
])
def test_a_verdict_figure_never_prints_as_its_target_unless_it_is_it(value: float | None, target: float,
                                                                      shown: str) -> None:
    from dralab_kit.bench.common import fmt_beside

    assert fmt_beside(value, target) == shown


def test_a_result_of_another_kubernetes_version_is_reported_beside_the_defaults_never_mixed(tmp_path: Path) -> None:
    def _size(nodes: int, dralab_rate: float) -> dict:
        phases = {p: {"dralab": {"pods_per_s": dralab_rate}, "baseline": {"pods_per_s": 10.0}}
                  for p in ("fill", "churn", "burst")}
        return {"nodes": nodes, "devices_per_node": 8, "phases": phases}

    results = tmp_path / "results"
    (results / "kubernetes-v1.37.2").mkdir(parents=True)
    sizes = {"fleet": [_size(50, 9.5), _size(500, 9.5)], "kubernetes-v1.37.2/fleet": [_size(50, 9.0), _size(500, 5.0)]}
    for name, rows in sizes.items():
        (results / f"{name}.json").write_text(json.dumps(
            {"benchmark": "fleet", "quick": False, "devices_per_node": 8, "sizes": rows}))
    (results / "kubernetes-v1.37.2" / "fleet.png").write_bytes(b"png")
    out = tmp_path / "REPORT.md"
    run = CliRunner().invoke(report.report, ["--results", str(results), "--out", str(out)])
    assert run.exit_code == 0, run.output
    assert "from 2 result file(s)" in run.output
    text = out.read_text()
    ratio = [line for line in text.splitlines() if "dralab ÷ DRA without dralab" in line]
    assert ratio[0].startswith("| fleet |") and ratio[0].endswith("| met |"), ratio
    assert ratio[1].startswith("| fleet, Kubernetes v1.37.2 |") and ratio[1].endswith("| NOT met |"), ratio
    assert "## Fleet scale: simulated KWOK fleets against a plain DRA baseline, on Kubernetes v1.37.2" in text
    assert "`bench/results/kubernetes-v1.37.2/fleet.json`" in text
    assert "![fleet](results/kubernetes-v1.37.2/fleet.png)" in text
    assert "| fleet@v1.37.2 |" in text  # its own row under "Where and when"
    assert "## Other results" not in text
