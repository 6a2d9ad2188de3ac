"""infra/Pulumi.yaml's typed ``config:`` agrees with the program's settings model and the stack files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from dralab_infra.program import PLACEHOLDER_KEYS, SSH_KEY, without_placeholders
from dralab_infra.settings import KNOWN_KEYS, parse_settings, settings_schema

INFRA = Path(__file__).resolve().parents[3] / "infra"
DECLARED: dict[str, dict[str, Any]] = yaml.safe_load((INFRA / "Pulumi.yaml").read_text())["config"]
STACK_FILES = sorted(INFRA.glob("Pulumi.*.yaml"))


def pulumi_accepts(decl: dict[str, Any], value: Any) -> bool:
    """Pulumi's own check of a stack value against a declared type (strings that parse are accepted)."""
    kind = decl["type"]
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, str) and value.lstrip("-").isdigit()
        )
    if kind == "boolean":
        return isinstance(value, bool) or value in ("true", "false")
    if kind == "object":
        return isinstance(value, dict)
    return isinstance(value, list) and all(pulumi_accepts(decl["items"], item) for item in value)


def test_every_key_of_the_settings_is_declared_and_nothing_else() -> None:
    assert set(DECLARED) == set(KNOWN_KEYS) - {SSH_KEY}


def test_declared_types_match_the_settings_schema() -> None:
    props = settings_schema()["properties"]
    for key, decl in DECLARED.items():
        schema = props[key]
        kinds = {s.get("type") for s in schema.get("anyOf", [schema])}
        assert decl["type"] in kinds, (key, decl["type"], kinds)
        assert decl.get("description"), key
        assert pulumi_accepts(decl, decl["default"]), key


@pytest.mark.parametrize("profile", ["local", "kind"])
def test_declared_defaults_give_the_settings_defaults(profile: str) -> None:
    """Under the CLI Pulumi.yaml's defaults reach the program; under mocks nothing does: same settings."""
    from_defaults = {key: decl["default"] for key, decl in DECLARED.items()}
    from_defaults["profile"] = profile
    assert parse_settings(without_placeholders(from_defaults)) == parse_settings({"profile": profile})


def test_placeholders_are_the_empty_defaults() -> None:
    empty = {key for key, decl in DECLARED.items() if decl["default"] in ("", [], {})}
    assert empty - {"cni"} == set(PLACEHOLDER_KEYS)  # an empty cni means "no CNI", not "unset"
    assert without_placeholders({"cni": "", "backend": "", "vendors": ["ascend"]}) == {
        "cni": "",
        "vendors": ["ascend"],
    }


@pytest.mark.parametrize("path", STACK_FILES, ids=lambda p: p.name)
def test_committed_stack_files_pass_the_declared_types(path: Path) -> None:
    config = yaml.safe_load(path.read_text())["config"]
    for full_key, value in config.items():
        namespace, _, key = full_key.partition(":")
        assert namespace == "dralab", full_key
        assert key in DECLARED, full_key
        assert pulumi_accepts(DECLARED[key], value), (full_key, value)
