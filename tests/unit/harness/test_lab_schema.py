"""The lab format's JSON Schema: every shipped lab passes it, it refuses what the loader refuses in
shape, it names every key the model (harness.lab_model) knows, and the committed copy the labs point at is current."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml
from click.testing import CliRunner

from dralab.errors import UserError
from dralab.schema_cli import schema
from dralab.validation import field_names
from harness import lab_model
from harness import schema as lab_format
from harness.lab_model import LabModel, StepModel, lab_schema

LABS = Path(__file__).resolve().parents[3] / "kit" / "labs"
SHIPPED = sorted(LABS.glob("*/lab.yaml"))
HINT = "# yaml-language-server: $schema=../lab.schema.json"


def test_the_schema_is_valid_json_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(lab_schema())


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.parent.name)
def test_every_shipped_lab_passes_the_schema_and_points_at_it(path: Path) -> None:
    jsonschema.validate(yaml.safe_load(path.read_text()), lab_schema())
    assert path.read_text().splitlines()[0] == HINT


def test_labs_were_found() -> None:
    assert len(SHIPPED) >= 5


def test_the_committed_schema_is_the_exported_one() -> None:
    result = CliRunner().invoke(schema, ["lab"])
    assert result.exit_code == 0, result.output
    committed = json.loads((LABS / "lab.schema.json").read_text())
    assert committed == json.loads(result.output), "run: dralab schema lab --out kit/labs/lab.schema.json"


def test_the_schema_names_every_key_the_loader_knows() -> None:
    exported = lab_schema()
    defs = exported["$defs"]

    def resolved(refs: list[dict]) -> list[dict]:
        return [defs[ref["$ref"].removeprefix("#/$defs/")] for ref in refs]

    assert set(exported["properties"]) == set(field_names(LabModel))
    step = resolved([exported["properties"]["steps"]["items"]])[0]
    assert set(step["properties"]) == set(field_names(StepModel)) >= {"id", "try", "catch", "finally"}
    assert step["properties"]["try"]["items"] == {"$ref": "#/$defs/operation"}
    operations = resolved(defs["operation"]["oneOf"])
    assert [op["title"] for op in operations] == list(lab_model.OPERATIONS)
    for op in operations:
        assert set(op["properties"]) == {op["title"], *lab_model.COMMON_KEYS}
        body = op["properties"][op["title"]]
        ref = body["$ref"] if "$ref" in body else body["anyOf"][0]["$ref"]
        keys = set(defs[ref.removeprefix("#/$defs/")]["properties"])
        assert keys == set(lab_model.OPERATIONS[op["title"]].keys())
    assert step["properties"]["catch"]["anyOf"][0]["items"] == {"$ref": "#/$defs/collector"}
    catch = resolved(defs["collector"]["oneOf"])
    collectors = {k for k, s in lab_model.OPERATIONS.items() if s.collector}
    assert {op["title"] for op in catch} == collectors == {"events", "describe", "logs"}


MINIMAL = {
    "apiVersion": lab_format.API_VERSION,
    "kind": "Lab",
    "name": "tiny",
    "steps": [{"id": "one", "try": [{"assert": {"resource": "Pod/x", "absent": True}}]}],
}


def _with_step_op(op: object) -> dict:
    return {**MINIMAL, "steps": [{"id": "one", "try": [op]}]}


@pytest.mark.parametrize(
    "doc",
    [
        {**MINIMAL, "kind": "Test"},
        {**MINIMAL, "name": "Not_A_Label"},
        {**MINIMAL, "stepz": []},
        {**MINIMAL, "steps": []},
        {**MINIMAL, "prerequisites": {"gpus": 2}},
        {**MINIMAL, "steps": [{"id": "one", "try": []}]},
        {**MINIMAL, "steps": [{"id": "one", "tries": [{"logs": None}]}]},
        _with_step_op({"assert": {"resource": "Pod/x"}}),  # match or absent
        _with_step_op({"assert": {"resource": "Pod/x", "match": {}, "absent": True}}),  # not both
        _with_step_op({"assert": {"resource": "Pod/x", "absent": True}, "apply": {"file": "a.yaml"}}),
        _with_step_op({"assert": {"resource": "Pod/x", "absent": True, "mach": {}}}),
        _with_step_op({"capture": {"resource": "Pod/x"}}),  # values is required
        _with_step_op({"logs": None, "measure": {"since": "a"}}),
        {**MINIMAL, "steps": [{"id": "one", "try": [{"logs": None}], "catch": [{"apply": {"file": "a.yaml"}}]}]},
    ],
)
def test_the_schema_refuses_what_the_loader_refuses(doc: dict, tmp_path: Path) -> None:
    with pytest.raises(UserError):
        lab_format.parse_lab(doc, tmp_path / "lab.yaml")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, lab_schema())


def test_a_minimal_lab_passes_both(tmp_path: Path) -> None:
    lab_format.parse_lab(MINIMAL, tmp_path / "lab.yaml")
    jsonschema.validate(MINIMAL, lab_schema())


def test_kubectl_jsonpath_filters_pass_both(tmp_path: Path) -> None:
    filtered = 'items[0].spec.devices[?(@.name=="npu-0-0")].name'
    doc = {
        **MINIMAL,
        "steps": [
            {"id": "one", "try": [{"capture": {"resource": "ResourceSlice", "values": {"dev": filtered}}}]},
            {"id": "two", "try": [{"assert": {"resource": "ResourceSlice", "match": {filtered: "${dev}"}}}]},
        ],
    }
    lab = lab_format.parse_lab(doc, tmp_path / "lab.yaml")
    assert lab.steps[1].ops[0].body["match"] == {filtered: "${dev}"}
    jsonschema.validate(doc, lab_schema())
