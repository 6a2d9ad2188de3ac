"""The admission benchmark runs end to end (tiny durations) and records why it skips the create handler."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from dralab_kit.bench.admission import admission


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
        # measured together, on the same connections, taking turns (closed_loop_turns)
        assert entry["closed_loop"]["turns_with"] == ["noop", "convert"]
        assert entry["closed_loop"]["generator_cpu_share"] > 0
        assert entry["open_loop"][0]["start_lag_max_ms"] >= entry["open_loop"][0]["start_lag_p99_ms"]
    assert "not up" in data["handlers"]["create"]["skipped"]
    for name in ("single", "prefer"):  # no cluster: on the conversion path, closed loops taking turns
        assert data["handlers"][name]["path"] == "/bench/convert"
        assert data["handlers"][name]["closed_loop"]["turns_with"] == ["single", "prefer"]
    assert data["summary"]["prefer_vs_single_cpu"]["ratio"]["median"] > 0
    assert "ratio" in data["targets"]["convert_max_throughput_vs_noop"]
    assert "skipped" in data["targets"]["create_p99_at_100_rps"]


def test_summary_takes_ratios_inside_each_run_then_the_median_and_spread() -> None:
    from dralab_kit.bench.admission import summarize

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


def test_schedule_lag_reports_how_late_the_generator_started_requests() -> None:
    from dralab_kit.bench.admission import schedule_lag

    lags = [0.001] * 99 + [0.050]
    assert schedule_lag(lags) == {"start_lag_p99_ms": 1.0, "start_lag_max_ms": 50.0}
    assert schedule_lag([]) == {}


def test_a_run_of_some_handlers_leaves_the_missing_ratios_out() -> None:
    from dralab_kit.bench.admission import _targets, summarize

    def rnd(create: float, direct: float) -> dict:
        def row(p99: float) -> dict:
            return {"offered_rps": 200, "p99_ms": p99, "errors": 0}
        return {"handlers": {"create": {"open_loop": [row(create)]}, "direct": {"open_loop": [row(direct)]}}}

    s = summarize([rnd(30, 20), rnd(10, 20)], (200,))
    assert "convert_vs_noop_max" not in s
    assert s["create_p99_vs_direct_p99"]["200"]["runs"] == [1.5, 0.5]
    targets = _targets(s, {})
    assert targets["convert_max_throughput_vs_noop"]["ratio"] is None
    assert targets["create_p99_every_rate"]["p99_ms_by_rate"] == {"200": 20.0}


CLAIMS = ('component="apiserver",dry_run="",group="resource.k8s.io",resource="resourceclaims",scope="resource",'
          'subresource="",verb="POST",version="v1"')
PODS = CLAIMS.replace('group="resource.k8s.io",resource="resourceclaims"', 'group="",resource="pods"')
ETCD = 'group="resource.k8s.io",operation="create",resource="resourceclaims"'
METRICS = "\n".join([
    "# HELP apiserver_request_duration_seconds x",
    *(f'apiserver_request_duration_seconds_bucket{{{CLAIMS},le="{le}"}} {{{v}}}'
      for le, v in (("0.005", "a"), ("0.025", "b"), ("0.1", "c"), ("+Inf", "c"))),
    f"apiserver_request_duration_seconds_sum{{{CLAIMS}}} {{s}}",
    f"apiserver_request_duration_seconds_count{{{CLAIMS}}} {{c}}",
    f"apiserver_request_duration_seconds_count{{{PODS}}} 999",  # other resources do not count
    *(f'etcd_request_duration_seconds_bucket{{{ETCD},le="{le}"}} {{{v}}}'
      for le, v in (("0.005", "a"), ("0.025", "b"), ("0.1", "c"), ("+Inf", "c"))),
    f"etcd_request_duration_seconds_sum{{{ETCD}}} {{s}}",
    f"etcd_request_duration_seconds_count{{{ETCD}}} {{c}}",
    'etcd_request_duration_seconds_count{group="",operation="create",resource="pods"} 999',
])


def test_the_apiservers_own_create_latency_is_read_between_two_readings() -> None:
    from dralab_kit.bench.admission import claim_create_histograms, create_latency

    def reading(a: int, b: int, c: int, s: float) -> dict[str, dict[str, float]]:
        return claim_create_histograms(METRICS.replace("{a}", str(a)).replace("{b}", str(b)).replace("{c}", str(c))
                                       .replace("{s}", str(s)))

    before = reading(10, 10, 10, 0.03)
    after = reading(10 + 50, 10 + 98, 10 + 100, 0.03 + 0.5)  # 100 creates: 50 within 5 ms, 2 over 25 ms
    got = create_latency(before, after)
    assert {k: v for k, v in got.items() if k.startswith("apiserver")} == {
        "apiserver_creates": 100, "apiserver_mean_ms": 5.0, "apiserver_p50_at_most_ms": 5.0,
        "apiserver_p99_at_most_ms": 100.0, "apiserver_share_over_25ms": 0.02}
    # the etcd writes of those creates (scaled copy of the same buckets: 100 writes, 2 over 25 ms)
    assert got["etcd_creates"] == 100 and got["etcd_share_over_25ms"] == 0.02 and got["etcd_mean_ms"] == 5.0
    assert create_latency(before, before) == {}  # nothing created in between


def test_machine_cpu_counts_every_state_but_idle_and_iowait_as_busy() -> None:
    import os

    from dralab_kit.bench.cpu import machine_cpu

    hz = os.sysconf("SC_CLK_TCK")
    stat = "cpu  100 10 50 700 40 5 5 90 0 0\ncpu0 50 5 25 350 20 2 3 45 0 0\nintr 1\n"
    busy, total = machine_cpu(stat)
    assert (busy * hz, total * hz) == (260, 1000)  # user nice system irq softirq steal; of all eight states


def test_cpu_during_gives_cores_per_process_the_rest_and_the_busy_share() -> None:
    from dralab_kit.bench.admission import cpu_during

    before = {"apiserver": 10.0, "bench webhook": 2.0, "generator": 1.0, "machine busy": 100.0, "machine total": 400.0}
    after = {"apiserver": 14.0, "bench webhook": 4.0, "generator": 1.5, "machine busy": 108.0, "machine total": 416.0}
    got = cpu_during(before, after, 8.0)  # 8 s on a 2-core machine: 16 core-seconds, 8 of them busy
    assert got["cores"] == {"apiserver": 0.5, "bench webhook": 0.25, "generator": 0.062, "other": 0.188}
    assert got["machine_busy"] == 0.5


def test_cpu_summary_takes_the_median_per_handler_and_rate_and_the_report_shows_it() -> None:
    from dralab_kit.bench.admission import summarize
    from dralab_kit.bench.sections.admission import machine_share

    def rnd(busy: float, hook: float) -> dict:
        def row(name: str) -> dict:
            cores = {"apiserver": 0.8, "etcd": 0.2, "bench webhook": hook if name == "create" else 0.05,
                     "generator": 0.1, "scheduler": 0.05, "cluster webhook": 0.03, "other": 0.1}
            return {"offered_rps": 200, "p99_ms": 30.0, "errors": 0, "cpu": {"cores": cores, "machine_busy": busy}}
        return {"handlers": {n: {"open_loop": [row(n)]} for n in ("create", "direct")}}

    s = summarize([rnd(0.9, 0.4), rnd(0.7, 0.3), rnd(0.8, 0.35)], (200,))
    create = s["cpu_during_open_loop"]["create"]["200"]
    assert create["machine_busy"]["median"] == 0.8 and create["machine_busy"]["min"] == 0.7
    assert create["cores"]["bench webhook"] == 0.35
    text = "\n".join(machine_share(s["cpu_during_open_loop"], ["200"]))
    assert "| create | 200 | 0.8 (0.7-0.9) | 0.8 | 0.2 | 0.35 | 0.1 | 0.08 | 0.1 | 1.75 |" in text
    assert machine_share({}, ["200"]) == []  # older results: nothing to show
    # a round measured without CPU readings leaves the summary out rather than guessing
    plain = rnd(0.8, 0.3)
    for h in plain["handlers"].values():
        del h["open_loop"][0]["cpu"]
    assert "cpu_during_open_loop" not in summarize([plain], (200,))


def test_settle_machine_waits_for_a_quiet_window_and_gives_up_at_its_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    from dralab_kit.bench import cpu

    # (busy, total) readings: windows busy 90 %, 60 %, then 20 %
    readings = iter([(0, 0), (9, 10), (9, 10), (15, 20), (15, 20), (17, 30)])
    monkeypatch.setattr(cpu, "machine_cpu", lambda: next(readings))
    assert cpu.settle_machine(below=0.35, window=0.0) == 0.2

    busy = iter([(i * 10, i * 10) for i in range(100)])  # always fully busy
    monkeypatch.setattr(cpu, "machine_cpu", lambda: next(busy))
    assert cpu.settle_machine(below=0.35, window=0.0, limit=0.0) == 1.0  # the limit ends the wait, the share says why


def test_turns_row_gives_each_process_cpu_per_request_and_themachine_share() -> None:
    from dralab_kit.bench.admission import Sample, _turns_row

    sample = Sample(ok_status=201, ok_marker=b'"uid"')
    for _ in range(400):
        sample.record(0.01, 201, b'{"uid":"x"}')
    used = {"apiserver": 1.2, "bench webhook": 0.4, "generator": 0.1, "machine busy": 1.9, "machine total": 2.0}
    row = _turns_row(sample, used, elapsed=1.0, workers=16, names=["direct", "create"], slices=8)
    assert row["throughput_rps"] == 400 and row["machine_busy"] == 0.95
    assert row["cpu_ms_per_request"] == {"apiserver": 3.0, "bench webhook": 1.0, "generator": 0.25, "other": 0.5}
    assert row["server_cpu_ms_per_request"] == 1.0 and row["apiserver_cpu_ms_per_request"] == 3.0
    assert row["generator_cpu_share"] == 0.1 and row["turns_with"] == ["direct", "create"]


def test_closed_loop_cpu_splits_creates_extra_cost_by_process() -> None:
    from dralab_kit.bench.admission import summarize
    from dralab_kit.bench.sections.admission import closed_loop_cpu

    def rnd(api_create: float, hook: float) -> dict:
        def loop(name: str, rps: float) -> dict:
            per = {"apiserver": api_create if name == "create" else 3.0, "etcd": 0.4,
                   "bench webhook": hook if name == "create" else 0.1, "generator": 0.2, "kwok": 0.0}
            return {"throughput_rps": rps, "machine_busy": 0.99, "cpu_ms_per_request": per,
                    "apiserver_cpu_ms_per_request": per["apiserver"]}
        row = {"offered_rps": 100, "p99_ms": 20.0, "errors": 0}
        return {"handlers": {"create": {"open_loop": [row], "closed_loop": loop("create", 300)},
                             "direct": {"open_loop": [row], "closed_loop": loop("direct", 400)}}}

    s = summarize([rnd(3.4, 1.0), rnd(3.8, 1.2), rnd(3.2, 0.9)], (100,))
    assert s["closed_loop_cpu"]["create"]["ms_per_request"]["apiserver"] == 3.4
    assert s["closed_loop_cpu"]["create"]["ms_per_request"]["bench webhook"] == 1.0
    text = "\n".join(closed_loop_cpu(s["closed_loop_cpu"]))
    assert "| create - direct |  | 0.4 | 0 | 0.9 | 0 | 0 | 1.3 |" in text  # apiserver, etcd, webhook, ..., total
    assert closed_loop_cpu({}) == []  # older results: nothing to show


def test_the_report_shows_the_apiservers_etcd_writes_beside_its_requests() -> None:
    from dralab_kit.bench.sections.admission import apiserver_share

    def by_rate(create: float, direct: float) -> dict:
        return {"create": {"200": {"median": create}}, "direct": {"200": {"median": direct}}}

    summary = {"apiserver_mean_ms": by_rate(13.5, 6.1), "apiserver_share_over_25ms": by_rate(0.15, 0.004),
               "etcd_share_over_25ms": by_rate(0.1, 0.01)}
    text = "\n".join(apiserver_share(summary, ["200"]))
    assert "| create | 13.5 / 0.15 / 0.1 |" in text and "etcd writes" in text
    del summary["etcd_share_over_25ms"]  # older results: the two columns they have
    assert "| direct | 6.1 / 0.004 |" in "\n".join(apiserver_share(summary, ["200"]))


def test_prefer_pods_are_judged_against_single_type_pods_by_cpu_per_admission_within_each_round() -> None:
    from dralab_kit.bench.admission import summarize

    def rnd(prefer: float, single: float) -> dict:
        row = {"offered_rps": 100, "p99_ms": 5, "errors": 0}
        return {"handlers": {"noop": {"open_loop": [row], "closed_loop": {"throughput_rps": 100}},
                             "single": {"open_loop": [], "closed_loop": {"server_cpu_ms_per_request": single}},
                             "prefer": {"open_loop": [], "closed_loop": {"server_cpu_ms_per_request": prefer}}}}

    s = summarize([rnd(1.2, 1.0), rnd(3.0, 2.0), rnd(1.1, 1.0)], (100,))
    assert "prefer" not in s["p99_ms"] and "single" not in s["p99_ms"]  # closed loops only
    assert s["server_cpu_ms_per_request"]["prefer"]["median"] == 1.2
    assert s["prefer_vs_single_cpu"]["ratio"]["runs"] == [1.2, 1.5, 1.1]
    assert s["prefer_vs_single_cpu"]["ratio"]["median"] == 1.2
    assert s["prefer_vs_single_cpu"]["extra_ms"]["runs"] == [0.2, 1.0, 0.1]


def test_typed_bodies_carry_the_prefer_or_the_single_type_annotation() -> None:
    from dralab.model.convert import ANN_PREFER_TYPES
    from dralab_kit.bench.admission import Bodies, typed_pod

    prefer = json.loads(Bodies("ns", typed_pod("prefer")).next())["request"]["object"]
    single = json.loads(Bodies("ns", typed_pod("single")).next())["request"]["object"]
    assert prefer["metadata"]["annotations"] == {ANN_PREFER_TYPES: "l4,h100,a100"}
    assert single["metadata"]["annotations"] == {"nvidia.com/use-gputype": "a100"}
    assert prefer["spec"] == single["spec"]


def test_the_report_shows_prefer_against_single_per_process_when_measured() -> None:
    from dralab_kit.bench.models.admission import AdmissionResult
    from dralab_kit.bench.sections.admission import section

    fig = {"ratio": {"median": 1.13, "min": 1.1, "max": 1.2}, "extra_ms": {"median": 0.2, "min": 0.2, "max": 0.2}}
    res = {"summary": {"prefer_vs_single_cpu": fig, "prefer_vs_single_apiserver_cpu": fig},
           "typed_pods": {"path": "/mutate", "prefer": "3 types", "single": "one type"}}
    text = "\n".join(section(AdmissionResult.model_validate(res)))
    assert "| webhook | 1.13 (1.1-1.2) | 0.2 |" in text and "| apiserver | 1.13 (1.1-1.2) | 0.2 |" in text
    assert "prefer ÷ single" not in "\n".join(section(AdmissionResult(summary={})))
