"""The pure parts of ``dralab infra`` and its language host (fast; no cluster, no Go, no Pulumi CLI)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dralab import infra_cli as ic
from dralab.errors import UserError


def _spec(**over) -> ic.RunSpec:
    values = dict(
        project="dralab",
        stack="local",
        pwd="/src/infra",
        program="/src/infra",
        args=(),
        config={"dralab:profile": "local"},
        secret_keys=("dralab:token",),
        dry_run=True,
        parallel=8,
        monitor="127.0.0.1:1001",
        engine="127.0.0.1:1002",
        organization="organization",
        root_directory="/src/infra",
        options={},
    )
    values.update(over)
    return ic.RunSpec(**values)


def test_engine_address_is_the_last_positional_argument() -> None:
    assert ic.engine_address(["-tracing=x", "127.0.0.1:5000"]) == "127.0.0.1:5000"
    assert ic.engine_address(["127.0.0.1:1", "127.0.0.1:2"]) == "127.0.0.1:2"
    with pytest.raises(UserError):
        ic.engine_address(["-v"])


def test_program_interpreter_prefers_virtualenv_then_env_then_default() -> None:
    assert ic.program_interpreter({"virtualenv": "venv"}, "/p", {}, "/py") == "/p/venv/bin/python"
    assert ic.program_interpreter({"virtualenv": "/abs/v"}, "/p", {}, "/py") == "/abs/v/bin/python"
    assert ic.program_interpreter({}, "/p", {"PULUMI_PYTHON_CMD": "/x/python3"}, "/py") == "/x/python3"
    assert ic.program_interpreter({}, "/p", {}, "/py") == "/py"


def test_choose_interpreter_falls_back_past_a_missing_virtualenv(tmp_path: Path, capsys) -> None:
    venv_python = tmp_path / "venv" / "bin" / "python"
    venv_python.parent.mkdir(parents=True)
    venv_python.write_text("")
    assert ic.choose_interpreter({"virtualenv": "venv"}, str(tmp_path), {}, "/py") == str(venv_python)
    assert ic.choose_interpreter({"virtualenv": "gone"}, str(tmp_path), {}, "/py") == "/py"
    assert "not found" in capsys.readouterr().err


def test_program_path() -> None:
    assert ic.program_path("/p", ".", "") == "/p"
    assert ic.program_path("/p", "", "") == "/p"
    assert ic.program_path("/p", "main.py", "") == "/p/main.py"
    assert ic.program_path("", "", "/legacy") == "/legacy"


def test_child_command_carries_every_setting() -> None:
    cmd = ic.child_command(_spec(args=("a",)), "/py")
    assert cmd[:5] == ["/py", "-u", "-m", "dralab.infra_cli", "run-program"]
    joined = " ".join(cmd)
    for flag in ("--monitor 127.0.0.1:1001", "--engine 127.0.0.1:1002", "--stack local", "--parallel 8"):
        assert flag in joined
    assert "--dry-run" in cmd
    assert cmd[-3:] == ["--", "/src/infra", "a"]
    assert "--dry-run" not in ic.child_command(_spec(dry_run=False), "/py")
    assert "--organization" not in ic.child_command(_spec(organization=""), "/py")


def test_child_env_holds_config_as_the_sdk_reads_it() -> None:
    env = ic.child_env(_spec(), {"HOME": "/root"})
    assert env["HOME"] == "/root"
    assert json.loads(env["PULUMI_CONFIG"]) == {"dralab:profile": "local"}
    assert json.loads(env["PULUMI_CONFIG_SECRET_KEYS"]) == ["dralab:token"]


def test_run_outcome() -> None:
    assert ic.run_outcome(0) == ("", False)
    assert ic.run_outcome(ic.USER_PROGRAM_EXIT) == ("", True)
    error, bail = ic.run_outcome(1)
    assert "1" in error and not bail


def test_parse_config_pairs() -> None:
    assert ic.parse_config_pairs(["profile=kind", "kubernetes:context=x", "a=b=c"]) == {
        "dralab:profile": "kind",
        "kubernetes:context": "x",
        "dralab:a": "b=c",
    }
    for bad in ("novalue", "=x"):
        with pytest.raises(UserError):
            ic.parse_config_pairs([bad])


def test_passphrase_defaults_only_for_lab_profiles() -> None:
    assert ic.passphrase_env({}, "local") == {"PULUMI_CONFIG_PASSPHRASE": ic.DEFAULT_PASSPHRASE}
    assert ic.passphrase_env({}, "kind") == {"PULUMI_CONFIG_PASSPHRASE": ic.DEFAULT_PASSPHRASE}
    assert ic.passphrase_env({"PULUMI_CONFIG_PASSPHRASE": ""}, "baremetal") == {}
    assert ic.passphrase_env({"PULUMI_CONFIG_PASSPHRASE_FILE": "/f"}, "baremetal") == {}
    with pytest.raises(UserError, match="PULUMI_CONFIG_PASSPHRASE"):
        ic.passphrase_env({}, "baremetal")


def test_pulumi_env_uses_local_state_and_built_tools(tmp_path: Path) -> None:
    base = {"PATH": "/usr/bin", "PULUMI_ACCESS_TOKEN": "t", "PULUMI_IGNORE_AMBIENT_PLUGINS": "1"}
    env = ic.pulumi_env(
        base,
        state=tmp_path,
        tool_dirs=[Path("/a"), Path("/b")],
        profile="local",
        python="/py",
        kubeconfig=Path("/k"),
    )
    assert env["PATH"] == "/a:/b:/usr/bin"
    assert env["PULUMI_BACKEND_URL"] == (tmp_path / "backend").as_uri()
    assert env["PULUMI_BACKEND_URL"].startswith("file:///")
    assert env["PULUMI_HOME"] == str(tmp_path / "home")
    assert env["PULUMI_PYTHON_CMD"] == "/py"
    assert env["KUBECONFIG"] == "/k"
    assert env["PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION"] == "true"
    assert env["PULUMI_SKIP_UPDATE_CHECK"] == "true"
    assert "PULUMI_ACCESS_TOKEN" not in env and "PULUMI_IGNORE_AMBIENT_PLUGINS" not in env
    assert "KUBECONFIG" not in ic.pulumi_env(base, state=tmp_path, tool_dirs=[], profile="kind", python="/py")


def test_stack_config_document_merges_in_order() -> None:
    current = {"encryptionsalt": "v1:abc", "config": {"dralab:old": "1"}}
    base = {"config": {"dralab:profile": "kind", "dralab:nodes": "2"}}
    doc = ic.stack_config_document(current, base, {"dralab:profile": "local"})
    assert doc["encryptionsalt"] == "v1:abc"
    assert doc["config"] == {"dralab:profile": "local", "dralab:nodes": "2"}
    assert ic.stack_config_document(None, None, {"a:b": "c"}) == {"config": {"a:b": "c"}}


def test_pulumi_args() -> None:
    args = ic.pulumi_args("up", "local", Path("/s/Pulumi.local.yaml"), Path("/src/infra"))
    assert args[0] == "up" and "--yes" in args and "--non-interactive" in args
    assert args[args.index("--config-file") + 1] == "/s/Pulumi.local.yaml"
    assert args[args.index("--cwd") + 1] == "/src/infra"
    preview = ic.pulumi_args("preview", "local", Path("/c"), Path("/i"), json_output=True)
    assert "--yes" not in preview and "--json" in preview
    with pytest.raises(UserError):
        ic.pulumi_args("refresh", "local", Path("/c"), Path("/i"))


def test_summaries() -> None:
    history = [
        {"version": 2, "resourceChanges": {"same": 5}},
        {"version": 3, "resourceChanges": {"delete": 5}},
        {"version": 1, "resourceChanges": {"create": 5}},
    ]
    assert ic.change_summary(history) == {"delete": 5}
    assert ic.change_summary([]) == {}
    assert ic.preview_summary({"changeSummary": {"create": 4}}) == {"create": 4}
    assert not ic.has_changes({"same": 4})
    assert ic.has_changes({"same": 3, "update": 1})
    assert ic.describe_changes({"same": 3, "create": 1, "delete": 0}) == "1 create, 3 same"
    assert ic.describe_changes({}) == "no resources"


def test_render_preview() -> None:
    doc = {
        "steps": [
            {
                "op": "create",
                "urn": "urn:pulumi:local::dralab::kubernetes:node.k8s.io/v1:RuntimeClass::runtimeclass-ascend",
                "newState": {"type": "kubernetes:node.k8s.io/v1:RuntimeClass"},
            }
        ],
        "diagnostics": [{"severity": "error", "message": "boom\n"}],
    }
    text = ic.render_preview(doc)
    assert "create" in text and "kubernetes:node.k8s.io/v1:RuntimeClass  runtimeclass-ascend" in text
    assert "error: boom" in text
    assert ic.render_preview({}) == ""


def test_provider_schema_embed_sets_the_version() -> None:
    data = json.loads(ic.provider_schema_embed({"name": "kubernetes", "version": ""}, "4.25.0"))
    assert data == {"name": "kubernetes", "version": "4.25.0"}
    assert b" " not in ic.compact_json({"a": [1, 2]})


def test_language_host_script_quotes_the_interpreter() -> None:
    script = ic.language_host_script("/path with space/python")
    assert script.startswith("#!/bin/sh\n")
    assert "'/path with space/python' -m dralab.infra_cli language-host" in script


def test_missing_tools_reports_unbuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRALAB_CACHE", str(tmp_path))
    assert set(ic.missing_tools()) == {"pulumi", ic.PROVIDER_BINARY}
    with pytest.raises(UserError, match="dralab infra build"):
        ic.prepare_target(profile="local")


def test_prepare_target_rejects_unknown_profile() -> None:
    with pytest.raises(UserError, match="profile"):
        ic.prepare_target(profile="cloud")


def test_language_host_serves_the_protocol() -> None:
    """The host starts, prints its port on stdout (what the engine reads) and answers over gRPC."""
    grpc = pytest.importorskip("grpc")
    from google.protobuf import empty_pb2
    from pulumi.runtime.proto import language_pb2, language_pb2_grpc

    proc = subprocess.Popen(
        [sys.executable, "-m", "dralab.infra_cli", "language-host", "127.0.0.1:1"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline().strip())
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        stub = language_pb2_grpc.LanguageRuntimeStub(channel)
        info = stub.GetPluginInfo(empty_pb2.Empty(), timeout=30)
        assert info.version == ic._sdk_version("pulumi")
        packages = stub.GetRequiredPackages(language_pb2.GetRequiredPackagesRequest(), timeout=30)
        assert list(packages.packages) == []
        channel.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
