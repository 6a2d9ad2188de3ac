"""The lab format: a bad lab is refused before anything runs, with a message that says where."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from dralab.errors import UserError
from harness.schema import load_lab, parse_duration


def _lab(tmp_path: Path, doc: dict, files: dict[str, str] | None = None) -> Path:
    for name, text in (files or {}).items():
        (tmp_path / name).write_text(text)
    base = {"apiVersion": "dralab.io/v1alpha1", "kind": "Lab", "name": "demo"}
    (tmp_path / "lab.yaml").write_text(yaml.safe_dump({**base, **doc}))
    return tmp_path


STEP = {"id": "s", "try": [{"events": {}}]}


def test_a_valid_lab_loads_with_its_parts(tmp_path: Path) -> None:
    lab = load_lab(_lab(tmp_path, {
        "title": "Demo", "profiles": ["local"], "prerequisites": {"inventory": "lab20"},
        "namespace": {"prefix": "demo", "labels": {"a": "b"}}, "vars": {"x": "1"}, "profileVars": {"kind": {"x": "2"}},
        "proved": [{"id": "p", "claim": "C", "evidence": "E"}],
        "steps": [{"id": "s", "title": "S", "proves": ["p"], "try": [
            {"assert": {"resource": "Pod/${x}", "match": {"a": {"$len": 1}}, "timeout": "2m"}, "evidence": "e"}]}],
    }))  # fmt: skip
    assert lab.inventory == "lab20"
    assert lab.variables_for("kind") == {"x": "2"} and lab.variables_for("local") == {"x": "1"}
    op = lab.steps[0].ops[0]
    assert (op.kind, op.timeout, op.evidence) == ("assert", 120.0, "e")


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"steps": []}, "'steps' needs at least one step"),
        ({"name": "Bad_Name", "steps": [STEP]}, "must be a DNS label"),
        ({"stepz": [], "steps": [STEP]}, r"unknown key\(s\) stepz"),
        ({"steps": [{"id": "s"}]}, r"steps\[0\] \(s\): 'try' needs at least one operation"),
        ({"steps": [STEP, STEP]}, r"duplicate step id\(s\) s"),
        ({"steps": [{"id": "s", "try": [{"asert": {}}]}]}, r"steps\[0\] \(s\)\.try\[0\]: unknown key\(s\) asert"),
        ({"steps": [{"id": "s", "try": [{"assert": {"resource": "Pod/x"}}]}]}, "give exactly one of match, absent"),
        (
            {"steps": [{"id": "s", "try": [{"assert": {"resource": "Pod/x", "mach": {}}}]}]},
            r"try\[0\]\.assert: unknown key\(s\) mach",
        ),
        (
            {"steps": [{"id": "s", "try": [{"assert": {"resource": "Widget/x", "match": {}}}]}]},
            "kind 'Widget' needs an apiVersion",
        ),
        (
            {"steps": [{"id": "s", "try": [{"assert": {"resource": "Pod/x", "match": {"a": {"$regx": 1}}}}]}]},
            r"unknown operator \$regx",
        ),
        (
            {"steps": [{"id": "s", "try": [{"apply": {"file": "missing.yaml"}}]}]},
            "missing.yaml not found next to the lab",
        ),
        (
            {"steps": [{"id": "s", "try": [{"assert": {"resource": "Pod/${nope}", "match": {}}}]}]},
            r"\$\{nope\} is not defined before this point",
        ),
        ({"steps": [{"id": "s", "try": [{"events": {}}], "catch": [{"apply": {"object": {}}}]}]}, "only collectors"),
        ({"steps": [{"id": "s", "proves": ["x"], "try": [{"events": {}}]}]}, r"proves unknown row\(s\) x"),
        ({"steps": [{"id": "s", "try": [{"events": {}, "timeout": "soon"}]}]}, "'soon' is not a duration"),
        ({"profileVars": {"kind": {"y": 1}}, "steps": [STEP]}, r"sets undeclared var\(s\) y"),
        ({"apiVersion": "v1", "steps": [STEP]}, "must start with apiVersion: dralab.io/v1alpha1"),
    ],
)
def test_invalid_labs_name_the_problem(tmp_path: Path, doc: dict, message: str) -> None:
    with pytest.raises(UserError, match=message):
        load_lab(_lab(tmp_path, doc))


def test_variables_captured_earlier_may_be_used_later_but_not_before(tmp_path: Path) -> None:
    capture = {"capture": {"resource": "Pod/p", "values": {"uid": "metadata.uid"}}}
    use = {"assert": {"resource": "Pod/${uid}", "match": {}}}
    load_lab(_lab(tmp_path, {"steps": [{"id": "a", "try": [capture]}, {"id": "b", "try": [use]}]}))
    with pytest.raises(UserError, match=r"steps\[0\] \(b\)\.try\[0\]\.assert: \$\{uid\} is not defined"):
        load_lab(_lab(tmp_path, {"steps": [{"id": "b", "try": [use]}, {"id": "a", "try": [capture]}]}))


def test_manifest_variables_are_checked_too(tmp_path: Path) -> None:
    files = {"pod.yaml": "metadata: {name: ${pod}, uid: ${missing}}\n"}
    with pytest.raises(UserError, match=r"\$\{missing\} is not defined"):
        steps = [{"id": "a", "try": [{"apply": {"file": "pod.yaml", "vars": {"pod": "p"}}}]}]
        load_lab(_lab(tmp_path, {"steps": steps},
                      files))  # fmt: skip


def test_not_a_lab_folder(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no lab here"):
        load_lab(tmp_path)
    (tmp_path / "lab.yaml").write_text("a: [")
    with pytest.raises(UserError, match="not valid YAML"):
        load_lab(tmp_path)


@pytest.mark.parametrize(("text", "seconds"), [("30s", 30.0), ("2m", 120.0), ("500ms", 0.5), (5, 5.0), ("1h", 3600.0)])
def test_durations(text: object, seconds: float) -> None:
    assert parse_duration(text, "t") == seconds
