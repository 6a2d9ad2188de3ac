"""The report's section and verdicts for ``fuzz.json``: bad input against the endpoints and the driver."""

from __future__ import annotations

from dralab_kit.bench.models.fuzz import FuzzResult
from dralab_kit.bench.sections.format import table, verdict_text

TITLE = "Bad input: fuzzing the admission endpoints and the driver's gRPC"


def verdicts(res: FuzzResult) -> list[list[str]]:
    """One row per target: no case broke its contract."""
    return [["fuzz", f"{name}: contract holds for every case", f"{sum(t.problems.values())} of {t.cases} broke it",
             "0", verdict_text(t.passed)] for name, t in res.targets.items()]


def section(res: FuzzResult) -> list[str]:
    """Cases and broken contracts per target, the first example of each, and the well-formed baseline."""
    out = [
        "Contract: never a 5xx or an unhandled exception, every denial names its field, every patch applies and",
        "leaves no HAMi resource; the driver answers every claim, never fails a call as a whole, and never",
        "writes or removes anything but the claim's own files (an audit-hook sandbox refuses and records it).",
        "",
    ]
    rows = [[name, t.cases, verdict_text(t.passed), ", ".join(f"{k}: {v}" for k, v in t.problems.items()) or "none"]
            for name, t in res.targets.items()]
    out += table(["target", "cases", "verdict", "broken contracts (cases)"], rows)
    examples = [(n, k, e) for n, t in res.targets.items() for k, e in t.examples.items()]
    if examples:
        out += ["First example of each broken contract:", ""]
        out += [f"- `{n}` / `{k}`: `{str(e)[:240].replace('`', chr(39))}`" for n, k, e in examples]
        out.append("")
    if res.baseline:
        out += [
            f"Baseline: a well-formed Lab 20 pod through the same checks: "
            f"{'passes' if res.baseline.admission_ok else 'FAILS'} them.",
            "",
        ]
    return out
