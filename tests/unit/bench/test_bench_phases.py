"""The concurrency breakdown: component histograms folded into phases, per-pod deltas, DRA minus plain;
the judged verdict from alternating repeats (median of per-round ratios, spread beside)."""

from __future__ import annotations

from dralab_kit.bench import concurrency as conc
from dralab_kit.bench.phases import (
    REJECTIONS,
    WEBHOOK_CALL_FAILURES,
    counted,
    difference,
    fold,
    parse,
    per_pod,
)

APISERVER = """\
# HELP apiserver_request_duration_seconds x
# TYPE apiserver_request_duration_seconds histogram
apiserver_request_duration_seconds_bucket{verb="POST",resource="resourceclaims",subresource="",le="+Inf"} 4
apiserver_request_duration_seconds_sum{verb="POST",resource="resourceclaims",subresource=""} 0.2
apiserver_request_duration_seconds_count{verb="POST",resource="resourceclaims",subresource=""} 4
apiserver_request_duration_seconds_sum{verb="PUT",resource="resourceclaims",subresource="status"} 0.1
apiserver_request_duration_seconds_count{verb="PUT",resource="resourceclaims",subresource="status"} 2
apiserver_request_duration_seconds_sum{verb="PATCH",resource="resourceclaims",subresource="status"} 0.1
apiserver_request_duration_seconds_count{verb="PATCH",resource="resourceclaims",subresource="status"} 2
apiserver_request_duration_seconds_sum{verb="GET",resource="nodes",subresource=""} 9
apiserver_request_duration_seconds_count{verb="GET",resource="nodes",subresource=""} 9
# HELP scheduler_framework_extension_point_duration_seconds x
# TYPE scheduler_framework_extension_point_duration_seconds histogram
scheduler_framework_extension_point_duration_seconds_sum{extension_point="PreBind",status="Success"} 0.5
scheduler_framework_extension_point_duration_seconds_count{extension_point="PreBind",status="Success"} 4
scheduler_framework_extension_point_duration_seconds_sum{extension_point="PreBind",status="Error"} 0.1
scheduler_framework_extension_point_duration_seconds_count{extension_point="PreBind",status="Error"} 1
"""

WANTED = {"apiserver_request_duration_seconds", "scheduler_framework_extension_point_duration_seconds"}


def test_histograms_fold_into_named_phases_and_unnamed_calls_are_left_out() -> None:
    snap = fold(parse(APISERVER, WANTED))
    assert snap[("apiserver: create claim",)] == (0.2, 4.0)
    assert snap[("apiserver: claim status (allocation)",)] == (0.2, 4.0)  # PUT and PATCH are one phase
    assert snap[("scheduler: PreBind",)] == (0.6, 5.0)  # every status of the extension point
    assert not any("nodes" in k[0] for k in snap)


def test_per_pod_figures_are_deltas_over_the_burst_and_extra_is_dra_minus_plain() -> None:
    before = {("apiserver: create claim",): (1.0, 10.0), ("scheduler: Bind",): (0.5, 10.0)}
    after = {("apiserver: create claim",): (1.4, 14.0), ("scheduler: Bind",): (0.9, 14.0),
             ("scheduler: PreBind",): (0.2, 4.0)}
    dra = per_pod(before, after, 4)
    assert dra["apiserver: create claim"] == {"ms_per_pod": 100.0, "calls_per_pod": 1.0, "ms_per_call": 100.0}
    assert dra["scheduler: PreBind"]["ms_per_pod"] == 50.0
    plain = {"scheduler: Bind": {"ms_per_pod": 60.0}}
    extra = difference(dra, plain)
    assert extra == {"apiserver: create claim": 100.0, "scheduler: Bind": 40.0, "scheduler: PreBind": 50.0}
    assert per_pod(before, after, 0) == {}


WEBHOOK = """\
# HELP dralab_webhook_connections_total x
# TYPE dralab_webhook_connections_total counter
dralab_webhook_connections_total 30.0
dralab_webhook_connections_created 1.7e9
"""


def test_the_webhooks_connections_are_counted_per_pod_with_no_time_of_their_own() -> None:
    wanted = {"dralab_webhook_connections"}
    before = fold(parse(WEBHOOK, wanted))
    assert before == {("webhook: connections accepted (TLS handshakes)",): (0.0, 30.0)}  # not the _created stamp
    after = fold(parse(WEBHOOK.replace(" 30.0", " 110.0"), wanted))
    assert per_pod(before, after, 40) == {"webhook: connections accepted (TLS handshakes)": {"calls_per_pod": 2.0}}


def test_a_counter_that_did_not_move_reads_zero_and_one_not_scraped_is_left_out() -> None:
    wanted = {"dralab_webhook_connections"}
    snap = fold(parse(WEBHOOK, wanted))
    assert per_pod(snap, snap, 40) == {"webhook: connections accepted (TLS handshakes)": {"calls_per_pod": 0.0}}
    assert per_pod({}, {}, 40) == {}
    # a process restarted in the phase: its counter fell, and what it counted is unknown
    assert per_pod(snap, fold(parse(WEBHOOK.replace(" 30.0", " 3.0"), wanted)), 40) == {}


REJECTED = """\
# HELP apiserver_admission_webhook_rejection_count [ALPHA] Admission webhook rejection count
# TYPE apiserver_admission_webhook_rejection_count counter
apiserver_admission_webhook_rejection_count{error_type="calling_webhook_error",name="mutate.dralab.io",\
operation="CREATE",rejection_code="500",type="admit"} 3
apiserver_admission_webhook_rejection_count{error_type="calling_webhook_error",name="mutate.dralab.io",\
operation="CREATE",rejection_code="0",type="admit"} 1
apiserver_admission_webhook_rejection_count{error_type="no_error",name="mutate.dralab.io",\
operation="CREATE",rejection_code="504",type="admit"} 7
"""


def test_webhook_calls_that_failed_in_transport_are_counted_apart_from_the_webhooks_own_refusals() -> None:
    """calling_webhook_error is an EOF, a refused connection or the apiserver's timeout; no_error is the
    webhook answering allowed: false (its 504 "retry the pod"), which the bench counts as a retried create."""
    wanted = {"apiserver_request_duration_seconds", REJECTIONS}
    quiet = fold(parse(APISERVER, wanted))  # the apiserver answered, no call ever failed: no series yet
    assert quiet[(WEBHOOK_CALL_FAILURES,)] == (0.0, 0.0)
    failed = fold(parse(APISERVER + REJECTED, wanted))
    assert failed[(WEBHOOK_CALL_FAILURES,)] == (0.0, 4.0)  # every code of the calling errors, not the refusals
    assert counted(quiet, failed, WEBHOOK_CALL_FAILURES) == 4
    assert counted(quiet, quiet, WEBHOOK_CALL_FAILURES) == 0
    assert per_pod(quiet, quiet, 10)[WEBHOOK_CALL_FAILURES] == {"calls_per_pod": 0.0}
    assert counted({}, failed, WEBHOOK_CALL_FAILURES) is None  # the apiserver did not answer the first scrape
    assert counted(failed, quiet, WEBHOOK_CALL_FAILURES) is None  # a restarted apiserver: its count started over


def test_judged_verdict_uses_the_median_of_per_round_ratios() -> None:
    cols = {"n": [10, 200], "pods_per_s": [10.0, 9.0]}
    plain = {"n": [10, 200], "pods_per_s": [10.0, 20.0]}  # pooled figures would say 0.45
    judged = {"large_n": 200, "repeats": 3,
              "dra_to_plain": {"median": 0.85, "min": 0.7, "max": 0.9},
              "flatness": {"median": 0.95, "min": 0.9, "max": 1.0}}
    v = conc.verdict(cols, plain, judged)
    assert v["dra_to_plain_at_judged_n"] == 0.85 and v["meets_dra_to_plain"] is True
    assert v["dra_to_plain_spread"] == [0.7, 0.9]
    assert v["ratio_largest_to_10"] == 0.95 and v["flat"] is True
    assert conc.verdict(cols, plain)["dra_to_plain_at_judged_n"] == 0.45  # without repeats: the pooled ratio


def test_direct_pods_carry_the_webhooks_request_without_any_dralab_mark() -> None:
    pod, claim = conc.direct_pod("p-1", "ns")
    ref = pod["spec"]["resourceClaims"][0]
    assert ref["resourceClaimName"] == claim["metadata"]["name"]
    assert claim["metadata"] == {"name": claim["metadata"]["name"], "namespace": "ns"}  # no labels: no janitor
    assert pod["metadata"] == {"name": "p-1"}  # no hami.io/dra label: the janitor's pod watch skips it
    limits = pod["spec"]["containers"][0].get("resources", {}).get("limits") or {}
    assert not any(k.startswith("huawei.com/") for k in limits)  # nothing left for the webhook to convert
    request = claim["spec"]["devices"]["requests"][0]["exactly"]
    assert request["capacity"]["requests"] == {"cores": str(conc.POD_CORES),
                                               "memory": str(conc.POD_MEMORY_MIB * 1024 * 1024)}


def test_the_gap_splits_into_shares_that_add_up() -> None:
    split = conc.gap_split(dra=50.0, direct=80.0, plain=100.0)  # 20 ms, 12.5 ms, 10 ms per pod
    assert split == {"gap_ms_per_pod": 10.0, "scheduler_ms_per_pod": 2.5, "dralab_ms_per_pod": 7.5}
    assert conc.gap_split(dra=50.0, direct=None, plain=100.0)["dralab_ms_per_pod"] is None


def test_verdict_carries_the_no_dralab_baseline_when_the_rounds_had_it() -> None:
    cols = {"n": [10, 200], "pods_per_s": [10.0, 9.0]}
    plain = {"n": [10, 200], "pods_per_s": [10.0, 20.0]}
    judged = {"large_n": 200, "repeats": 3,
              "dra_to_plain": {"median": 0.5, "min": 0.4, "max": 0.6},
              "direct_to_plain": {"median": 0.7, "min": 0.6, "max": 0.8},
              "dra_to_direct": {"median": 0.71, "min": 0.6, "max": 0.9},
              "split": {"gap_ms_per_pod": {"median": 10.0}, "scheduler_ms_per_pod": {"median": 4.0},
                        "dralab_ms_per_pod": {"median": 6.0}},
              "flatness": {"median": 0.95, "min": 0.9, "max": 1.0}}
    v = conc.verdict(cols, plain, judged)
    assert v["direct_to_plain"] == 0.7 and v["dra_to_direct_spread"] == [0.6, 0.9]
    assert v["gap_split_ms_per_pod"] == {"gap_ms_per_pod": 10.0, "scheduler_ms_per_pod": 4.0,
                                         "dralab_ms_per_pod": 6.0}
    del judged["direct_to_plain"]  # a result measured before the baseline existed
    assert "direct_to_plain" not in conc.verdict(cols, plain, judged)


def test_cpu_per_pod_is_the_delta_over_the_burst_with_a_total() -> None:
    got = conc.cpu_per_pod({"apiserver": 1.0, "webhook": 0.5}, {"apiserver": 1.4, "webhook": 0.6}, 4)
    assert got == {"apiserver": 100.0, "webhook": 25.0, "total": 125.0}


def test_sizes_are_parsed_or_named_as_wrong() -> None:
    import click
    import pytest

    assert conc.parse_sizes("200, 10") == (10, 200)
    with pytest.raises(click.BadParameter, match="integers separated by commas"):
        conc.parse_sizes("10,x")
    with pytest.raises(click.BadParameter, match="1 or more"):
        conc.parse_sizes("0")
