"""dralab's Pulumi language host: the pure parts, and the server answering over gRPC (no CLI, no Go)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dralab.errors import UserError
from dralab_kit.pulumi import language_host as lh


def _spec(**over) -> lh.RunSpec:
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
    return lh.RunSpec(**values)


def test_engine_address_is_the_last_positional_argument() -> None:
    assert lh.engine_address(["-tracing=x", "127.0.0.1:5000"]) == "127.0.0.1:5000"
    assert lh.engine_address(["127.0.0.1:1", "127.0.0.1:2"]) == "127.0.0.1:2"
    with pytest.raises(UserError):
        lh.engine_address(["-v"])


def test_program_interpreter_prefers_virtualenv_then_env_then_default() -> None:
    assert lh.program_interpreter({"virtualenv": "venv"}, "/p", {}, "/py") == "/p/venv/bin/python"
    assert lh.program_interpreter({"virtualenv": "/abs/v"}, "/p", {}, "/py") == "/abs/v/bin/python"
    assert lh.program_interpreter({}, "/p", {"PULUMI_PYTHON_CMD": "/x/python3"}, "/py") == "/x/python3"
    assert lh.program_interpreter({}, "/p", {}, "/py") == "/py"


def test_choose_interpreter_falls_back_past_a_missing_virtualenv(tmp_path: Path, capsys) -> None:
    venv_python = tmp_path / "venv" / "bin" / "python"
    venv_python.parent.mkdir(parents=True)
    venv_python.write_text("")
    assert lh.choose_interpreter({"virtualenv": "venv"}, str(tmp_path), {}, "/py") == str(venv_python)
    assert lh.choose_interpreter({"virtualenv": "gone"}, str(tmp_path), {}, "/py") == "/py"
    assert "not found" in capsys.readouterr().err


def test_program_path() -> None:
    assert lh.program_path("/p", ".", "") == "/p"
    assert lh.program_path("/p", "", "") == "/p"
    assert lh.program_path("/p", "main.py", "") == "/p/main.py"
    assert lh.program_path("", "", "/legacy") == "/legacy"


def test_child_command_carries_every_setting() -> None:
    cmd = lh.child_command(_spec(args=("a",)), "/py")
    assert cmd[:5] == ["/py", "-u", "-m", "dralab_kit.pulumi.language_host", "run-program"]
    joined = " ".join(cmd)
    for flag in ("--monitor 127.0.0.1:1001", "--engine 127.0.0.1:1002", "--stack local", "--parallel 8"):
        assert flag in joined
    assert "--dry-run" in cmd
    assert cmd[-3:] == ["--", "/src/infra", "a"]
    assert "--dry-run" not in lh.child_command(_spec(dry_run=False), "/py")
    assert "--organization" not in lh.child_command(_spec(organization=""), "/py")


def test_child_env_holds_config_as_the_sdk_reads_it() -> None:
    env = lh.child_env(_spec(), {"HOME": "/root"})
    assert env["HOME"] == "/root"
    assert json.loads(env["PULUMI_CONFIG"]) == {"dralab:profile": "local"}
    assert json.loads(env["PULUMI_CONFIG_SECRET_KEYS"]) == ["dralab:token"]


def test_run_outcome() -> None:
    assert lh.run_outcome(0) == ("", False)
    assert lh.run_outcome(lh.USER_PROGRAM_EXIT) == ("", True)
    error, bail = lh.run_outcome(1)
    assert "1" in error and not bail


def test_language_host_serves_the_protocol() -> None:
    """The host starts, prints its port on stdout (what the engine reads) and answers over gRPC."""
    grpc = pytest.importorskip("grpc")
    from google.protobuf import empty_pb2
    from pulumi.runtime.proto import language_pb2, language_pb2_grpc

    proc = subprocess.Popen(
        [sys.executable, "-m", "dralab_kit.pulumi.language_host", "127.0.0.1:1"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline().strip())
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        stub = language_pb2_grpc.LanguageRuntimeStub(channel)
        info = stub.GetPluginInfo(empty_pb2.Empty(), timeout=30)
        assert info.version == lh.sdk_version("pulumi")
        packages = stub.GetRequiredPackages(language_pb2.GetRequiredPackagesRequest(), timeout=30)
        assert list(packages.packages) == []
        channel.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
