"""``dralab bench report``: regenerate bench/REPORT.md from the JSON results, in one command.

The report is rendered by a pure function from the result files (concurrency.json, faults.json,
fuzz.json and whatever other benchmarks left in the folder), so it never says more than the
measurements: a missing file is reported as not measured.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from dralab.bench import DEFAULT_OUT
from dralab.errors import UserError
from dralab.util import atomic_write

OWN = ("concurrency", "faults", "fuzz")


def _fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3g}{unit}" if abs(value) < 100 else f"{value:.0f}{unit}"
    return f"{value}{unit}"


def _ok(flag: Any) -> str:
    return "PASS" if flag else "FAIL"


def _header(res: dict[str, Any]) -> str:
    machine = res.get("machine") or {}
    load = (res.get("load_average") or {}).get("before")
    extra = f", load average {load[0]:.1f} at start" if load else ""
    return f"_Measured {res.get('measured_at', '?')} on {machine.get('cpus', '?')} CPUs{extra}._"


def concurrency_section(res: dict[str, Any] | None, plot: str | None) -> list[str]:
    out = ["## Concurrency: bursts of sharing pods on one node", ""]
    if res is None:
        return [*out, "Not measured: run `dralab bench concurrency`.", ""]
    out += [_header(res), ""]
    out += [
        "N pods created at once through the webhook and the real kube-scheduler against one KWOK node",
        f"with {res.get('node', {}).get('devices', '?')} shared fake devices; latency from the create to the pod's",
        "binding (watch), throughput = pods bound / burst completion time; \"admitted\" is the create call",
        "itself (admission, including the webhook creating the claim).",
        "",
    ]

    def table(cols: dict[str, Any], title: str) -> list[str]:
        rows = [f"**{title}**", "",
                "| N | p50 (s) | p99 (s) | admitted p50 (s) | completion (s) | pods/s | Running p50 (s) | failures |",
                "|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for i, n in enumerate(cols["n"]):
            get = lambda k, i=i: (cols.get(k) or [None] * len(cols["n"]))[i]  # noqa: E731
            rows.append(
                f"| {n} | {_fmt(get('p50_s'))} | {_fmt(get('p99_s'))} | {_fmt(get('admitted_p50_s'))} | "
                f"{_fmt(get('completion_s'))} | "
                f"{_fmt(get('pods_per_s'))} | {_fmt(get('running_p50_s'))} | {_fmt(get('failures'))} |"
            )
        return [*rows, ""]

    qps = (res.get("scheduler_qps") or {}).get("local", ["?", "?"])
    out += table(res, f"DRA sharing pods, scheduler client QPS {qps[0]} / burst {qps[1]}")
    if res.get("baseline"):
        out += table(res["baseline"], "Baseline: plain pods (no claim), same run")
    if res.get("default_qps"):
        out += table(res["default_qps"], "DRA sharing pods, scheduler at its default client QPS 50 / burst 100")
    v = res.get("verdict") or {}
    out += [
        f"- Flat per-pod cost: pods/s at N={v.get('largest_n')} is {_fmt(v.get('ratio_largest_to_10'))} x pods/s "
        f"at N=10 (target >= {v.get('ratio_target')}): **{_ok(v.get('flat'))}**",
        f"- Absolute rate at N={v.get('largest_n')} >= {v.get('rate_target_pods_per_s')} pods/s: "
        f"**{_ok(v.get('meets_rate'))}**",
    ]
    dq = (res.get("default_qps") or {}).get("verdict")
    if dq:
        out.append(f"- At the default QPS: ratio {_fmt(dq.get('ratio_largest_to_10'))}, rate target "
                   f"**{_ok(dq.get('meets_rate'))}**")
    if res.get("first_errors"):
        out.append(f"- First errors: {'; '.join(str(e)[:160] for e in res['first_errors'])}")
    if plot:
        out += ["", f"![concurrency]({plot})"]
    return [*out, ""]


def faults_section(res: dict[str, Any] | None) -> list[str]:
    out = ["## Faults: outages and churn, then a leak audit", ""]
    if res is None:
        return [*out, "Not measured: run `dralab bench faults`.", ""]
    out += [_header(res), "",
            f"Claim grace period {res.get('claim_grace_period_s')} s. Leaked claims: claims no live pod uses once the",
            "grace period is over. Leaked capacity: devices whose consumed capacity (all allocated claims) differs",
            "from what the claims of live pods hold.", "",
            "| scenario | result | leaked claims | leaked capacity | figures |", "|---|---|---:|---:|---|"]
    for row in res.get("scenarios") or []:
        detail = {k: v for k, v in (row.get("detail") or {}).items() if k != "final_audit"}
        figures = ", ".join(f"{k} {json.dumps(v)}" for k, v in detail.items())
        out.append(f"| {row['name']} | **{_ok(row['passed'])}** | {row['leaked_claims']} | "
                   f"{row['leaked_capacity']} | {figures.replace('|', '/')} |")
    base = res.get("baseline") or {}
    total = len(res.get("scenarios") or [])
    out += ["", f"Baseline (idle cluster before the scenarios): {base.get('leaked_claims', '-')} leaked claims, "
            f"{base.get('leaked_capacity', '-')} leaked capacity. {res.get('passed')}/{total} "
            f"scenarios passed in {res.get('duration_s')} s.", ""]
    return out


def fuzz_section(res: dict[str, Any] | None) -> list[str]:
    out = ["## Bad input: fuzzing the admission endpoints and the driver's gRPC", ""]
    if res is None:
        return [*out, "Not measured: run `dralab bench fuzz`.", ""]
    out += [_header(res), "",
            "Contract: never a 5xx or an unhandled exception, every denial names its field, every patch applies and",
            "leaves no HAMi resource; the driver answers every claim, never fails a call as a whole, and never",
            "writes or removes anything but the claim's own files (an audit-hook sandbox refuses and records it).",
            "", "| target | cases | result | broken contracts (cases) |", "|---|---:|---|---|"]
    for name, t in (res.get("targets") or {}).items():
        problems = ", ".join(f"{k}: {v}" for k, v in t.get("problems", {}).items()) or "none"
        out.append(f"| {name} | {t.get('cases')} | **{_ok(t.get('passed'))}** | {problems.replace('|', '/')} |")
    out += ["", "First example of each broken contract:", ""]
    for name, t in (res.get("targets") or {}).items():
        for kind, example in (t.get("examples") or {}).items():
            shown = example[:240].replace("`", "'")
            out.append(f"- `{name}` / `{kind}`: `{shown}`")
    return [*out, ""]


def others_section(results: dict[str, dict[str, Any]]) -> list[str]:
    others = {k: v for k, v in results.items() if k not in OWN}
    if not others:
        return []
    out = ["## Other benchmark results in the folder", "", "| benchmark | measured | file |", "|---|---|---|"]
    for name, res in sorted(others.items()):
        out.append(f"| {name} | {res.get('measured_at', '?')} | `{name}.json` |")
    return [*out, ""]


def render(results: dict[str, dict[str, Any]], plot: str | None = None) -> str:
    """The whole report from the parsed result files (pure)."""
    lines = ["# dralab reliability report", "",
             "Generated by `dralab bench report` from the JSON results; do not edit by hand.", "",
             "| check | result |", "|---|---|"]
    conc = results.get("concurrency")
    if conc:
        v = conc.get("verdict") or {}
        lines.append(f"| concurrency: flat per-pod cost / >= {v.get('rate_target_pods_per_s')} pods/s | "
                     f"{_ok(v.get('flat'))} / {_ok(v.get('meets_rate'))} |")
    faults = results.get("faults")
    if faults:
        for row in faults.get("scenarios") or []:
            lines.append(f"| faults: {row['name']} | {_ok(row['passed'])} |")
    fz = results.get("fuzz")
    if fz:
        for name, t in (fz.get("targets") or {}).items():
            lines.append(f"| fuzz: {name} ({t.get('cases')} cases) | {_ok(t.get('passed'))} |")
    lines.append("")
    lines += concurrency_section(conc, plot)
    lines += faults_section(faults)
    lines += fuzz_section(fz)
    lines += others_section(results)
    return "\n".join(lines).rstrip() + "\n"


def load_results(folder: Path) -> dict[str, dict[str, Any]]:
    """Every ``<name>.json`` in ``folder`` by name; a file that is not JSON is a user error."""
    if not folder.is_dir():
        raise UserError(f"results folder {folder} not found; run a benchmark with --out {folder} first")
    out = {}
    for path in sorted(folder.glob("*.json")):
        try:
            out[path.stem] = json.loads(path.read_text())
        except ValueError as exc:
            raise UserError(f"{path} is not valid JSON ({exc}); rerun the benchmark that wrote it") from None
    return out


@click.command()
@click.option("--results", "results_dir", default=DEFAULT_OUT, show_default=True, help="folder of JSON results")
@click.option("--out", default="bench/REPORT.md", show_default=True, help="the report file to write")
@click.option("--quick", is_flag=True, hidden=True, help="accepted for symmetry with the other benchmarks")
def report(results_dir: str, out: str, quick: bool) -> None:
    """Regenerate the reliability report (Markdown) from the benchmarks' JSON results.

    \b
    Example:
      dralab bench report --results bench/results --out bench/REPORT.md
    """
    folder = Path(results_dir)
    results = load_results(folder)
    target = Path(out)
    png = folder / "concurrency.png"
    plot = None
    if png.is_file():
        # the results folder is not versioned: the figure travels with the report
        atomic_write(target.parent / png.name, png.read_bytes())
        plot = png.name
    atomic_write(target, render(results, plot))
    click.echo(f"wrote {target} from {len(results)} result file(s) in {folder}")
