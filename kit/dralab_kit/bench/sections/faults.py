"""The report's section and verdicts for ``faults.json``: outages and churn, then a leak audit."""

from __future__ import annotations

import json

from dralab_kit.bench.common import fmt
from dralab_kit.bench.models.faults import FaultsResult
from dralab_kit.bench.sections.format import table, verdict_text

TITLE = "Faults: outages and churn, then a leak audit"


def verdicts(res: FaultsResult) -> list[list[str]]:
    """One row per scenario: nothing leaked."""
    return [["faults", f"{s.name}: no leaked claim or capacity", f"{s.leaked_claims} / {s.leaked_capacity}",
             "0 / 0", verdict_text(s.passed)] for s in res.scenarios]


def section(res: FaultsResult) -> list[str]:
    """Each scenario's verdict, leaks and figures, and the idle cluster's audit as the baseline."""
    out = [
        f"Claim grace period {res.claim_grace_period_s} s. Leaked claims: claims no live pod uses once the",
        "grace period is over. Leaked capacity: devices whose consumed capacity (all allocated claims) differs",
        "from what the claims of live pods hold.",
        "",
    ]
    rows = []
    for s in res.scenarios:
        detail = {k: v for k, v in s.detail.items() if k != "final_audit"}
        rows.append([s.name, verdict_text(s.passed), s.leaked_claims, s.leaked_capacity,
                     ", ".join(f"{k} {json.dumps(v)}" for k, v in detail.items())])
    out += table(["scenario", "verdict", "leaked claims", "leaked capacity", "figures"], rows)
    base = res.baseline
    out += [
        f"Baseline (idle cluster before the scenarios): {fmt(base.leaked_claims)} leaked claims, "
        f"{fmt(base.leaked_capacity)} leaked capacity. {res.passed}/{len(res.scenarios)} scenarios met the "
        f"contract in {res.duration_s} s.",
        "",
    ]
    return out
