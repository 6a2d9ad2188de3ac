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


def _op_error(tmp_path: Path, op: object) -> str:
    with pytest.raises(UserError) as caught:
        load_lab(_lab(tmp_path, {"steps": [{"id": "alloc", "try": [{"events": {}}, op]}]}))
    return str(caught.value).removeprefix(f"{tmp_path.resolve() / 'lab.yaml'}: ")


@pytest.mark.parametrize(
    ("op", "message"),
    [
        (
            {"assert": {"resource": "Pod/x", "mach": {}}},
            "steps[0] (alloc).try[1].assert: unknown key(s) mach (valid: absent, match, resource, timeout)",
        ),
        ({"assert": {"match": {}}}, "steps[0] (alloc).try[1].assert: 'resource' is required"),
        ({"assert": "Pod/x"}, "steps[0] (alloc).try[1].assert: the body must be a mapping (keys: absent, match,"),
        (
            {"assert": {"resource": "Pod/x", "absent": True, "timeout": 3}, "timeout": 4},
            "steps[0] (alloc).try[1].assert: timeout is given twice (inside and next to the operation)",
        ),
        ({"assert": {"resource": "Pod/x", "absent": "yes"}}, "steps[0] (alloc).try[1].assert.absent: must be true"),
        ({"logs": None, "measure": {"since": "a"}}, "steps[0] (alloc).try[1].logs.measure: 'as' is required"),
        ({"logs": None, "requires": 3}, "steps[0] (alloc).try[1].logs.requires: must be a list of strings"),
        ({"events": {}, "logs": {}}, "steps[0] (alloc).try[1]: needs exactly one operation key, found events, logs"),
        ({"dralab": {"args": []}}, "steps[0] (alloc).try[1].dralab.args: a non-empty list of arguments"),
        (
            {"capture": {"resource": "Pod/x", "values": {"a b": "x"}}},
            "steps[0] (alloc).try[1].capture.values: 'a b' is not a valid variable name",
        ),
    ],
)
def test_operation_errors_name_the_step_the_operation_and_the_key(tmp_path: Path, op: object, message: str) -> None:
    assert _op_error(tmp_path, op).startswith(message)


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"prerequisites": {"gpus": 2}}, "prerequisites: unknown key(s) gpus (valid: capabilities, featureGates,"),
        ({"proved": [{"id": "p"}]}, "proved[0]: 'claim' is required"),
        ({"namespace": {"prefix": "Bad"}}, "namespace.prefix 'Bad' must be a DNS label"),
        ({"vars": {"a": "${b}"}}, "vars refer to undefined ${b}"),
        ({"catch": [{"apply": {"object": {}}}]}, "catch[0].apply: only collectors (events, describe, logs) may run"),
    ],
)
def test_lab_level_errors_name_the_key(tmp_path: Path, doc: dict, message: str) -> None:
    with pytest.raises(UserError) as caught:
        load_lab(_lab(tmp_path, {**doc, "steps": [STEP]}))
    assert str(caught.value).removeprefix(f"{tmp_path.resolve() / 'lab.yaml'}: ").startswith(message)


def test_the_loaded_operation_keeps_its_body_and_where_it_is(tmp_path: Path) -> None:
    path = 'items[0].spec.devices[?(@.name=="d")].name'
    capture = {"capture": {"resource": "ResourceSlice", "values": {"uuid": path}, "timeout": "1m"},
               "mark": "t0", "requires": "hardware"}  # fmt: skip
    lab = load_lab(_lab(tmp_path, {"steps": [{"id": "a", "try": [capture]}]}))
    op = lab.steps[0].ops[0]
    assert op.body == {"resource": "ResourceSlice", "values": {"uuid": path}}
    assert (op.timeout, op.mark, op.requires) == (60.0, "t0", ("hardware",))
    assert op.where == f"{tmp_path.resolve() / 'lab.yaml'}: steps[0] (a).try[0].capture"
    assert op.effective_timeout == 60.0 and lab.steps[0].ops[0].spec.default_timeout == 30.0
