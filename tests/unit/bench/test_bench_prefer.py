"""The pure parts of the firstAvailable benchmarks: the pods they send, the node they use, their statistics."""

from __future__ import annotations

import click
import pytest

from dralab.model.convert import convert_pod
from dralab.model.vendors import load_vendor_table
from dralab_kit.bench import prefer, taints


def _request(pod: dict) -> dict:
    (claim,) = convert_pod(pod, load_vendor_table(), namespace="ns").objects
    (request,) = claim["spec"]["devices"]["requests"]
    return request


def test_a_prefer_pod_becomes_three_subrequests_in_order_and_a_single_pod_one_exact_request() -> None:
    many = _request(prefer.kind_pod("prefer", "p"))
    assert [sub["name"] for sub in many["firstAvailable"]] == list(prefer.PREFER_TYPES)
    assert all(sub["capacity"]["requests"]["cores"] == str(prefer.POD_CORES) for sub in many["firstAvailable"])
    one = _request(prefer.kind_pod("single", "s"))
    assert "firstAvailable" not in one
    assert any(prefer.SINGLE_TYPE.upper() in s["cel"]["expression"] for s in one["exactly"]["selectors"])
    with pytest.raises(ValueError, match="unknown kind 'other'"):
        prefer.kind_pod("other", "x")
    with pytest.raises(ValueError, match="at least one"):
        prefer.typed_pod("x", ())


def test_the_node_makes_most_prefer_pods_fall_back_and_holds_every_single_pod() -> None:
    (node,) = prefer.inventory_doc()["nodes"]
    products = [d["productName"] for d in node["devices"]]
    assert len(products) == sum(c for _, _, c, _ in prefer.CARDS) and len(set(d["name"] for d in node["devices"])) == 7
    first, second = (prefer.capacity(t) for t in prefer.PREFER_TYPES[:2])
    assert first + second < prefer.N_QUICK  # even the quick burst passes two full types
    assert prefer.capacity(prefer.SINGLE_TYPE) >= prefer.N_FULL
    prefer.check_size(prefer.N_FULL)
    with pytest.raises(click.BadParameter, match="--n 250 or less"):
        prefer.check_size(251)


def test_judge_takes_the_ratio_inside_each_round_then_median_and_spread() -> None:
    def rnd(p: float | None, s: float) -> dict:
        return {"prefer": {"pods_per_s": p, "p50_s": 1.0, "p99_s": 2.0}, "single": {"pods_per_s": s, "p50_s": 1.0,
                                                                                   "p99_s": 1.5}}

    j = prefer.judge([rnd(40, 50), rnd(30, 60), rnd(None, 50), rnd(45, 50)])
    assert j["prefer_to_single_pods_per_s"]["runs"] == [0.8, 0.5, None, 0.9]
    assert j["prefer_to_single_pods_per_s"]["median"] == 0.8
    assert (j["prefer"]["pods_per_s"]["min"], j["prefer"]["pods_per_s"]["max"]) == (30, 45)
    assert j["single"]["p99_s"]["median"] == 1.5


def test_allocation_mix_counts_results_by_subrequest() -> None:
    def claim(*requests: str) -> dict:
        return {"status": {"allocation": {"devices": {"results": [{"request": r} for r in requests]}}}}

    assert prefer.allocation_mix([claim("gpu/l4"), claim("gpu/a100"), claim("gpu/a100"), {"status": {}}]) == {
        "gpu/a100": 2, "gpu/l4": 1}


def _slice(*devices: dict) -> dict:
    return {"spec": {"devices": list(devices)}}


def test_tainted_looks_for_the_unhealthy_key_on_that_device_only() -> None:
    sick = {"name": "gpu-0", "taints": [{"key": taints.TAINT_KEY, "effect": "NoSchedule"}]}
    other = {"name": "gpu-1", "taints": [{"key": "example.com/other", "effect": "NoSchedule"}]}
    assert taints.tainted([_slice(sick, other)], "gpu-0")
    assert not taints.tainted([_slice(sick, other)], "gpu-1")
    assert not taints.tainted([_slice({"name": "gpu-0"})], "gpu-0")


def test_allocated_maps_each_pod_to_its_device_and_skips_unallocated_claims() -> None:
    from dralab.model.convert import ANN_POD_NAME

    def claim(pod: str, device: str | None) -> dict:
        status = {"allocation": {"devices": {"results": [{"device": device}]}}} if device else {}
        return {"metadata": {"annotations": {ANN_POD_NAME: pod}}, "status": status}

    assert taints.allocated([claim("a", "gpu-0"), claim("b", None), claim("c", "gpu-1")]) == {"a": "gpu-0",
                                                                                               "c": "gpu-1"}


def test_taints_summary_keeps_the_cold_repeat_apart() -> None:
    rows = [{"fault_to_taint_s": 9.0, "fault_to_avoided_s": 9.5, "sick_after_fault": 3},
            {"fault_to_taint_s": 1.0, "fault_to_avoided_s": 1.4, "sick_after_fault": 1},
            {"fault_to_taint_s": 4.0, "fault_to_avoided_s": None, "sick_after_fault": 0},
            {"fault_to_taint_s": 2.0, "fault_to_avoided_s": 2.6, "sick_after_fault": 0}]
    s = taints.summarize(rows)
    assert s["cold"]["fault_to_taint_s"] == 9.0
    assert s["warm"]["fault_to_taint_s"] == {"p50": 2.0, "max": 4.0, "n": 3}
    assert s["warm"]["fault_to_avoided_s"] == {"p50": 1.4, "max": 2.6, "n": 2}
    assert s["all"]["fault_to_taint_s"]["max"] == 9.0
    assert (s["avoided"], s["repeats"], s["sick_allocations_after_fault"]) == (3, 4, 4)
    assert s["sick_allocations_after_taint"] == 0
    assert taints.stats([]) == {"p50": None, "max": None, "n": 0}


def test_the_probe_pod_fits_either_device_of_the_taint_node() -> None:
    (node,) = taints.inventory_doc()["nodes"]
    assert [d["name"] for d in node["devices"]] == list(taints.DEVICES)
    assert {d["productName"] for d in node["devices"]} == {"NVIDIA L4"}
    request = _request(taints.probe_pod("probe-0"))
    assert "L4" in request["exactly"]["selectors"][-1]["cel"]["expression"]


def test_the_report_renders_both_sections_with_their_figures_and_says_when_not_measured() -> None:
    from dralab_kit.bench.report import render

    spread = {"median": 40.0, "min": 38.0, "max": 41.0}
    kind = {"pods_per_s": spread, "p50_s": spread, "p99_s": spread}
    res_prefer = {"n": 200, "repeats": 3, "prefer_types": "l4,h100,a100", "single_type": "a100",
                  "node": {"cards": [{"type": "l4", "devices": 1, "pods": 8}]},
                  "judged": {"prefer": kind, "single": kind,
                             "prefer_to_single_pods_per_s": {"median": 0.913, "min": 0.9, "max": 0.95}},
                  "rounds": [{"prefer": {"allocated_as": {"gpu/a100": 184, "gpu/l4": 8}}}], "cold": {}}
    text = render({"prefer": res_prefer})
    assert "0.913 (0.9-0.95)" in text and "| 40 (38-41) |" in text and "gpu/a100 184, gpu/l4 8" in text
    assert "Not measured: run `dralab bench taints`" in text
    res_taints = {"kubernetes": "v1.37.2", "interval_s": 0.5, "poll_s": 0.05, "driver_health_seconds": 5.0,
                  "summary": taints.summarize([{"fault_to_taint_s": 4.25, "fault_to_avoided_s": 4.5},
                                               {"fault_to_taint_s": 2.5, "fault_to_avoided_s": 3.125}])}
    text = render({"taints": res_taints})
    assert "| fault to taint in the ResourceSlice | 4.25 | 2.5 | 2.5 |" in text
    assert "| fault to the next pod allocated another device | 4.5 | 3.125 | 3.125 |" in text


def test_a_burst_with_failures_is_left_out_of_the_figures_and_counted() -> None:
    ok = {"pods_per_s": 40.0, "p50_s": 1.0, "p99_s": 2.0, "failures": 0}
    bad = {"pods_per_s": 4.0, "p50_s": 9.0, "p99_s": 20.0, "failures": 68}
    j = prefer.judge([{"prefer": ok, "single": ok}, {"prefer": bad, "single": ok}])
    assert j["prefer"]["pods_per_s"]["runs"] == [40.0, None]
    assert j["prefer"]["bursts_with_failures"] == 1 and j["single"]["bursts_with_failures"] == 0
    assert j["prefer_to_single_pods_per_s"]["runs"] == [1.0, None]
