"""The report's section and verdict for ``driver.json``: NodePrepareResources over the real socket."""

from __future__ import annotations

from dralab_kit.bench.common import fmt
from dralab_kit.bench.models.driver import DriverResult
from dralab_kit.bench.sections.format import cell, table, verdict_text

TITLE = "Node driver: NodePrepareResources and slice publication"


def verdicts(res: DriverResult) -> list[list[str]]:
    """The worse p99 per claim of the 1- and 16-claim calls against the target."""
    worst = max(res.prepare_1_claim.p99_per_claim_ms or 0, res.prepare_16_claims.p99_per_claim_ms or 0)
    return [["driver", "NodePrepareResources p99 per claim (1 and 16 claims a call)", fmt(worst, " ms"),
             f"<= {fmt(res.target_p99_per_claim_ms, ' ms')}", verdict_text(res.meets_target)]]


def section(res: DriverResult) -> list[str]:
    """Latency per kind of call, the empty call as the baseline."""
    out = [
        f"NodePrepareResources over the real gRPC socket; claims from the {res.claim_source} "
        f"({cell(res.claim_source_note)}). The empty call is the baseline.",
        "",
    ]
    calls = ((res.baseline_empty_prepare, "empty call (baseline)"), (res.prepare_1_claim, "1 claim"),
             (res.prepare_16_claims, "16 claims"), (res.publish_8_devices, "publish 8 devices"))
    rows = [[label, s.n, fmt(s.p50_ms), fmt(s.p99_ms), fmt(s.p99_per_claim_ms)] for s, label in calls]
    return out + table(["call", "calls", "p50 ms", "p99 ms", "p99 per claim ms"], rows)
