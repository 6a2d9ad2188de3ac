"""Cluster profiles as a typed model: one-line errors with field paths and hints, the exported JSON
Schema accepts every shipped profile and refuses what the model refuses, and the format is unchanged."""

from __future__ import annotations

import json
from importlib import resources

import jsonschema
import pytest
import yaml
from click.testing import CliRunner

from dralab.errors import UserError
from dralab.schema_cli import schema
from harness.profile import builtin_profiles, load_profile, parse_profile, profile_schema

LOCAL = {"name": "p", "cluster": {"source": "local"}}


def shipped(name: str) -> dict:
    return yaml.safe_load(resources.files("harness").joinpath("profiles", f"{name}.yaml").read_text())


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({**LOCAL, "clustr": {}}, "p.yaml: unknown key(s) clustr (valid: capabilities, cluster, deploy, description, "),
        ({"name": "p", "cluster": {"source": "local", "nodes": 2}},
         "p.yaml: unknown key(s) nodes in cluster (valid: "),
        ({**LOCAL, "deploy": {"method": "helm", "chart": "c", "valuez": {}}},
         "unknown key(s) valuez in deploy (valid: chart, "),
        ({"name": "p", "cluster": {"source": "cloud"}},
         "p.yaml: cluster.source must be one of local, kubeconfig, memory (got 'cloud')"),
        ({**LOCAL, "deploy": {"method": "kubectl"}}, "deploy.method must be one of host-processes, helm, none"),
        ({**LOCAL, "deploy": {"method": "helm"}}, "p.yaml: deploy.method helm needs deploy.chart"),
        ({**LOCAL, "capabilities": ["x-ray"]}, "unknown capabilit(y/ies) x-ray (known: node-files, "),
        ({"cluster": {"source": "local"}}, "p.yaml: 'name' is required"),
        ({"name": "p"}, "p.yaml: 'cluster' is required (cluster.source: local, kubeconfig, memory)"),
        ({**LOCAL, "vars": [1]}, "p.yaml: vars: input should be a valid dictionary (got [1])"),
        ({"name": "p", "cluster": {"source": "local", "realNode": "perhaps"}}, "p.yaml: cluster.realNode: "),
        ({"name": "p", "cluster": {"context": "c"}}, "p.yaml: cluster lacks source"),
        ([], "a profile is a YAML mapping"),
    ],
)  # fmt: skip
def test_bad_profiles_get_one_line_naming_the_field(doc: object, message: str) -> None:
    with pytest.raises(UserError) as err:
        parse_profile(doc, "p.yaml")
    assert message in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("name", builtin_profiles())
def test_shipped_profiles_pass_the_exported_schema(name: str) -> None:
    jsonschema.validate(shipped(name), profile_schema())
    assert load_profile(name).name == name


@pytest.mark.parametrize(
    "doc",
    [{**LOCAL, "clustr": {}}, {"name": "p", "cluster": {"source": "cloud"}}, {**LOCAL, "capabilities": ["x-ray"]},
     {"cluster": {"source": "local"}}],
)  # fmt: skip
def test_the_schema_refuses_what_the_model_refuses(doc: dict) -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, profile_schema())
    with pytest.raises(UserError):
        parse_profile(doc, "p.yaml")


@pytest.mark.parametrize("name", builtin_profiles())
def test_the_parsed_profile_keeps_the_files_mappings(name: str) -> None:
    # code reads profile.cluster / profile.deploy as the file's mappings: only keys the file sets
    doc = shipped(name)
    profile = load_profile(name)
    assert profile.cluster == doc["cluster"]
    assert profile.deploy == (doc.get("deploy") or {"method": "none"})
    assert profile.capabilities == tuple(doc.get("capabilities") or ())


def test_dralab_schema_profile_prints_the_schema(tmp_path) -> None:
    out = CliRunner().invoke(schema, ["profile"])
    assert out.exit_code == 0, out.output
    printed = json.loads(out.output)
    assert printed == json.loads(json.dumps(profile_schema()))
    assert printed["$schema"].endswith("2020-12/schema") and printed["title"] == "dralab cluster profile"
    target = tmp_path / "profile.schema.json"
    assert CliRunner().invoke(schema, ["profile", "--out", str(target)]).exit_code == 0
    assert json.loads(target.read_text()) == printed
