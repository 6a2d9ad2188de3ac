"""dralab bench fleet-quiet's pure parts: merging lone pods' batches, rest subtraction, the verdict, the section."""

from __future__ import annotations

from typing import Any

from dralab_kit.bench import quiet
from dralab_kit.bench.concurrency import Burst
from dralab_kit.bench.models import parse
from dralab_kit.bench.sections.quiet import section, verdicts


def test_merge_keeps_every_pods_figures_and_the_whole_span() -> None:
    a = Burst(n=1, latencies=[0.2], running=[0.5], admitted=[0.1], completion_s=0.2, retries=1)
    b = Burst(n=1, latencies=[], running=[], admitted=[0.1], completion_s=float("nan"), failures=1,
              first_error="1 pod(s) not bound", not_running=0, watch_restarts=2)
    got = quiet.merge([a, b], 7.5)
    assert got.n == 2 and got.completion_s == 7.5
    assert got.latencies == [0.2] and got.running == [0.5] and got.admitted == [0.1, 0.1]
    assert (got.failures, got.first_error, got.retries, got.watch_restarts) == (1, "1 pod(s) not bound", 1, 2)


def test_component_above_rest_takes_the_rest_over_the_window_per_pod_and_keeps_negatives() -> None:
    row = {"cpu_ms_per_pod": {"webhook": 10.0, "driver": 1.0}, "window_s": 30.0, "created": 10}
    assert quiet.component_above_rest(row, "webhook", {"webhook": 2.0}) == 4.0  # 10 - 2 ms/s * 30 s / 10
    assert quiet.component_above_rest(row, "driver", {"driver": 1.0}) == -2.0  # noise is shown, not hidden
    assert quiet.component_above_rest(row, "webhook", {}) is None
    assert quiet.component_above_rest({**row, "created": 0}, "webhook", {"webhook": 2.0}) is None


def _size(nodes: int, work: float, above: float, prepare: float, leaks: int = 0) -> dict[str, Any]:
    def row(kind: str) -> dict[str, Any]:
        return {"pods": 30, "created": 30, "window_s": 60.0, "running_p50_s": 0.4, "running_p99_s": 0.9,
                "cpu_ms_per_pod": {"webhook": 20.0, "driver": 50.0, "apiserver": 40.0},
                "dralab_work_cpu_ms_per_pod": work if kind == "dralab" else None,
                "dralab_cpu_ms_per_pod_above_rest": above,
                "driver_work_cpu_ms_per_pod": {"prepare": prepare, "unprepare": 1.0, "status": 1.0, "reconcile": 9.0}}
    phases = {p: {k: row(k) for k in ("dralab", "baseline")} for p in quiet.QUIET_PHASES}
    return {"nodes": nodes, "quiet_pods": 60, "phases": phases,
            "rest_cpu_ms_per_s": {"webhook": 5.0, "driver": 10.0, "apiserver": 10.0},
            "leaks": {"claims": leaks, "capacity": 0, "prepared": 0}}


def test_verdict_divides_the_largest_size_by_the_smallest_whatever_the_order() -> None:
    v = quiet.verdict([_size(500, 6.6, 12.0, 4.0), _size(50, 6.0, 10.0, 3.0)])
    assert (v["largest_nodes"], v["smallest_nodes"]) == (500, 50)
    assert v["pod_work_cpu_growth"] == 1.1 and v["meets_pod_work_cpu_growth"] is True
    assert v["cpu_growth_above_rest"] == 1.2 and v["meets_cpu_growth_above_rest"] is True
    assert v["driver_pod_work_growth"] == {"dralab": 1.2, "baseline": 1.2}  # (4+1+1) / (3+1+1): no reconcile
    assert v["driver_pod_work_growth_vs_baseline"] == 1.0 and v["meets_driver_pod_work_growth_vs_baseline"] is True
    assert v["webhook_cpu_growth"] == 1.0  # 20 - 5 ms/s * 60 s / 30 = 10 ms at either size
    assert v["above_rest_ms_per_pod"]["500"]["dralab"]["apiserver"] == 20.0  # 40 - 10 ms/s * 60 s / 30
    assert v["no_leaks"] is True


def test_verdict_fails_growth_and_leaks_and_judges_nothing_from_one_size() -> None:
    v = quiet.verdict([_size(50, 6.0, 10.0, 3.0), _size(500, 9.0, 10.0, 3.0, leaks=2)])
    assert v["pod_work_cpu_growth"] == 1.5 and v["meets_pod_work_cpu_growth"] is False
    assert v["no_leaks"] is False
    one = quiet.verdict([_size(50, 6.0, 10.0, 3.0)])
    assert one["pod_work_cpu_growth"] is None and one["meets_pod_work_cpu_growth"] is None
    stopped = {"nodes": 500, "failed": "fill: TimeoutError", "phases": {quiet.QUIET: {}, quiet.QUIET_AGAIN: {}}}
    assert quiet.verdict([_size(50, 6.0, 10.0, 3.0), stopped])["largest_nodes"] == 50  # a stopped size is left out
    assert quiet.verdict([]) == {}


def test_section_and_verdict_rows_render_from_the_result_file() -> None:
    res = parse("fleet-quiet", {"benchmark": "fleet-quiet", "devices_per_node": 8, "quiet_pods": 30, "fill_per_node": 8,
                                "pod": {"cores": 50}, "control_plane": ["apiserver"],
                                "sizes": [_size(50, 6.0, 10.0, 3.0), _size(500, 9.0, 10.0, 3.0)]})
    rows = verdicts(res)
    assert rows[0][2:] == ["1.5", "<= 1.2", "NOT met"]
    assert "dralab 1, baseline 1" in rows[2][1] and rows[2][2:] == ["1", "<= 1.2", "met"]
    text = "\n".join(section(res))
    assert "| 500 | first | dralab | 30 | 0.4 / 0.9 | 9 | 3 / 1 / 1 | 10 |" in text  # webhook: 20 - 5 * 60 / 30
    assert "| 500 | again | baseline | 30 |" in text
    assert "apiserver above rest ms" in text


def test_each_kind_is_the_mean_of_its_two_windows_and_a_missing_window_is_left_out_of_both_sizes() -> None:
    small, large = _size(50, 6.0, 10.0, 3.0), _size(500, 6.0, 10.0, 3.0)
    large["phases"][quiet.QUIET_AGAIN]["dralab"]["dralab_work_cpu_ms_per_pod"] = 12.0  # mean (6 + 12) / 2 = 9
    assert quiet.verdict([small, large])["pod_work_cpu_growth"] == 1.5
    del large["phases"][quiet.QUIET_AGAIN]["baseline"]  # stopped before its last window
    v = quiet.verdict([small, large])
    assert v["phases_compared"] == [quiet.QUIET] and v["pod_work_cpu_growth"] == 1.0  # the first windows only
    assert quiet.mean([1.0, None]) is None and quiet.mean([]) is None and quiet.mean([1.0, 2.0]) == 1.5
