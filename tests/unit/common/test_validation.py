"""pydantic errors as one-line UserErrors: paths through lists and mappings, prefixes, own messages."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict, field_validator

from dralab.errors import UserError
from dralab.validation import dotted, fail, json_schema, validate


class Host(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    port: int = 22

    @field_validator("port")
    @classmethod
    def _port(cls, value: int) -> int:
        if value < 1:
            raise ValueError("must be at least 1")
        return value


class Stack(BaseModel):
    model_config = ConfigDict(extra="forbid")
    profile: str = "local"
    hosts: list[Host] = []
    labels: dict[str, str] = {}

    @field_validator("profile")
    @classmethod
    def _profile(cls, value: str) -> str:
        if value not in ("local", "kind"):
            raise fail(f"dralab:profile must be one of local, kind, got {value!r}")
        return value


def message(data: object, prefix: str = "", root: str = "") -> str:
    with pytest.raises(UserError) as err:
        validate(Stack, data, "stack", key_prefix=prefix, root=root)
    return str(err.value)


def test_paths_are_dotted_with_list_indexes() -> None:
    assert dotted(("hosts", 0, "port")) == "hosts[0].port"
    assert dotted(()) == ""


def test_unknown_keys_of_one_mapping_are_named_together_with_the_valid_ones() -> None:
    assert message({"profle": "kind", "hostz": []}, "dralab:", "config") == (
        "stack: unknown config key(s) dralab:profle, dralab:hostz (valid: hosts, labels, profile)"
    )
    assert message({"hosts": [{"name": "a", "ip": "x"}]}, "dralab:") == (
        "stack: unknown key(s) ip in dralab:hosts[0] (valid: name, port)"
    )


def test_value_errors_get_the_path_in_front_and_own_messages_stay_as_written() -> None:
    assert message({"hosts": [{"name": "a", "port": 0}]}) == "stack: hosts[0].port must be at least 1"
    assert message({"profile": "cloud"}) == "stack: dralab:profile must be one of local, kind, got 'cloud'"


def test_missing_and_mistyped_values() -> None:
    assert message({"hosts": [{"port": 2}]}) == "stack: hosts[0] lacks name"
    assert message({"hosts": [{"name": "a"}], "profile": None}).startswith("stack: profile: input should be")
    assert message({"hosts": [{"name": "a", "port": "two"}]}).startswith("stack: hosts[0].port: input should be")
    assert message({"hosts": [{"name": "a", "port": "two"}]}).endswith("(got 'two')")


def test_the_schema_has_a_title_and_the_draft() -> None:
    schema = json_schema(Stack, "stack", "a test format")
    assert schema["title"] == "stack" and schema["$schema"].endswith("2020-12/schema")
    assert schema["additionalProperties"] is False
