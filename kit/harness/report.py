"""Reports of a run: Markdown and HTML for people, JUnit XML (one test case per step) for CI.

A run directory ``reports/<run-id>/`` holds ``report.md``, ``report.html``, ``junit.xml`` and
``labs/<lab>.json`` (the raw results); ``reports/latest`` points at the newest run. The centre of
each lab's section is its "What This Lab Proved" table, with the evidence captured live next to
the evidence the manual lab printed.
"""

from __future__ import annotations

import html
import json
import os
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import yaml

from dralab.util import atomic_write
from harness.results import (
    ERROR,
    FAILED,
    NOT_RUN,
    PARTIAL,
    PASSED,
    SKIPPED,
    LabResult,
    OpOutcome,
    StepResult,
    describe_skipped,
)

# Markdown keeps the icons (GitHub renders them); HTML uses text badges, since a browser without
# an emoji font (headless Chromium, many servers) draws emoji as empty boxes.
ICONS = {PASSED: "✅", FAILED: "❌", ERROR: "❌", SKIPPED: "⏭️", PARTIAL: "◐", NOT_RUN: "-"}
MAX_TEXT = 6000


def new_run_id(label: str = "run") -> str:
    """``YYYYmmdd-HHMMSS-<label>``: sortable, unique enough per machine, readable."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in label)[:40]
    return f"{stamp}-{safe}-{os.getpid() % 10000:04d}"


def _trim(value: Any, limit: int = 160) -> Any:
    """Long strings (certificates, tokens) cut short: evidence is read by people."""
    if isinstance(value, str) and len(value) > limit:
        return value[:limit] + f"... ({len(value)} characters)"
    if isinstance(value, dict):
        return {k: _trim(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [_trim(v, limit) for v in value]
    return value


def _yaml(value: Any) -> str:
    return yaml.safe_dump(_trim(value), sort_keys=False, default_flow_style=False, width=110).rstrip()


def _clip(text: str, limit: int = MAX_TEXT) -> str:
    return text if len(text) <= limit else text[: limit - 40] + f"\n... ({len(text) - limit + 40} more characters)"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _icon(status: str) -> str:
    return f"{ICONS.get(status, '')} {status}"


def badge(status: str) -> str:
    """A status as an HTML text badge (colour from the stylesheet, readable without any emoji font)."""
    css = status.replace(" ", "-")
    return f"<span class='badge {html.escape(css)}'>{html.escape(status)}</span>"


# Markdown ------------------------------------------------------------------------------------
def _md_outcome(o: OpOutcome) -> list[str]:
    head = f"- `{o.kind}` {_icon(o.status)} ({o.seconds:.2f}s): {o.summary or o.error or ''}"
    lines = [head]
    if o.evidence:
        lines[0] += f" — *evidence: {o.evidence}*"
    if o.error and o.summary:
        lines.append(f"  - error: {o.error}")
    if o.excerpt not in (None, {}, []):
        lines += ["", "  ```yaml", *("  " + line for line in _yaml(o.excerpt).splitlines()), "  ```", ""]
    if o.text:
        lines += ["", "  ```text", *("  " + line for line in _clip(o.text).splitlines()), "  ```", ""]
    return lines


def _md_step(i: int, step: StepResult) -> list[str]:
    lines = [f"#### {i}. {step.title} (`{step.id}`) {_icon(step.status)} — {step.seconds:.2f}s", ""]
    if step.reason:
        label = {SKIPPED: "Skipped", PARTIAL: "Partial"}.get(step.status, "Failure")
        lines += [f"**{label}:**", "", "```text", _clip(step.reason), "```", ""]
    for o in step.ops:
        lines += _md_outcome(o)
    if step.diagnostics:
        lines += ["", "<details><summary>Diagnostics collected on failure</summary>", ""]
        for o in step.diagnostics:
            lines += _md_outcome(o)
        lines += ["", "</details>", ""]
    if step.finally_:
        lines += ["", "*finally:*"]
        for o in step.finally_:
            lines += _md_outcome(o)
    lines.append("")
    return lines


def lab_markdown(res: LabResult) -> str:
    env = res.environment
    lines = [
        f"## {res.title} (`{res.lab}`) — {_icon(res.status)}",
        "",
        f"Profile **{res.profile}** · cluster `{env.get('cluster')}` · namespace `{res.namespace}` · "
        f"{res.seconds:.1f}s (cluster ready in {env.get('bringUpSeconds', 0):.1f}s) · run `{res.run_id}`",
        "",
    ]
    if res.source:
        lines += [f"Source: {res.source}", ""]
    if res.error:
        lines += ["**Lab error:**", "", "```text", res.error, "```", ""]
    for note in env.get("notes") or []:
        lines += [f"> {note}", ""]
    if res.proved:
        lines += ["### What This Lab Proved", "", "| Claim | Evidence in the lab | Result | Live evidence (this run) |",
                  "|---|---|---|---|"]  # fmt: skip
        for row in res.proved:
            live = "<br>".join(f"**{e['label']}**: {e['summary']}" for e in row.live) or "—"
            result = _icon(row.status) + (f"<br>{row.note}" if row.note and row.status != PASSED else "")
            lines.append(f"| {_cell(row.claim)} | {_cell(row.lab_evidence)} | {_cell(result)} | {_cell(live)} |")
        lines.append("")
    if res.metrics:
        lines += ["### Timings", "", "| measure | seconds |", "|---|---|"]
        lines += [f"| {k} | {v:.3f} |" for k, v in res.metrics.items()]
        lines.append("")
    lines += ["### Steps", "", "| # | step | result | time | note |", "|---|---|---|---|---|"]
    for i, step in enumerate(res.steps, 1):
        note = _cell((step.reason or "").strip().splitlines()[0] if step.reason else "")
        lines.append(f"| {i} | {_cell(step.title)} | {_icon(step.status)} | {step.seconds:.2f}s | {note} |")
    lines += ["", "### Step details", ""]
    for i, step in enumerate(res.steps, 1):
        lines += _md_step(i, step)
    if res.captured:
        lines += ["### Captured values", "", "```yaml", _yaml(res.captured), "```", ""]
    if res.cleanup:
        lines += ["### Cleanup", ""]
        for o in res.cleanup:
            lines += _md_outcome(o)
        lines.append("")
    return "\n".join(lines)


def run_markdown(run_id: str, results: list[LabResult]) -> str:
    lines = [f"# dralab lab report — {run_id}", "",
             "| lab | profile | result | passed | partial | failed | skipped | time |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for res in results:
        c = res.counts()
        lines.append(
            f"| {res.lab} | {res.profile} | {_icon(res.status)} | {c[PASSED]} | {c[PARTIAL]} | "
            f"{c[FAILED] + c[ERROR]} | {c[SKIPPED]} | {res.seconds:.1f}s |"
        )
    lines.append("")
    for res in results:
        lines += [lab_markdown(res), ""]
    return "\n".join(lines)


# HTML ----------------------------------------------------------------------------------------
_CSS = """
body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:1200px;color:#1b1f24;line-height:1.45}
table{border-collapse:collapse;margin:1rem 0;width:100%}th,td{border:1px solid #d0d7de;padding:.35rem .5rem;
vertical-align:top;text-align:left}th{background:#f6f8fa}pre{background:#f6f8fa;padding:.6rem;overflow-x:auto;
font-size:.85em}.passed{color:#1a7f37}.failed,.error{color:#cf222e}.skipped,.partial{color:#9a6700}
details{margin:.3rem 0}summary{cursor:pointer}code{background:#eff1f3;padding:0 .2rem}
.badge{display:inline-block;padding:.05rem .45rem;border-radius:.6rem;font-size:.8em;font-weight:600;
color:#fff;white-space:nowrap;background:#6e7781}.badge.passed{background:#1a7f37}
.badge.failed,.badge.error{background:#cf222e}.badge.partial{background:#bf8700}.badge.skipped{background:#6e7781}
.badge.not-run{background:#afb8c1;color:#1b1f24}.note{font-size:.85em;color:#57606a}
"""


def _h(text: Any) -> str:
    return html.escape(str(text))


def _html_outcome(o: OpOutcome) -> str:
    parts = [f"<li><code>{_h(o.kind)}</code> {badge(o.status)} "
             f"({o.seconds:.2f}s) {_h(o.summary or o.error or '')}"]  # fmt: skip
    if o.evidence:
        parts.append(f" <em>evidence: {_h(o.evidence)}</em>")
    if o.error and o.summary:
        parts.append(f"<br>error: {_h(o.error)}")
    if o.excerpt not in (None, {}, []):
        parts.append(f"<details open><summary>observed</summary><pre>{_h(_yaml(o.excerpt))}</pre></details>")
    if o.text:
        parts.append(f"<details><summary>output</summary><pre>{_h(_clip(o.text))}</pre></details>")
    return "".join(parts) + "</li>"


def lab_html(res: LabResult) -> str:
    env = res.environment
    out = [
        f"<h2>{_h(res.title)} (<code>{_h(res.lab)}</code>) {badge(res.status)}</h2>",
        f"<p>Profile <b>{_h(res.profile)}</b> · cluster <code>{_h(env.get('cluster'))}</code> · namespace "
        f"<code>{_h(res.namespace)}</code> · {res.seconds:.1f}s (cluster ready in {env.get('bringUpSeconds', 0):.1f}s)"
        f" · run <code>{_h(res.run_id)}</code></p>",
    ]
    if res.source:
        out.append(f"<p>Source: {_h(res.source)}</p>")
    if res.error:
        out.append(f"<pre class='failed'>{_h(res.error)}</pre>")
    if res.proved:
        out.append("<h3>What This Lab Proved</h3><table><tr><th>Claim</th><th>Evidence in the lab</th><th>Result</th>"
                   "<th>Live evidence (this run)</th></tr>")  # fmt: skip
        for row in res.proved:
            live = (
                "".join(
                    f"<details><summary><b>{_h(e['label'])}</b>: {_h(e['summary'])}</summary>"
                    f"<pre>{_h(_yaml(e['excerpt'])) if e.get('excerpt') not in (None, {}, []) else ''}</pre></details>"
                    for e in row.live
                )
                or "—"
            )
            note = f"<div class='note'>{_h(row.note)}</div>" if row.note and row.status != PASSED else ""
            out.append(f"<tr><td>{_h(row.claim)}</td><td>{_h(row.lab_evidence)}</td>"
                       f"<td>{badge(row.status)}{note}</td><td>{live}</td></tr>")  # fmt: skip
        out.append("</table>")
    if res.metrics:
        out.append("<h3>Timings</h3><table><tr><th>measure</th><th>seconds</th></tr>")
        out += [f"<tr><td>{_h(k)}</td><td>{v:.3f}</td></tr>" for k, v in res.metrics.items()]
        out.append("</table>")
    out.append("<h3>Steps</h3><table><tr><th>#</th><th>step</th><th>result</th><th>time</th><th>note</th></tr>")
    for i, step in enumerate(res.steps, 1):
        note = (step.reason or "").strip().splitlines()[0] if step.reason else ""
        out.append(f"<tr><td>{i}</td><td><a href='#{_h(res.lab)}-{_h(step.id)}'>{_h(step.title)}</a></td>"
                   f"<td>{badge(step.status)}</td><td>{step.seconds:.2f}s</td>"
                   f"<td>{_h(note)}</td></tr>")  # fmt: skip
    out.append("</table><h3>Step details</h3>")
    for i, step in enumerate(res.steps, 1):
        out.append(f"<h4 id='{_h(res.lab)}-{_h(step.id)}'>{i}. {_h(step.title)} {badge(step.status)} "
                   f"{step.seconds:.2f}s</h4>")  # fmt: skip
        if step.reason:
            out.append(f"<pre class='{step.status}'>{_h(_clip(step.reason))}</pre>")
        out.append("<ul>" + "".join(_html_outcome(o) for o in step.ops) + "</ul>")
        if step.diagnostics:
            out.append("<details><summary>Diagnostics collected on failure</summary><ul>"
                       + "".join(_html_outcome(o) for o in step.diagnostics) + "</ul></details>")  # fmt: skip
        if step.finally_:
            out.append("<p><em>finally:</em></p><ul>" + "".join(_html_outcome(o) for o in step.finally_) + "</ul>")
    if res.captured:
        out.append(f"<h3>Captured values</h3><pre>{_h(_yaml(res.captured))}</pre>")
    if res.cleanup:
        out.append("<h3>Cleanup</h3><ul>" + "".join(_html_outcome(o) for o in res.cleanup) + "</ul>")
    return "\n".join(out)


def run_html(run_id: str, results: list[LabResult]) -> str:
    rows = "".join(
        f"<tr><td>{_h(r.lab)}</td><td>{_h(r.profile)}</td><td>{badge(r.status)}</td>"
        f"<td>{r.counts()[PASSED]}</td><td>{r.counts()[PARTIAL]}</td><td>{r.counts()[FAILED] + r.counts()[ERROR]}</td>"
        f"<td>{r.counts()[SKIPPED]}</td><td>{r.seconds:.1f}s</td></tr>"
        for r in results
    )
    body = "\n".join(lab_html(r) for r in results)
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>dralab lab report {_h(run_id)}</title>"
        f"<style>{_CSS}</style></head><body><h1>dralab lab report — {_h(run_id)}</h1>"
        "<table><tr><th>lab</th><th>profile</th><th>result</th><th>passed</th><th>partial</th><th>failed</th>"
        "<th>skipped</th>"
        f"<th>time</th></tr>{rows}</table>{body}</body></html>\n"
    )


# JUnit ---------------------------------------------------------------------------------------
def junit_xml(results: list[LabResult]) -> str:
    """One ``testsuite`` per lab, one ``testcase`` per step, evidence in ``system-out``."""
    root = ET.Element("testsuites", name="dralab-labs")
    for res in results:
        c = res.counts()
        suite = ET.SubElement(
            root, "testsuite", name=res.lab, tests=str(len(res.steps)), failures=str(c[FAILED]),
            errors=str(c[ERROR]), skipped=str(c[SKIPPED]), time=f"{res.seconds:.3f}", timestamp=res.started or "",
        )  # fmt: skip
        props = ET.SubElement(suite, "properties")
        for key, value in (
            ("profile", res.profile),
            ("namespace", res.namespace or ""),
            ("run", res.run_id),
            ("status", res.status),
            ("partial_steps", str(c[PARTIAL])),
        ):
            ET.SubElement(props, "property", name=key, value=str(value))
        for key, number in res.metrics.items():
            ET.SubElement(props, "property", name=f"metric.{key}", value=f"{number:.3f}")
        for i, step in enumerate(res.steps, 1):
            case = ET.SubElement(suite, "testcase", classname=f"labs.{res.lab}", name=f"{i:02d}-{step.id}",
                                 time=f"{step.seconds:.3f}")  # fmt: skip
            first = (step.reason or "").strip().splitlines()[0] if step.reason else ""
            if step.status == FAILED:
                ET.SubElement(case, "failure", message=first).text = step.reason
            elif step.status == ERROR:
                ET.SubElement(case, "error", message=first).text = step.reason
            elif step.status == SKIPPED:
                ET.SubElement(case, "skipped", message=first)
            skipped = step.skipped_ops()
            if step.status != SKIPPED and (skipped or step.status == PARTIAL):
                case_props = ET.Element("properties")
                case.insert(0, case_props)  # properties first, as pytest's own JUnit writer puts them
                ET.SubElement(case_props, "property", name="status", value=step.status)
                for n, o in enumerate(skipped, 1):
                    ET.SubElement(case_props, "property", name=f"skipped_operation.{n}", value=describe_skipped([o]))
            out = "\n".join(f"{o.kind}: {o.status}: {o.summary or o.error or ''}" for o in step.ops)
            if step.diagnostics:
                out += "\n\n" + "\n\n".join(
                    f"[{o.kind}] {o.summary}\n{_clip(o.text or '', 3000)}" for o in step.diagnostics
                )
            ET.SubElement(case, "system-out").text = out
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


# files ---------------------------------------------------------------------------------------
def write_lab_result(run_dir: Path, result: LabResult) -> Path:
    path = run_dir / "labs" / f"{result.lab}.json"
    atomic_write(path, json.dumps(result.to_dict(), indent=2, default=str) + "\n")
    return path


def read_lab_results(run_dir: Path) -> list[LabResult]:
    folder = run_dir / "labs"
    if not folder.is_dir():
        return []
    return [LabResult.from_dict(json.loads(p.read_text())) for p in sorted(folder.glob("*.json"))]


def write_run_reports(run_dir: Path, run_id: str, results: list[LabResult] | None = None) -> Path:
    """Render report.md, report.html and junit.xml for every lab result in ``run_dir``; point latest at it."""
    results = results if results is not None else read_lab_results(run_dir)
    atomic_write(run_dir / "report.md", run_markdown(run_id, results) + "\n")
    atomic_write(run_dir / "report.html", run_html(run_id, results))
    atomic_write(run_dir / "junit.xml", junit_xml(results))
    link = run_dir.parent / "latest"
    tmp = run_dir.parent / f".latest.{os.getpid()}"
    try:
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(run_dir.name)
        os.replace(tmp, link)
    except OSError:
        tmp.unlink(missing_ok=True)
    return run_dir
