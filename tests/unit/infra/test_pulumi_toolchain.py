"""The toolchain's pure parts: the provider's embedded schema, the launcher, what is missing (builds nothing)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dralab.errors import UserError
from dralab_kit.pulumi import toolchain as tc


def test_provider_schema_embed_sets_the_version() -> None:
    data = json.loads(tc.provider_schema_embed({"name": "kubernetes", "version": ""}, "4.25.0"))
    assert data == {"name": "kubernetes", "version": "4.25.0"}
    assert b" " not in tc.compact_json({"a": [1, 2]})


def test_language_host_script_quotes_the_interpreter() -> None:
    script = tc.language_host_script("/path with space/python")
    assert script.startswith("#!/bin/sh\n")
    assert "'/path with space/python' -m dralab_kit.pulumi.language_host \"$@\"" in script


def test_launcher_runs_a_module_that_exists() -> None:
    """The launcher's module is the language host (a renamed module would break every engine run)."""
    import importlib

    from dralab_kit.pulumi import language_host

    assert importlib.import_module(tc.LANGUAGE_HOST_MODULE) is language_host
    assert language_host.MODULE == tc.LANGUAGE_HOST_MODULE


def test_missing_tools_reports_unbuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRALAB_CACHE", str(tmp_path))
    assert set(tc.missing_tools()) == {"pulumi", tc.PROVIDER_BINARY}
    with pytest.raises(UserError, match="dralab infra build"):
        tc.require_tools()
    from dralab_kit.pulumi import runner

    with pytest.raises(UserError, match="dralab infra build"):
        runner.prepare_target(profile="local")
