"""dralab bench fleet's pure parts: pods, request accounting, summaries, verdicts and the report section."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from dralab_kit.bench import fleet
from dralab_kit.bench.concurrency import Burst
from dralab_kit.bench.models.fleet import FleetResult
from dralab_kit.bench.report import render
from dralab_kit.bench.sections.fleet import section, verdicts

METRICS = """\
# HELP apiserver_request_total Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",resource="pods",subresource="",verb="POST"} 10
apiserver_request_total{code="201",resource="pods",subresource="binding",verb="POST"} 10
apiserver_request_total{code="200",resource="pods",subresource="",verb="WATCH"} 3
apiserver_request_total{code="200",resource="",subresource="",verb="GET"} 7
apiserver_request_total{code="409",resource="pods",subresource="",verb="POST"} 2
"""


def test_repeated_events_count_every_occurrence() -> None:
    events = [{"metadata": {"uid": str(i)}, **e} for i, e in enumerate([{"count": 3}, {}, {"series": {"count": 4}},
                                                                          {"count": 0}])]
    assert fleet.new_occurrences([], events) == 3 + 1 + 4 + 1
    assert "reason%3DNodeNotReady" in fleet.NOT_READY_EVENTS and "involvedObject.kind%3DNode" in fleet.NOT_READY_EVENTS


def test_a_phases_events_are_those_new_or_repeated_in_it_and_an_expired_one_takes_nothing_off() -> None:
    def event(uid: str, count: int) -> dict[str, object]:
        return {"metadata": {"uid": uid}, "count": count}

    before = [event("a", 2), event("gone", 40)]  # "gone" expires (an hour's TTL) during the phase
    after = [event("a", 5), event("b", 1)]
    assert fleet.new_occurrences(before, after) == 3 + 1  # a difference of totals would say -36
    assert fleet.new_occurrences(after, after) == 0 and fleet.new_occurrences([], after) == 6


def test_parse_requests_groups_by_verb_and_resource_without_watches() -> None:
    assert fleet.parse_requests(METRICS) == {"POST pods": 12.0, "POST pods/binding": 10.0}


def test_requests_per_pod_is_the_difference_per_pod() -> None:
    got = fleet.requests_per_pod({"POST pods": 2.0}, {"POST pods": 12.0, "POST pods/binding": 10.0, "GET x": 0.05}, 10)
    assert got == {"total": 2.0, "POST pods": 1.0, "POST pods/binding": 1.0}
    assert fleet.requests_per_pod({}, {"POST pods": 1.0}, 0) == {}


def test_baseline_pod_names_the_webhooks_template_without_dralab_marks() -> None:
    pod, template = fleet.dra_pod("p-1", "ns", 8192, 50)
    assert pod["metadata"] == {"name": "p-1"}
    assert template["kind"] == "ResourceClaimTemplate"
    assert template["metadata"]["namespace"] == "ns" and set(template["metadata"]) == {"name", "namespace"}
    [ref] = pod["spec"]["resourceClaims"]
    assert ref["resourceClaimTemplateName"] == template["metadata"]["name"] and "resourceClaimName" not in ref
    [request] = template["spec"]["spec"]["devices"]["requests"]
    assert request["exactly"]["capacity"]["requests"]["memory"] == str(8192 * 2**20)
    assert "nvidia.com/gpu" not in str(pod["spec"]["containers"][0].get("resources", {}).get("limits", {}))
    assert fleet.hami_pod("p", 8192, 50)["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpumem"] == "8192"


def test_pods_of_one_size_share_one_template_and_sizes_differ() -> None:
    _, a = fleet.dra_pod("p-1", "ns", 8192, 50)
    _, b = fleet.dra_pod("p-2", "ns", 8192, 50)
    _, c = fleet.dra_pod("p-3", "ns", 2048, 10)
    assert a == b and a["metadata"]["name"] != c["metadata"]["name"]


def test_burst_size_fits_half_the_fleet() -> None:
    assert fleet.burst_size(500) == 1000
    assert fleet.burst_size(10) == 400  # 80 GPUs x 10 pods of 10 % x half
    assert fleet.burst_size(10, quick=True) == 200


def test_summarize_rates_over_the_time_to_the_last_bound_pod() -> None:
    row = fleet.summarize(Burst(n=4, latencies=[0.1, 0.2, 0.3], running=[0.5, 1.0, 0.4], completion_s=2.0,
                                failures=1, first_error="x", retries=3))
    assert row["pods"] == 4 and row["failures"] == 1 and row["first_error"] == "x" and row["retries"] == 3
    assert row["pods_per_s"] == 1.5  # 3 bound in 2 s
    assert fleet.summarize(Burst(n=1))["pods_per_s"] is None
    assert math.isnan(Burst(n=1).completion_s)


def test_churn_replaces_pods_at_one_steady_rate_whatever_the_size() -> None:
    assert fleet.churn_pods() == 540 and fleet.churn_pods(quick=True) == 90


def _size(nodes: int, dralab_rate: float, cpu: float, leaks: int = 0) -> dict:
    phases = {p: {"dralab": {"pods_per_s": dralab_rate, "dralab_cpu_ms_per_pod": cpu},
                  "baseline": {"pods_per_s": 10.0}} for p in fleet.PHASES}
    return {"nodes": nodes, "devices_per_node": 8, "phases": phases,
            "leaks": {"claims": leaks, "capacity": 0, "prepared": 0}}


def test_verdict_judges_ratio_growth_and_leaks() -> None:
    v = fleet.verdict([_size(50, 9.5, 10.0), _size(200, 9.5, 11.0)])
    assert v["ratio_by_phase"]["fill"] == 0.95 and v["meets_ratio"] is True
    assert v["cpu_growth"] == 1.1 and v["meets_cpu_growth"] is True
    assert v["no_leaks"] is True
    bad = fleet.verdict([_size(50, 5.0, 10.0), _size(200, 5.0, 20.0, leaks=3)])
    assert bad["meets_ratio"] is False and bad["meets_cpu_growth"] is False and bad["no_leaks"] is False
    assert fleet.verdict([_size(10, 9.0, 1.0)])["meets_cpu_growth"] is None


def test_a_ratio_whose_kinds_did_not_create_the_same_pods_is_shown_but_not_judged() -> None:
    """A baseline fill that lost 1,238 of 4,000 creates in the bench's own connection pool did less work:
    its pods/s is no yardstick. The other phase still fails the target on its own."""
    large = _size(500, 9.5, 11.0)
    large["phases"]["fill"]["baseline"].update(pods=4000, failures=1238, first_error="PoolTimeout: ")
    large["phases"]["burst"]["dralab"].update(pods=1000, failures=10, first_error="HTTP 500: webhook")  # 1 %: kept
    v = fleet.verdict([_size(50, 9.5, 10.0), large])
    assert v["ratio_by_phase"]["fill"] == 0.95  # the arithmetic stays in the file
    assert v["ratio_not_comparable"] == {"fill": "baseline lost 1238 of 4000 creates (PoolTimeout)"}
    assert v["meets_ratio"] is None
    res = FleetResult.model_validate({"devices_per_node": 8, "sizes": [_size(50, 9.5, 10.0), large]})
    assert verdicts(res)[0][-1] == "not judged; fill: baseline lost 1238 of 4000 creates (PoolTimeout)"
    large["phases"]["burst"]["dralab"]["pods_per_s"] = 5.0
    assert fleet.verdict([_size(50, 9.5, 10.0), large])["meets_ratio"] is False


def test_report_renders_the_fleet_section_and_verdicts() -> None:
    res = {"benchmark": "fleet", "quick": False, "devices_per_node": 8, "pods": {"fill_per_node": 8},
           "sizes": [_size(50, 9.5, 10.0), _size(200, 9.5, 11.0)]}
    res["verdict"] = fleet.verdict(res["sizes"])
    rows = verdicts(FleetResult.model_validate(res))
    assert [r[-1] for r in rows] == ["met", "met",
                                     "not judged: no rest measured, a rest reading above a phase's, or one size only",
                                     "not judged: a run before the driver counted its work, or one size only",
                                     "not judged: a run before the driver counted its work, or one size only",
                                     "not judged: one size only", "not judged",
                                     "not judged: no rest memory read (older run)", "met"]
    text = "\n".join(section(FleetResult.model_validate(res), "results/fleet.png"))
    assert "| 200 | burst | baseline |" in text and "![fleet](results/fleet.png)" in text
    # rows from before the lifecycle and the reconcile period were recorded ran the claim lifecycle at 60 s
    assert "`webhook.lifecycle: claim`" in text and "reconcile every: 50 nodes 60 s, 200 nodes 60 s" in text
    assert "## Fleet scale" in render({"fleet": res})


def test_cpu_above_rest_takes_out_what_the_fleet_burns_idle_over_the_window() -> None:
    # 10 ms/pod measured; webhook 2 + driver 30 ms/s at rest over a 50 s window for 400 pods: 4 ms/pod of it
    assert fleet.above_rest(10.0, {"webhook": 2.0, "driver": 30.0, "apiserver": 500.0}, 50.0, 400) == 6.0
    assert fleet.above_rest(10.0, {}, 50.0, 400) is None  # older runs measured no rest
    assert fleet.above_rest(None, {"driver": 1.0}, 50.0, 400) is None


def test_memory_per_claim_is_growth_over_rest_and_the_webhooks_is_judged_at_the_largest_size() -> None:
    # webhook 100 -> 150 MiB, driver 400 -> 450 MiB, 4,000 claims: 100 MiB / 4,000 = 25.6 KiB; KWOK is not dralab's
    rss, idle = {"webhook": 150.0, "driver": 450.0, "kwok": 900.0}, {"webhook": 100.0, "driver": 400.0, "kwok": 50.0}
    assert fleet.kib_per_claim(rss, idle, 4000) == 25.6
    assert fleet.kib_per_claim(rss, {}, 4000) is None and fleet.kib_per_claim(rss, idle, 0) is None
    assert fleet.kib_per_claim(rss, idle, 4000, ("webhook",)) == 12.8
    # judged: the webhook's, the one process holding every claim (a driver holds its node's)
    small, large = _size(50, 9.5, 10.0), _size(500, 9.5, 10.0)
    large["idle_rss_mib"] = idle
    large["phases"]["fill"]["dralab"].update(rss_mib=rss, claims=4000)
    assert fleet.verdict([small, large])["memory_kib_per_claim"] == 12.8
    assert fleet.verdict([small, large])["meets_memory_per_claim"] is True
    large["phases"]["fill"]["dralab"]["rss_mib"] = {**rss, "webhook": 300.0}  # 200 MiB / 4,000 = 51.2 KiB
    assert fleet.verdict([small, large])["meets_memory_per_claim"] is False


def test_a_rest_reading_above_the_phases_own_spend_is_not_subtracted_nor_judged() -> None:
    assert fleet.above_rest(1.0, {"driver": 240.0}, 100.0, 100) is None  # 240 ms/s over 100 s > 1 ms x 100 pods
    small, large = _size(50, 9.5, 10.0), _size(500, 9.5, 10.0)
    for p in fleet.PHASES:
        small["phases"][p]["dralab"]["dralab_cpu_ms_per_pod_above_rest"] = 5.0
        large["phases"][p]["dralab"]["dralab_cpu_ms_per_pod_above_rest"] = 5.0
    assert fleet.verdict([small, large])["cpu_growth_above_rest"] == 1.0
    large["phases"]["churn"]["dralab"]["dralab_cpu_ms_per_pod_above_rest"] = -3.0  # stored by an older run
    assert fleet.verdict([small, large])["cpu_growth_above_rest"] is None


def test_verdict_judges_growth_above_rest_apart() -> None:
    small, large = _size(50, 9.5, 10.0), _size(500, 9.5, 30.0)
    small["phases"]["fill"]["dralab"]["dralab_cpu_ms_per_pod_above_rest"] = 5.0
    large["phases"]["fill"]["dralab"]["dralab_cpu_ms_per_pod_above_rest"] = 5.5
    v = fleet.verdict([small, large])
    assert v["meets_cpu_growth"] is False
    assert v["cpu_growth_above_rest"] == 1.1 and v["meets_cpu_growth_above_rest"] is True


def test_verdict_judges_the_churn_p99_at_the_largest_size() -> None:
    small, large = _size(50, 9.5, 10.0), _size(500, 9.5, 10.0)
    large["phases"]["churn"]["dralab"]["running_p99_s"] = 4.2
    assert fleet.verdict([small, large])["meets_churn_p99"] is True
    large["phases"]["churn"]["dralab"]["running_p99_s"] = 7.5
    v = fleet.verdict([small, large])
    assert v["churn_p99_s"] == 7.5 and v["meets_churn_p99"] is False


def test_sizes_the_command_asked_for_but_the_results_lack_are_named() -> None:
    from dralab_kit.bench.sections.fleet import sizes_not_measured

    res = {"benchmark": "fleet", "sizes": [_size(50, 9.5, 10.0), _size(200, 9.5, 11.0)],
           "context": {"command": "dralab bench fleet --sizes 50,200,500 --timeout 1800"}}
    assert sizes_not_measured(FleetResult.model_validate(res)) == [500]
    res["context"] = {"command": "dralab bench fleet --sizes 50,200"}
    assert sizes_not_measured(FleetResult.model_validate(res)) == []
    assert "did not finish: 500 nodes" not in "\n".join(section(FleetResult.model_validate(res)))


def test_add_keeps_the_sizes_not_measured_again_stamped_with_their_run() -> None:
    previous = {"quick": False, "measured_at": "2026-12-02T23:23:10Z", "context": {"commit": "abc", "dirty": False},
                "sizes": [{"nodes": 50}, {"nodes": 200, "measured": {"date": "d", "commit": "c", "dirty": True}},
                          {"nodes": 500}]}
    kept = fleet.kept_sizes(previous, (500,), quick=False)
    assert [r["nodes"] for r in kept] == [50, 200]
    assert kept[0]["measured"] == {"date": "2026-12-02T23:23:10Z", "commit": "abc", "dirty": False}
    assert kept[1]["measured"]["commit"] == "c"  # a row stamped before keeps its own run


def test_add_refuses_to_mix_a_quick_file_with_a_full_run() -> None:
    from dralab.errors import UserError

    with pytest.raises(UserError, match="quick run and this one is full"):
        fleet.kept_sizes({"quick": True, "sizes": []}, (500,), quick=False)


def test_add_refuses_to_mix_webhook_lifecycles() -> None:
    from dralab.errors import UserError

    previous = {"quick": False, "sizes": [{"nodes": 50}, {"nodes": 200, "webhook_lifecycle": "template"}]}
    with pytest.raises(UserError, match=r"50-node size ran with webhook\.lifecycle claim and this run uses template"):
        fleet.kept_sizes(previous, (500,), quick=False, lifecycle="template")
    assert [r["nodes"] for r in fleet.kept_sizes(previous, (50,), quick=False, lifecycle="template")] == [200]


def test_add_refuses_to_mix_kubernetes_versions() -> None:
    """A row without a version ran on v1.35.4; rows of another version are not kept beside this run's."""
    from dralab.errors import UserError

    previous = {"quick": False, "sizes": [{"nodes": 50}, {"nodes": 200, "kubernetes": "v1.37.2"}]}
    with pytest.raises(UserError, match=r"50-node size ran on Kubernetes v1\.35\.4 and this run uses v1\.37\.2; "
                                        r"give --kubernetes v1\.35\.4"):
        fleet.kept_sizes(previous, (500,), quick=False, kubernetes="v1.37.2")
    assert [r["nodes"] for r in fleet.kept_sizes(previous, (50,), quick=False, kubernetes="v1.37.2")] == [200]
    assert [r["nodes"] for r in fleet.kept_sizes(previous, (200,), quick=False)] == [50]


def test_the_template_lifecycle_runs_the_fleet_with_a_config_that_sets_it(tmp_path) -> None:
    from dralab.config import load_config

    assert fleet.dralab_config("claim", tmp_path) is None  # the defaults: the chart's claim lifecycle
    path = fleet.dralab_config("template", tmp_path)
    assert path is not None and load_config(path).webhook.lifecycle == "template"


def test_report_names_the_run_of_each_size_when_sizes_come_from_several() -> None:
    res = FleetResult.model_validate({"sizes": [
        {"nodes": 50, "phases": {}, "measured": {"date": "2026-12-02T23:23:10Z", "commit": "87e70a7001"}},
        {"nodes": 500, "phases": {}, "measured": {"date": "2026-12-03T05:00:00Z", "commit": "1234567890"}},
    ]})
    text = "\n".join(section(res))
    assert "- 50 nodes: 2026-12-02T23:23:10Z, commit 87e70a7" in text
    assert "- 500 nodes: 2026-12-03T05:00:00Z, commit 1234567" in text


def test_one_run_of_three_sizes_is_not_reported_as_several() -> None:
    """Each size of a run is stamped when it finishes: different dates, one run. A size kept by ``--add``
    from before the run began, on the same commit, makes it several."""
    from dralab_kit.bench.sections.fleet import from_several_runs

    one = {"measured_at": "2026-12-03T08:21:00Z", "duration_s": 3700.0, "sizes": [
        {"nodes": n, "phases": {}, "measured": {"date": d, "commit": "e1166ef0"}}
        for n, d in ((50, "2026-12-03T07:24:22Z"), (200, "2026-12-03T07:37:22Z"), (500, "2026-12-03T08:16:18Z"))]}
    assert not from_several_runs(FleetResult.model_validate(one))
    assert "separate runs" not in "\n".join(section(FleetResult.model_validate(one)))
    one["sizes"][0]["measured"]["date"] = "2026-12-02T23:23:10Z"  # kept from last night's run
    assert from_several_runs(FleetResult.model_validate(one))


def _stopped(nodes: int) -> dict:
    """A size that stopped after fill and churn of the dralab kind: burst never ran, no leak figure."""
    size = _size(nodes, 4.0, 30.0)
    size["phases"]["fill"]["dralab"]["dralab_cpu_ms_per_pod"] = 20.0
    size["phases"]["burst"] = {}
    del size["phases"]["fill"]["baseline"], size["phases"]["churn"]["baseline"], size["leaks"]
    size["failed"] = "fill and churn, baseline: RemoteProtocolError: Server disconnected"
    return size


def test_a_stopped_size_is_compared_on_the_phases_it_measured_and_its_leaks_are_not_judged() -> None:
    small = _size(50, 9.5, 10.0)
    small["phases"]["burst"]["dralab"]["dralab_cpu_ms_per_pod"] = 100.0  # the large size has no burst to match
    v = fleet.verdict([small, _stopped(500)])
    assert v["phases_compared"] == ["fill", "churn"]
    assert v["cpu_growth"] == 2.5  # (20 + 30) / 2 against (10 + 10) / 2; the small size's burst left out
    assert v["ratio_by_phase"]["fill"] is None and v["meets_ratio"] is None
    assert v["no_leaks"] is None and v["stopped"] == {500: _stopped(500)["failed"]}
    assert fleet.verdict([small, _size(500, 9.5, 10.0, leaks=2) | {"failed": "x"}])["no_leaks"] is False


def test_the_report_names_a_stopped_size_and_renders_only_its_measured_phases() -> None:
    res = FleetResult.model_validate({"devices_per_node": 8, "sizes": [_size(50, 9.5, 10.0), _stopped(500)]})
    text = "\n".join(section(res))
    assert "- 500 nodes **stopped** in fill and churn, baseline: RemoteProtocolError" in text
    assert "| 500 | fill | dralab |" in text and "| 500 | fill | baseline |" not in text
    assert "| 500 | burst |" not in text


def test_the_fleet_clear_deletes_pods_one_by_one_before_the_collection() -> None:
    import asyncio

    import httpx

    seen: list[str] = []
    pods = {"a", "b", "c"}

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(f"{request.method} {request.url.path}")
        path = request.url.path
        if request.method == "GET" and path.endswith("/pods"):
            return httpx.Response(200, json={"items": [{"metadata": {"name": n}} for n in sorted(pods)]})
        if request.method == "DELETE" and "/pods/" in path:
            pods.discard(path.rsplit("/", 1)[1])
        return httpx.Response(200, json={"items": []})

    async def run() -> None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(answer), base_url="https://api") as client:
            await fleet.Runner(client).clear("ns", kube_wait=5)

    asyncio.run(run())
    singles = [s for s in seen if s.startswith("DELETE /api/v1/namespaces/ns/pods/")]
    assert sorted(singles) == [f"DELETE /api/v1/namespaces/ns/pods/{n}" for n in "abc"]
    assert seen.index("DELETE /api/v1/namespaces/ns/pods") > max(seen.index(s) for s in singles)
    assert seen[-1] == "DELETE /api/v1/namespaces/ns" and not pods


def test_the_fleet_runner_resends_lists_after_overload_and_never_a_refused_create(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A GET answered 504 and a call whose connection dropped are sent again; a create the apiserver
    answered (500) is not, and a create resent after a dropped connection that meets 409 was made."""
    import asyncio

    import httpx

    from dralab_kit.bench.concurrency import ApiStatusError

    monkeypatch.setattr(fleet, "retry_delay", lambda attempt: 0.0)
    answers: dict[str, list[object]] = {
        "GET /pods": [504, 504, 200], "POST /pods": ["drop", 409], "POST /refused": [500, 200],
        "DELETE /pods/a": ["drop"] * 9,
    }
    seen: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        call = f"{request.method} {request.url.path}"
        seen.append(call)
        code = answers[call].pop(0)
        if code == "drop":
            raise httpx.RemoteProtocolError("Server disconnected without sending a response", request=request)
        assert isinstance(code, int)
        return httpx.Response(code, json={"items": []} if code == 200 else {"kind": "Status"})

    async def run() -> list[object]:
        async with httpx.AsyncClient(transport=httpx.MockTransport(answer), base_url="https://api") as client:
            runner = fleet.Runner(client)
            got: list[object] = [await runner._ok("GET", "/pods"), await runner._ok("POST", "/pods", json={})]
            for method, path in (("POST", "/refused"), ("DELETE", "/pods/a")):
                try:
                    await runner._ok(method, path)
                except (ApiStatusError, httpx.TransportError) as exc:
                    got.append(type(exc).__name__)
            return got

    assert asyncio.run(run()) == [{"items": []}, {}, "ApiStatusError", "RemoteProtocolError"]
    assert seen.count("GET /pods") == 3 and seen.count("POST /pods") == 2
    assert seen.count("POST /refused") == 1  # a create the apiserver answered is never resent here
    assert seen.count("DELETE /pods/a") == fleet.CALL_ATTEMPTS  # a connection that keeps dropping: given up


def test_ctrl_c_keeps_the_phases_measured_and_names_the_step(monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from dralab_kit.cluster import api

    downs: list[tuple[str, bool]] = []
    configs: list[str | None] = []
    versions: list[str] = []
    monkeypatch.setattr(api, "ensure_cluster", lambda name, devices, config, kubernetes:
                        configs.append(config) or versions.append(kubernetes) or SimpleNamespace(state={}))
    monkeypatch.setattr(api, "down", lambda name, keep_logs=False: downs.append((name, keep_logs)))
    monkeypatch.setattr(fleet, "wait_fleet_slices", lambda handle, nodes, timeout: None)

    async def interrupted(handle: object, nodes: int, quick: bool, timeout: float, row: dict) -> None:
        row.update(nodes=nodes, phases={"fill": {"dralab": {"pods_per_s": 3.8}}}, step="fill and churn, baseline")
        raise KeyboardInterrupt

    monkeypatch.setattr(fleet, "run_size", interrupted)
    row = fleet.measure_size(500, quick=False, keep=False, timeout=1.0, lifecycle="template", kubernetes="v1.37.2")
    assert row["failed"] == "fill and churn, baseline: interrupted" and "step" not in row
    assert row["webhook_lifecycle"] == "template" and row["driver_reconcile_s"] == 300.0
    assert row["kubernetes"] == versions[0] == "v1.37.2"  # the fleet came up on the version the row names
    assert configs[0] is not None and not Path(configs[0]).exists()  # the size's config goes with its cluster
    assert row["phases"]["fill"]["dralab"]["pods_per_s"] == 3.8
    assert downs and downs[0][1] is True  # the stopped size's logs are kept


def test_the_fills_ratio_is_the_geometric_mean_of_both_orders() -> None:
    """A-B-B-A: dralab ran first in the fill (0.8 of the baseline) and second in the fill again (1.25):
    a factor favouring whichever kind runs second cancels, leaving 1.0. Without the fill again, the first."""
    large = _size(500, 8.0, 10.0)
    assert fleet.crossover_ratio(large) == 0.8
    large["phases"][fleet.FILL_AGAIN] = {"baseline": {"pods_per_s": 8.0}, "dralab": {"pods_per_s": 10.0}}
    assert fleet.crossover_ratio(large) == 1.0
    v = fleet.verdict([_size(50, 9.5, 10.0), large])
    assert v["ratio_by_phase"]["fill"] == 1.0
    assert v["fill_ratio_by_order"] == {"dralab_first": 0.8, "baseline_first": 1.25}
    res = FleetResult.model_validate({"devices_per_node": 8, "sizes": [_size(50, 9.5, 10.0), large]})
    assert "geometric mean of dralab first 0.8 and baseline first 1.25" in verdicts(res)[0][1]
    assert "| 500 | fill again | baseline |" in "\n".join(section(res))


def test_the_bursts_ratio_is_judged_over_both_orders_too() -> None:
    """The burst runs the baseline first and the burst again dralab first: the verdict takes the geometric
    mean, and the table lists each run's kinds in the order they ran."""
    large = _size(500, 9.5, 10.0)
    large["phases"]["burst"]["dralab"]["pods_per_s"] = 8.0  # dralab second in the burst: 0.8 of the baseline
    large["phases"][fleet.BURST_AGAIN] = {"dralab": {"pods_per_s": 10.0}, "baseline": {"pods_per_s": 8.0}}
    v = fleet.verdict([_size(50, 9.5, 10.0), large])
    assert v["ratio_by_phase"]["burst"] == 1.0
    assert v["burst_ratio_by_order"] == {"baseline_first": 0.8, "dralab_first": 1.25}
    res = FleetResult.model_validate({"devices_per_node": 8, "sizes": [_size(50, 9.5, 10.0), large]})
    assert "burst: the geometric mean of dralab first 1.25 and baseline first 0.8" in verdicts(res)[0][1]
    text = "\n".join(section(res))
    assert text.index("| 500 | burst | baseline |") < text.index("| 500 | burst | dralab |")
    assert text.index("| 500 | burst again | dralab |") < text.index("| 500 | burst again | baseline |")
    assert "*Burst again*" in text
    large["phases"][fleet.BURST_AGAIN]["baseline"].update(pods=1000, failures=20)
    lost = fleet.verdict([_size(50, 9.5, 10.0), large])
    assert lost["ratio_not_comparable"] == {"burst": "again: baseline lost 20 of 1000 creates"}
    assert lost["meets_ratio"] is None


def test_a_run_before_the_burst_again_is_judged_on_its_one_burst() -> None:
    v = fleet.verdict([_size(50, 9.5, 10.0), _size(500, 9.2, 10.0)])
    assert v["ratio_by_phase"]["burst"] == 0.92 and v["burst_ratio_by_order"]["dralab_first"] is None
    res = FleetResult.model_validate({"devices_per_node": 8, "sizes": [_size(50, 9.5, 10.0), _size(500, 9.2, 10.0)]})
    assert "geometric mean" not in verdicts(res)[0][1] and "*Burst again*" not in "\n".join(section(res))


def test_each_size_runs_its_phases_with_the_kinds_taking_turns(monkeypatch: pytest.MonkeyPatch) -> None:
    """The order is the crossover's: fill and churn dralab first, the fill again baseline first, the burst
    baseline first, the burst again dralab first; every run's row lands under its own phase."""
    import asyncio
    import contextlib
    from types import SimpleNamespace

    ran: list[tuple[str, str]] = []

    class QuietFleet:
        idle_rss_mib: dict[str, float] = {}
        idle_ms_per_s: dict[str, float] = {}
        meter = SimpleNamespace(pids={})

        def __init__(self, handle: object, nodes: int, timeout: float) -> None:
            self.nodes, self.timeout = nodes, timeout

        async def at_rest(self) -> dict[str, float]:
            return {}

        def leaks(self) -> dict[str, int]:
            return {"claims": 0, "capacity": 0, "prepared": 0}

    async def fill_and_churn(fleet_: object, client: object, kind: str, quick: bool, phases: dict,
                             fill_phase: str = "fill", then_churn: bool = True) -> None:
        ran.append((fill_phase, kind))
        phases[fill_phase][kind] = {"pods_per_s": 1.0}
        if then_churn:
            ran.append(("churn", kind))
            phases["churn"][kind] = {"pods_per_s": 1.0}

    async def burst(fleet_: object, client: object, kind: str, quick: bool, phase: str = "burst") -> dict:
        ran.append((phase, kind))
        return {"pods_per_s": 1.0}

    monkeypatch.setattr(fleet, "Fleet", QuietFleet)
    monkeypatch.setattr(fleet, "fill_and_churn", fill_and_churn)
    monkeypatch.setattr(fleet, "burst", burst)
    monkeypatch.setattr(fleet, "_wait_released", lambda fleet_, timeout: None)

    monkeypatch.setattr(fleet, "async_client", lambda handle: contextlib.nullcontext())  # entered `async with`
    row: dict = {}
    asyncio.run(fleet.run_size(object(), 10, quick=True, timeout=1.0, row=row))
    assert ran == [("fill", "dralab"), ("churn", "dralab"), ("fill", "baseline"), ("churn", "baseline"),
                   ("fill_again", "baseline"), ("fill_again", "dralab"), ("burst", "baseline"), ("burst", "dralab"),
                   ("burst_again", "dralab"), ("burst_again", "baseline")]
    assert set(row["phases"]) == {"fill", "churn", "fill_again", "burst", "burst_again"}
    assert all(set(kinds) == {"dralab", "baseline"} for kinds in row["phases"].values())
    assert "failed" not in row and "step" not in row


def test_the_section_names_admission_calls_that_failed_in_transport_or_says_none_did() -> None:
    large = _size(500, 8.0, 10.0)
    for phase in fleet.PHASES:
        for kind in fleet.KINDS:
            large["phases"][phase][kind]["webhook_call_failures"] = 0
    text = "\n".join(section(FleetResult.model_validate({"devices_per_node": 8, "sizes": [large]})))
    assert "No admission call to the webhook failed in transport in any of the 6 phase runs" in text
    large["phases"]["fill"]["dralab"]["webhook_call_failures"] = 3
    text = "\n".join(section(FleetResult.model_validate({"devices_per_node": 8, "sizes": [large]})))
    assert "- 500 nodes, fill, dralab: 3 admission call(s) to the webhook failed in transport" in text
    assert "No admission call" not in text
    for phase in fleet.PHASES:
        for kind in fleet.KINDS:
            large["phases"][phase][kind].pop("webhook_call_failures")  # runs before the count: nothing said
    text = "\n".join(section(FleetResult.model_validate({"devices_per_node": 8, "sizes": [large]})))
    assert "admission call" not in text


APISERVER_LOG = """\
I1205 15:01:02.000001  4242 controller.go:667] quota admission added evaluator for: resourceclaims
W1205 15:01:03.000002  4242 dispatcher.go:217] Failed calling webhook, failing closed mutate.dralab.io: \
failed calling webhook "mutate.dralab.io": failed to call webhook: Post \
"https://127.0.0.1:10734/mutate?timeout=10s": EOF
W1205 15:01:03.000003  4242 dispatcher.go:217] Failed calling webhook, failing closed mutate.dralab.io: \
failed calling webhook "mutate.dralab.io": failed to call webhook: Post \
"https://127.0.0.1:10734/mutate?timeout=10s": context deadline exceeded
W1205 15:01:04.000004  4242 dispatcher.go:217] Failed calling webhook, failing closed mutate.dralab.io: \
failed calling webhook "mutate.dralab.io": failed to call webhook: Post \
"https://127.0.0.1:10734/mutate?timeout=10s": EOF
W1205 15:01:05.000005  4242 dispatcher.go:300] rejected by webhook "mutate.dralab.io": retry the pod
"""


def test_the_reasons_of_failed_admission_calls_come_from_the_apiservers_log(tmp_path: Path) -> None:
    """One line per call that failed closed (Go's error text after the URL); a refusal by the webhook
    itself ("rejected by webhook") is not a failed call."""
    assert fleet.webhook_call_errors(APISERVER_LOG) == {"EOF": 2, "context deadline exceeded": 1}
    assert fleet.webhook_call_errors("") == {}
    log = tmp_path / "apiserver.log"
    log.write_text("before the phase\n")
    offset = fleet.log_size(log)
    with log.open("a") as f:
        f.write(APISERVER_LOG)
    assert fleet.webhook_call_errors(fleet.log_since(log, offset)) == {"EOF": 2, "context deadline exceeded": 1}
    assert fleet.log_since(log, offset).startswith("I1205")  # the phase's lines only
    log.write_text("replaced\n")  # shorter than the offset: a new file, read whole
    assert fleet.log_since(log, offset) == "replaced\n"
    assert fleet.log_since(tmp_path / "none.log", 0) == "" and fleet.log_size(tmp_path / "none.log") == 0


def test_the_section_gives_the_apiservers_reasons_beside_the_failed_calls() -> None:
    large = _size(500, 8.0, 10.0)
    large["phases"]["burst"]["dralab"].update(webhook_call_failures=3,
                                              webhook_call_errors={"EOF": 2, "context deadline exceeded": 1})
    text = "\n".join(section(FleetResult.model_validate({"devices_per_node": 8, "sizes": [large]})))
    assert ("- 500 nodes, burst, dralab: 3 admission call(s) to the webhook failed in transport (EOF, refused, "
            "timed out: the apiserver's count); each create was refused and resent; the apiserver's log: "
            "EOF (2); context deadline exceeded (1)") in text


def test_creates_lost_in_the_fill_again_keep_the_fills_ratio_from_being_judged() -> None:
    large = _size(500, 9.5, 10.0)
    large["phases"][fleet.FILL_AGAIN] = {"baseline": {"pods_per_s": 10.0},
                                         "dralab": {"pods_per_s": 9.5, "pods": 4000, "failures": 400}}
    v = fleet.verdict([_size(50, 9.5, 10.0), large])
    assert v["ratio_not_comparable"] == {"fill": "again: dralab lost 400 of 4000 creates"}
    assert v["meets_ratio"] is None


def test_the_lower_rest_reading_per_process_is_taken_out_of_every_phase() -> None:
    before, after = {"webhook": 9.0, "driver": 240.0}, {"webhook": 11.0, "driver": 150.0, "kwok": 3.0}
    assert fleet.rest_floor(before, after) == {"driver": 150.0, "kwok": 3.0, "webhook": 9.0}
    assert fleet.rest_floor({}, after) == after and fleet.rest_floor() == {}
    phases = {"fill": {"dralab": {"dralab_cpu_ms_per_pod": 40.0, "window_s": 100.0, "created": 1000}}}
    fleet.subtract_rest(phases, fleet.rest_floor(before, after))
    # 159 ms/s at rest over 100 s for 1,000 pods: 15.9 ms of each pod's 40
    assert phases["fill"]["dralab"]["dralab_cpu_ms_per_pod_above_rest"] == 24.1


def test_the_section_lists_the_schedulers_own_cost_per_pod_of_each_kind() -> None:
    large = _size(500, 8.0, 10.0)
    large["phases"]["fill"]["dralab"]["spent_per_pod"] = {
        "scheduler: scheduling attempt": {"ms_per_pod": 70.0, "calls_per_pod": 1.4},
        "scheduler: Filter": {"ms_per_pod": 40.0, "calls_per_pod": 1.4},
        "apiserver: create pod": {"ms_per_pod": 300.0, "calls_per_pod": 1.0},
        "webhook: connections accepted (TLS handshakes)": {"calls_per_pod": 0.8}}
    large["phases"]["fill"]["baseline"]["spent_per_pod"] = {
        "scheduler: scheduling attempt": {"ms_per_pod": 60.0, "calls_per_pod": 1.0}}
    large["idle_after_cpu_ms_per_s"] = {"driver": 150.0}
    text = "\n".join(section(FleetResult.model_validate({"devices_per_node": 8, "sizes": [large]})))
    assert ("500 nodes, fill, the components' own histograms per pod (wall time, not CPU): dralab 1.4 attempts, "
            "70 ms (Filter 40), pod create 300 ms with 0.8 new webhook connections (TLS handshakes); "
            "baseline 1 attempts, 60 ms") in text
    assert "500 nodes at rest after them, CPU ms per second: driver 150" in text


def test_the_section_names_phases_whose_simulated_nodes_went_not_ready() -> None:
    large = _size(500, 8.0, 10.0)
    large["phases"]["fill"]["baseline"]["nodes_not_ready_events"] = 214
    large["phases"][fleet.FILL_AGAIN] = {"dralab": {"pods_per_s": 8.0, "nodes_not_ready_events": 3},
                                        "baseline": {"pods_per_s": 9.0}}
    text = "\n".join(section(FleetResult.model_validate({"devices_per_node": 8, "sizes": [large]})))
    assert "- 500 nodes, fill, baseline: 214 NodeNotReady event(s)" in text
    assert "- 500 nodes, fill again, dralab: 3 NodeNotReady event(s)" in text
    assert text.count("NodeNotReady event(s)") == 2, "phases without any say nothing"


def test_the_drivers_work_is_read_from_its_own_histogram_by_kind() -> None:
    spent = {"driver CPU: prepare": {"ms_per_pod": 3.0, "calls_per_pod": 1.0},
             "driver CPU: reconcile": {"ms_per_pod": 0.5, "calls_per_pod": 0.01},
             "scheduler: Filter": {"ms_per_pod": 40.0, "calls_per_pod": 1.0}}
    assert fleet.driver_work(spent) == {"prepare": 3.0, "reconcile": 0.5}
    assert fleet.driver_work({}) == {}


def _worked(webhook: float, driver: float, work: dict[str, float]) -> dict:
    return {"cpu_ms_per_pod": {"webhook": webhook, "driver": driver}, "driver_work_cpu_ms_per_pod": work,
            "window_s": 100.0, "created": 1000}


def test_work_counted_where_spent_is_the_webhook_above_rest_and_the_pods_own_driver_work() -> None:
    row = _worked(3.0, 30.0, {"prepare": 4.0, "status": 1.5, "reconcile": 2.0, "publish": 0.5})
    rest = {"webhook": 10.0, "driver": 150.0}  # over 100 s for 1,000 pods: 1 and 15 ms of each pod
    # webhook 3 - 1, plus prepare and status; reconcile and publish are periodic, not the pod's
    assert fleet.pod_work_cpu(row, rest) == 7.5
    # the driver processes' 30 - 15 above rest, less the 8 ms their work counted
    assert fleet.driver_unattributed(row, rest) == 7.0
    assert fleet.pod_work_cpu(_worked(3.0, 30.0, {}), rest) is None  # a run before the driver counted
    assert fleet.pod_work_cpu(_worked(0.5, 30.0, {"prepare": 4.0}), rest) is None  # rest above the phase
    assert fleet.driver_unattributed(_worked(3.0, 10.0, {"prepare": 4.0}), rest) is None


def test_verdict_judges_the_growth_of_work_counted_where_spent() -> None:
    small, large = _size(50, 9.5, 10.0), _size(500, 9.5, 30.0)
    for size in (small, large):
        size["idle_cpu_ms_per_s"] = {"webhook": 10.0, "driver": 100.0}
    for phase in fleet.PHASES:
        small["phases"][phase]["dralab"].update(_worked(3.0, 20.0, {"prepare": 4.0, "status": 1.0}))
        large["phases"][phase]["dralab"].update(_worked(3.2, 40.0, {"prepare": 4.4, "status": 1.0}))
        for size in (small, large):
            fleet.subtract_rest(size["phases"], size["idle_cpu_ms_per_s"])
    v = fleet.verdict([small, large])
    assert v["meets_cpu_growth"] is False  # the raw figure keeps its own verdict
    assert v["pod_work_cpu_growth"] == round((2.2 + 5.4) / (2.0 + 5.0), 3) and v["meets_pod_work_cpu_growth"] is True
    del large["phases"]["burst"]["dralab"]["driver_work_cpu_ms_per_pod"]
    assert fleet.verdict([small, large])["driver_pod_work_growth"]["dralab"] is None  # one phase unmeasured
    fleet.subtract_rest(large["phases"], large["idle_cpu_ms_per_s"])
    assert fleet.verdict([small, large])["pod_work_cpu_growth"] is None  # one phase unmeasured: not judged
    text = "\n".join(section(FleetResult.model_validate({"devices_per_node": 8, "sizes": [small, large]})))
    assert ("500 nodes, fill, dralab: the driver's own CPU per pod by work, ms: prepare 4.4, status 1; its "
            "processes' other CPU above rest 24.6; counted where spent (webhook above rest + Prepare, Unprepare, "
            "status) 7.6") in text
    assert "new apiserver connections" not in text  # runs before the driver counted its handshakes
    large["phases"]["fill"]["dralab"]["spent_per_pod"] = {
        "driver: apiserver connections opened (TLS handshakes)": {"calls_per_pod": 1.25}}
    text = "\n".join(section(FleetResult.model_validate({"devices_per_node": 8, "sizes": [small, large]})))
    assert "status) 7.6; new apiserver connections (TLS handshakes) per pod 1.25" in text
    # the run counted them: a phase of the same size without the counter had none (runs before it kept zeros)
    churn = next(ln for ln in text.splitlines() if ln.startswith("- 500 nodes, churn, dralab: the driver's own"))
    assert churn.endswith("; new apiserver connections (TLS handshakes) per pod 0")
    large["phases"]["fill"]["dralab"]["spent_per_pod"]["driver: apiserver connections that resumed a TLS session"] = {
        "calls_per_pod": 1.0}
    text = "\n".join(section(FleetResult.model_validate({"devices_per_node": 8, "sizes": [small, large]})))
    assert "new apiserver connections (TLS handshakes) per pod 1.25, 1 of them resumed" in text
    assert text.count("new apiserver connections") == 2  # 500 nodes' fill and churn; 50 nodes never counted


def test_the_fleet_builds_vcore_before_any_bring_up_and_stops_when_it_cannot(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from click.testing import CliRunner

    import dralab.vcore
    from dralab.errors import UserError
    from dralab_kit.cluster import build

    def no_compiler(*make_args: str) -> None:
        raise UserError("building vcore needs gcc: install it (e.g. apt-get install gcc make)")

    measured: list[int] = []
    monkeypatch.setattr(build, "require_binaries", lambda version: None)
    monkeypatch.setattr(dralab.vcore, "ensure_built", no_compiler)
    monkeypatch.setattr(fleet, "measure_size", lambda nodes, *a, **k: measured.append(nodes) or {})
    result = CliRunner().invoke(fleet.fleet, ["--quick", "--out", str(tmp_path)])
    assert isinstance(result.exception, UserError) and "needs gcc" in str(result.exception)
    assert measured == [] and not (tmp_path / "fleet.json").exists()  # no cluster brought up, nothing written


def test_verdict_compares_the_drivers_per_pod_work_growth_with_the_same_work_for_the_baselines_pods() -> None:
    """The driver does the same Prepare, Unprepare and status write for both kinds' pods: where the baseline's
    grows as much, the machine grew busier; dralab's pods are judged by their growth over the baseline's."""
    small, large = _size(50, 9.5, 10.0), _size(500, 9.5, 30.0)
    for phase in fleet.PHASES:
        small["phases"][phase]["dralab"]["driver_work_cpu_ms_per_pod"] = {"prepare": 4.0, "status": 2.0}
        small["phases"][phase]["baseline"]["driver_work_cpu_ms_per_pod"] = {"prepare": 3.0, "status": 1.0}
        large["phases"][phase]["dralab"]["driver_work_cpu_ms_per_pod"] = {"prepare": 6.0, "status": 3.0,
                                                                         "reconcile": 9.0}  # periodic: not counted
        large["phases"][phase]["baseline"]["driver_work_cpu_ms_per_pod"] = {"prepare": 5.0, "unprepare": 1.0}
    v = fleet.verdict([small, large])
    assert v["driver_pod_work_growth"] == {"dralab": 1.5, "baseline": 1.5}
    assert v["driver_pod_work_growth_vs_baseline"] == 1.0 and v["meets_driver_pod_work_growth_vs_baseline"] is True
    for phase in fleet.PHASES:
        large["phases"][phase]["dralab"]["driver_work_cpu_ms_per_pod"]["prepare"] = 12.0  # 15 against 6: 2.5
    v = fleet.verdict([small, large])
    assert v["driver_pod_work_growth_vs_baseline"] == round(2.5 / 1.5, 3)
    assert v["meets_driver_pod_work_growth_vs_baseline"] is False
    rows = verdicts(FleetResult.model_validate({"devices_per_node": 8, "sizes": [small, large]}))
    row = next(r for r in rows if "dralab's pods ÷ the baseline's (dralab 2.5, baseline 1.5;" in r[1])
    assert row[2:] == ["1.67", "<= 1.2", "NOT met"]
    del large["phases"]["churn"]["baseline"]["driver_work_cpu_ms_per_pod"]
    v = fleet.verdict([small, large])
    assert v["driver_pod_work_growth_vs_baseline"] is None and v["meets_driver_pod_work_growth_vs_baseline"] is None


def test_the_fleet_refuses_a_kubernetes_version_dralab_does_not_build(tmp_path) -> None:
    """Refused before any build or bring-up, with the versions to use instead of a build hint."""
    from click.testing import CliRunner

    from dralab.errors import UserError

    result = CliRunner().invoke(fleet.fleet, ["--sizes", "4", "--kubernetes", "v1.36.0", "--out", str(tmp_path)])
    assert isinstance(result.exception, UserError)
    assert "v1.36.0 is not one dralab builds: use one of v1.35.4, v1.36.3, v1.37.2" in str(result.exception)
    assert not (tmp_path / "fleet.json").exists()
