"""Status per operation: a step or proved row never claims more than what ran on the profile."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

from click.testing import CliRunner

from harness.report import junit_xml, lab_html, lab_markdown, run_html
from harness.results import (
    FAILED,
    NOT_RUN,
    PARTIAL,
    PARTIAL_PROPERTY,
    PASSED,
    SKIPPED,
    SKIPPED_OP_PROPERTY,
    OpOutcome,
    StepResult,
)
from harness.runner import LabRunner, proof_status
from tests.unit.harness.test_cli import _memory_lab
from tests.unit.harness.test_plugin import SEED
from tests.unit.harness.test_plugin import _run as run_pytest

EXEC = {"exec-in-pod": {"pod": "p", "command": "true"}, "requires": ["container-exec"], "evidence": "env in the pod"}
HW = {"exec-in-pod": {"pod": "p", "command": "true"}, "requires": ["container-exec", "hardware"]}
EVENTS = {"events": {}, "evidence": "events read"}
PROVED = [
    {"id": "all-ran", "claim": "everything ran", "evidence": "e"},
    {"id": "some-ran", "claim": "part ran", "evidence": "e"},
    {"id": "none-ran", "claim": "nothing ran", "evidence": "e"},
    {"id": "mixed-steps", "claim": "one step ran, one was skipped", "evidence": "e"},
]
STEPS = [
    {"id": "full", "proves": ["all-ran", "mixed-steps"], "try": [EVENTS]},
    {"id": "half", "proves": ["some-ran"], "try": [EVENTS, EXEC, HW]},
    {"id": "none", "proves": ["none-ran"], "try": [EXEC]},
    {"id": "hw-step", "proves": ["mixed-steps"], "requires": ["hardware"], "try": [EVENTS]},
]


def _result(write_lab, make_env):
    lab = write_lab(STEPS, proved=PROVED)
    runner = LabRunner(lab, make_env(capabilities=("node-files",)), "run-p")
    for step in lab.steps:
        runner.run_step(step)
    return runner.finish()


def test_a_step_passes_only_when_every_operation_ran(write_lab, make_env) -> None:
    res = _result(write_lab, make_env)
    full, half, none, hw = res.steps
    assert full.status == PASSED and full.reason is None
    assert half.status == PARTIAL
    assert half.reason == (
        "not on profile memory: env in the pod (needs container-exec); try[2].exec-in-pod (needs container-exec, "
        "hardware)"
    )
    assert [o.status for o in half.ops] == [PASSED, SKIPPED, SKIPPED]
    assert half.evidence() == [half.ops[0]]  # a skipped operation is never shown as evidence
    assert none.status == SKIPPED and none.missing == ["container-exec"]
    assert hw.status == SKIPPED and hw.missing == ["hardware"]


def test_a_partial_step_does_not_stop_the_lab_but_the_lab_is_partial(write_lab, make_env) -> None:
    res = _result(write_lab, make_env)
    assert res.status == PARTIAL
    assert res.counts() == {PASSED: 1, PARTIAL: 1, FAILED: 0, SKIPPED: 2, "error": 0}


def test_proved_rows_hold_only_for_what_ran(write_lab, make_env) -> None:
    rows = {r.id: r for r in _result(write_lab, make_env).proved}
    assert rows["all-ran"].status == PASSED and rows["all-ran"].note == ""
    assert rows["some-ran"].status == PARTIAL
    assert rows["some-ran"].note.startswith("not on this profile (memory): env in the pod (needs container-exec)")
    assert rows["none-ran"].status == SKIPPED and "nothing that supports it ran" in rows["none-ran"].note
    assert rows["mixed-steps"].status == PARTIAL
    assert "step hw-step (profile memory lacks hardware" in rows["mixed-steps"].note


def test_proof_status_rules() -> None:
    ok = StepResult(id="a", title="a", status=PASSED)
    bad = StepResult(id="b", title="b", status=FAILED, reason="boom")
    part = StepResult(id="c", title="c", status=PARTIAL, ops=[
        OpOutcome(kind="exec-in-pod", where="x: steps[2] (c).try[0].exec-in-pod", status=SKIPPED,
                  missing=["container-exec"])])  # fmt: skip
    assert proof_status([], "p") == (NOT_RUN, "no step that supports this row ran")
    assert proof_status([ok, bad, part], "p")[0] == FAILED
    note = "not on this profile (p): try[0].exec-in-pod (needs container-exec)"
    assert proof_status([ok, part], "p") == (PARTIAL, note)
    assert proof_status([ok, ok], "p") == (PASSED, "")


def test_reports_name_the_skipped_operations(write_lab, make_env) -> None:
    res = _result(write_lab, make_env)
    md = lab_markdown(res)
    assert "| part ran | e | ◐ partial<br>not on this profile (memory): env in the pod (needs container-exec)" in md
    assert "**Partial:**" in md
    page = lab_html(res) + run_html("r", [res])
    assert "<span class='badge partial'>partial</span>" in page
    assert "<span class='badge skipped'>skipped</span>" in page
    assert "<span class='badge passed'>passed</span>" in page
    assert "not on this profile (memory): env in the pod (needs container-exec)" in page
    # no emoji or other pictographs in the HTML: a browser without an emoji font shows boxes
    assert not re.search("[\u2600-\u27bf\U0001f000-\U0001faff\u25d0\u23ed]", page)


def test_junit_records_skipped_operations_as_properties(write_lab, make_env) -> None:
    root = ET.fromstring(junit_xml([_result(write_lab, make_env)]))
    suite = root.find("testsuite")
    props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert props["status"] == PARTIAL and props["partial_steps"] == "1"
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    half = {p.get("name"): p.get("value") for p in cases["02-half"].find("properties")}
    assert half == {
        "status": PARTIAL,
        "skipped_operation.1": "env in the pod (needs container-exec)",
        "skipped_operation.2": "try[2].exec-in-pod (needs container-exec, hardware)",
    }
    assert cases["01-full"].find("properties") is None
    assert cases["03-none"].find("skipped") is not None


def test_pytest_summary_and_user_properties_list_skipped_operations(tmp_path: Path, capsys) -> None:
    steps = [{"id": "one", "proves": ["p"], "try": [SEED, EXEC]}]
    code, rec, run = run_pytest(tmp_path, steps)
    assert code == 0
    (report,) = rec.reports
    assert report.outcome == "passed"
    props = dict(report.user_properties)
    assert props[PARTIAL_PROPERTY].startswith("not on profile memory")
    assert props[SKIPPED_OP_PROPERTY] == "env in the pod (needs container-exec)"
    assert "evidence:env in the pod" not in props  # skipped, so not evidence
    out = capsys.readouterr().out
    assert "dralab: operations not run on this profile" in out
    assert "mylab [memory] one: partial, not run: env in the pod (needs container-exec)" in out
    assert "◐ partial" in (run / "report.md").read_text()


def test_lab_run_prints_the_partial_count(tmp_path: Path) -> None:
    import yaml

    from harness.cli import lab as lab_cmd

    lab, profile = _memory_lab(tmp_path, ok=True)
    doc = yaml.safe_load((lab / "lab.yaml").read_text())
    doc["steps"][1]["try"].append(EXEC)
    (lab / "lab.yaml").write_text(yaml.safe_dump(doc))
    result = CliRunner().invoke(lab_cmd, ["run", str(lab), "--profile", str(profile), "--reports-dir",
                                          str(tmp_path / "out")])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "◐ 02-after" in result.output and "env in the pod (needs container-exec)" in result.output
    assert "1 passed, 1 partial, 0 failed, 0 skipped" in result.output
