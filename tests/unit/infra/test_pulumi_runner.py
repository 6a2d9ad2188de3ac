"""The stack runner's pure parts: environment, config, summaries, engine events (no CLI, no cluster)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dralab.errors import UserError
from dralab_kit.pulumi import runner as rn


def test_parse_config_pairs() -> None:
    assert rn.parse_config_pairs(["profile=kind", "kubernetes:context=x", "a=b=c"]) == {
        "dralab:profile": "kind",
        "kubernetes:context": "x",
        "dralab:a": "b=c",
    }
    for bad in ("novalue", "=x", "hosts=[{oops"):
        with pytest.raises(UserError):
            rn.parse_config_pairs([bad])
    # Pulumi.yaml types these as array/object: they must reach the stack file as structures
    assert rn.parse_config_pairs(['hosts=[{"name": "cp"}]', "chartValues={}", "image=x:[1]"]) == {
        "dralab:hosts": [{"name": "cp"}],
        "dralab:chartValues": {},
        "dralab:image": "x:[1]",
    }


def test_passphrase_defaults_only_for_lab_profiles() -> None:
    assert rn.passphrase_env({}, "local") == {"PULUMI_CONFIG_PASSPHRASE": rn.DEFAULT_PASSPHRASE}
    assert rn.passphrase_env({}, "kind") == {"PULUMI_CONFIG_PASSPHRASE": rn.DEFAULT_PASSPHRASE}
    assert rn.passphrase_env({"PULUMI_CONFIG_PASSPHRASE": ""}, "baremetal") == {}
    assert rn.passphrase_env({"PULUMI_CONFIG_PASSPHRASE_FILE": "/f"}, "baremetal") == {}
    with pytest.raises(UserError, match="PULUMI_CONFIG_PASSPHRASE"):
        rn.passphrase_env({}, "baremetal")


def test_pulumi_env_uses_local_state_and_built_tools(tmp_path: Path) -> None:
    base = {"PATH": "/usr/bin", "PULUMI_ACCESS_TOKEN": "t", "PULUMI_IGNORE_AMBIENT_PLUGINS": "1"}
    env = rn.pulumi_env(
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
    assert "KUBECONFIG" not in rn.pulumi_env(base, state=tmp_path, tool_dirs=[], profile="kind", python="/py")


def test_stack_config_document_merges_in_order() -> None:
    current = {"encryptionsalt": "v1:abc", "config": {"dralab:old": "1"}}
    base = {"config": {"dralab:profile": "kind", "dralab:nodes": "2"}}
    doc = rn.stack_config_document(current, base, {"dralab:profile": "local"})
    assert doc["encryptionsalt"] == "v1:abc"
    assert doc["config"] == {"dralab:profile": "local", "dralab:nodes": "2"}
    assert rn.stack_config_document(None, None, {"a:b": "c"}) == {"config": {"a:b": "c"}}


def test_workspace_env_blanks_what_the_cli_must_not_inherit(tmp_path: Path) -> None:
    """The Automation API starts the CLI with os.environ plus these: removed keys must be set empty."""
    env = rn.pulumi_env(
        {"PATH": "/usr/bin", "PULUMI_ACCESS_TOKEN": "t"}, state=tmp_path, tool_dirs=[], profile="kind", python="/py"
    )
    ws = rn.workspace_env(env)
    assert ws["PULUMI_ACCESS_TOKEN"] == "" and ws["PULUMI_IGNORE_AMBIENT_PLUGINS"] == ""
    assert ws["PULUMI_BACKEND_URL"] == env["PULUMI_BACKEND_URL"]


def test_summaries() -> None:
    from pulumi.automation import OpType

    assert rn.op_counts({OpType.CREATE: 4, OpType.SAME: 1}) == {"create": 4, "same": 1}
    assert rn.op_counts({"delete": 5}) == {"delete": 5}
    assert rn.op_counts(None) == {}
    assert not rn.has_changes({"same": 4})
    assert rn.has_changes({"same": 3, "update": 1})
    assert rn.describe_changes({"same": 3, "create": 1, "delete": 0}) == "1 create, 3 same"
    assert rn.describe_changes({}) == "no resources"


def test_steps_come_from_the_engine_events() -> None:
    from pulumi.automation import EngineEvent

    urn = "urn:pulumi:local::dralab::dralab:profiles:Local$kubernetes:node.k8s.io/v1:RuntimeClass::runtimeclass-ascend"
    typ = "kubernetes:node.k8s.io/v1:RuntimeClass"
    event = EngineEvent.from_json(
        {
            "sequence": 7,
            "timestamp": 1,
            "resourcePreEvent": {
                "metadata": {
                    "op": "create",
                    "urn": urn,
                    "type": typ,
                    "provider": "",
                    "new": {"type": typ, "urn": urn, "inputs": {"kind": "RuntimeClass", "handler": "ascend"}},
                }
            },
        }
    )
    step = rn.step_of(event)
    assert step == {"op": "create", "type": typ, "urn": urn, "inputs": {"kind": "RuntimeClass", "handler": "ascend"}}
    assert rn.render_step(step) == f"  create   {typ}  runtimeclass-ascend"
    assert rn.step_of(EngineEvent.from_json({"sequence": 8, "timestamp": 1, "cancelEvent": {}})) is None


def test_command_error_code() -> None:
    from pulumi.automation import CommandResult
    from pulumi.automation.errors import CommandError

    assert rn.command_error_code(CommandError(CommandResult("", "boom", 255))) == 255
    assert rn.command_error_code(RuntimeError("no code here")) == 1


def test_built_command_is_the_built_cli_without_running_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pulumi.automation import PulumiCommand

    from dralab_kit.pulumi import toolchain

    monkeypatch.setenv("DRALAB_CACHE", str(tmp_path))  # nothing there: constructing it must not run it
    cmd = rn.built_command()
    assert isinstance(cmd, PulumiCommand)
    assert cmd.command == str(toolchain.pulumi_path())
    assert str(cmd.version) == toolchain.PULUMI_VERSION.lstrip("v")


def test_unknown_action_is_refused_before_anything_runs(tmp_path: Path) -> None:
    target = rn.Target(tmp_path, "dralab", "s", "local", tmp_path, tmp_path / "Pulumi.s.yaml", {})
    with pytest.raises(UserError, match="refresh"):
        rn.run_action("refresh", target)


def test_prepare_target_rejects_unknown_profile() -> None:
    with pytest.raises(UserError, match="profile"):
        rn.prepare_target(profile="cloud")
