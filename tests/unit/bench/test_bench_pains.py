"""The pains benchmark's pure parts: the stall figure, the scheduler's reasons, the report section."""

from __future__ import annotations

from dralab_kit.bench.models.pains import PainsResult
from dralab_kit.bench.pains import _failed_prepare, pending_reasons
from dralab_kit.bench.sections.pains import section


def test_stall_figure_compares_neighbours_with_the_baseline_pods() -> None:
    metrics = {
        "baseline_1_running_seconds": 0.2, "baseline_2_running_seconds": 0.4, "baseline_3_running_seconds": 0.3,
        "neighbour_1_running_seconds": 0.5, "neighbour_2_running_seconds": 0.1, "neighbour_3_running_seconds": 0.3,
        "recovery_seconds": 2.0,
    }  # fmt: skip
    out = _failed_prepare(metrics)
    assert out["baseline_running_seconds"] == [0.2, 0.4, 0.3]
    assert out["extra_delay_seconds"] == 0.1 and out["extra_delay_median_seconds"] == 0.0
    assert out["recovery_seconds"] == 2.0


def test_pending_reasons_come_from_passed_expect_pending_operations() -> None:
    event = {"reason": "FailedScheduling", "message": "preemption: not helpful"}
    result = {
        "steps": [
            {"ops": [
                {"kind": "expect-pending", "status": "passed", "excerpt": {"pod": {"name": "urgent"}, "event": event}},
                {"kind": "expect-pending", "status": "failed", "excerpt": {"pod": {"name": "other"}, "event": event}},
                {"kind": "apply", "status": "passed"},
            ]}
        ]
    }  # fmt: skip
    assert pending_reasons(result) == {"urgent": "preemption: not helpful"}


def test_section_shows_each_figure() -> None:
    res = {
        "profile": "local",
        "budget_burst": {"overshoot_bytes": 0, "pods": 24, "admitted": 8, "expected_admitted": 8, "denied": 16},
        "failed_prepare": {"extra_delay_seconds": 0.01, "neighbour_running_seconds": [0.1],
                           "baseline_running_seconds": [0.1]},
        "preemption": {"kube_scheduler_preempted": False, "scheduler_reasons": {"urgent": "not helpful"},
                       "evict_to_running_seconds": 0.2},
    }  # fmt: skip
    text = "\n".join(section(PainsResult.model_validate(res)))
    assert "| budget burst: overshoot | 0 bytes |" in text
    assert "| preemption of sharers by kube-scheduler 1.35 | none | urgent: not helpful |" in text
    assert "0.2 s" in text and "`dralab bench pains --profile local`" in text
