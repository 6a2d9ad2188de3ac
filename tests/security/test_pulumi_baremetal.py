"""Attack 8: ``pulumi up`` must never reset a running cluster, and SSH must check host keys.

The baremetal program runs under Pulumi's mocks; the mock monitor also records each resource's
``protect`` and ``retainOnDelete`` options, which the engine would enforce.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pulumi
import pytest
from pulumi.runtime import mocks as pulumi_mocks

INFRA = Path(__file__).resolve().parents[2] / "infra"
if str(INFRA) not in sys.path:
    sys.path.insert(0, str(INFRA))

KEY = "-----BEGIN KEY-----\nx\n-----END KEY-----\n"
HOST_KEYS = {
    "192.0.2.1": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPlane",
    "192.0.2.2": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIWork",
}
HOSTS = [
    {"name": "cp", "address": "192.0.2.1", "user": "ubuntu", "role": "control-plane",
     "hostKey": HOST_KEYS["192.0.2.1"]},
    {"name": "w1", "address": "192.0.2.2", "user": "ubuntu", "role": "worker", "hostKey": HOST_KEYS["192.0.2.2"]},
]
CLUSTER_RESOURCES = ("kubeadm-init", "kubeadm-join-w1")


class _Recorder(pulumi.runtime.Mocks):
    def __init__(self) -> None:
        self.inputs: dict[str, dict[str, Any]] = {}
        self.options: dict[str, dict[str, bool]] = {}

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        self.inputs[args.name] = dict(args.inputs)
        outputs = dict(args.inputs)
        if args.typ.startswith("command:"):
            outputs["stdout"] = "kubeadm join 192.0.2.1:6443 --token a.b --discovery-token-ca-cert-hash sha256:0\n"
        return f"{args.name}-id", outputs

    def call(self, args: pulumi.runtime.MockCallArgs):
        return {}


def run_baremetal(monkeypatch: pytest.MonkeyPatch, **extra: Any) -> _Recorder:
    recorder = _Recorder()
    register = pulumi_mocks.MockMonitor.RegisterResource

    def recording(self, request):
        recorder.options[request.name] = {
            "protect": bool(request.protect), "retainOnDelete": bool(request.retainOnDelete)
        }
        return register(self, request)

    monkeypatch.setattr(pulumi_mocks.MockMonitor, "RegisterResource", recording)
    asyncio.set_event_loop(asyncio.new_event_loop())
    pulumi.runtime.set_mocks(recorder, project="dralab", stack="test", preview=False)
    config = {"profile": "baremetal", "hosts": HOSTS, "backend": "nvidia", **extra}
    values = {f"dralab:{k}": v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}
    values["dralab:sshPrivateKey"] = KEY
    pulumi.runtime.set_all_config(values, secret_keys=["dralab:sshPrivateKey"])
    from dralab_infra.program import main

    @pulumi.runtime.test
    def program():
        main()

    program()
    return recorder


def _plain(value: Any) -> Any:
    if isinstance(value, dict) and "value" in value and len(value) <= 2:
        return _plain(value["value"])
    return value


def test_cluster_resources_are_protected_and_retained(monkeypatch) -> None:
    rec = run_baremetal(monkeypatch)
    for name in CLUSTER_RESOURCES:
        assert rec.options[name] == {"protect": True, "retainOnDelete": True}, name


def test_no_cluster_resource_resets_or_replaces_on_config_change(monkeypatch) -> None:
    """A new Kubernetes version or pod subnet changes no trigger, and nothing runs kubeadm reset."""
    first = run_baremetal(monkeypatch)
    second = run_baremetal(monkeypatch, kubernetesVersion="v1.35.7", podSubnet="10.99.0.0/16")
    for name in CLUSTER_RESOURCES:
        for rec in (first, second):
            assert "kubeadm reset" not in str(rec.inputs[name].get("delete") or ""), name
        assert first.inputs[name].get("triggers") == second.inputs[name].get("triggers"), name


def test_replacement_is_an_explicit_opt_in(monkeypatch) -> None:
    rec = run_baremetal(monkeypatch, allowClusterReplacement=True)
    assert rec.options["kubeadm-init"] == {"protect": False, "retainOnDelete": False}
    assert "kubeadm reset" in str(rec.inputs["kubeadm-init"]["delete"])


def test_remote_commands_pin_each_hosts_key(monkeypatch) -> None:
    rec = run_baremetal(monkeypatch)
    for name, inputs in rec.inputs.items():
        if "connection" in inputs:
            connection = _plain(inputs["connection"])
            assert connection.get("hostKey") == HOST_KEYS[connection["host"]], name


def test_ansible_checks_host_keys_against_the_configured_keys(monkeypatch) -> None:
    rec = run_baremetal(monkeypatch)
    env = _plain(rec.inputs["prepare-hosts"]["environment"])
    inv = json.loads(env["DRALAB_ANSIBLE_INVENTORY"])
    assert "ansible_host_key_checking" not in inv["all"]["vars"]
    known = env["DRALAB_ANSIBLE_KNOWN_HOSTS"].splitlines()
    assert sorted(known) == sorted(f"{addr} {key}" for addr, key in HOST_KEYS.items())


def test_the_users_host_key_opt_out_reaches_ansible_through_the_inventory(monkeypatch) -> None:
    rec = run_baremetal(monkeypatch, insecureSkipHostKeyCheck=True)
    env = _plain(rec.inputs["prepare-hosts"]["environment"])
    assert json.loads(env["DRALAB_ANSIBLE_INVENTORY"])["all"]["vars"]["ansible_host_key_checking"] is False


def test_ansible_runner_settings_check_host_keys(tmp_path: Path) -> None:
    from dralab_kit.provision.ansible import runner_envvars

    env = runner_envvars(tmp_path, known_hosts="192.0.2.1 ssh-ed25519 AAAA")
    assert env["ANSIBLE_HOST_KEY_CHECKING"] == "True"
    # common args come after the StrictHostKeyChecking=no of an inventory opt-out: ssh keeps the first
    assert env["ANSIBLE_SSH_COMMON_ARGS"] == "-o StrictHostKeyChecking=yes"
    assert "StrictHostKeyChecking" not in env["ANSIBLE_SSH_ARGS"]
    known = tmp_path / "known_hosts"
    assert f"UserKnownHostsFile={known}" in env["ANSIBLE_SSH_ARGS"]
    assert known.read_text().strip() == "192.0.2.1 ssh-ed25519 AAAA"


def test_only_the_inventory_turns_host_key_checking_off() -> None:
    from dralab_kit.provision.ansible import inventory

    hosts = [{"name": "n1", "address": "192.0.2.1", "user": "u"}]
    assert "ansible_host_key_checking" not in inventory(hosts, "nvidia")["all"]["vars"]
    assert inventory(hosts, "nvidia", check_host_keys=False)["all"]["vars"]["ansible_host_key_checking"] is False


def test_missing_host_key_is_refused_unless_the_user_opts_out() -> None:
    from dralab.errors import UserError
    from dralab_infra.settings import parse_settings

    hosts = [{k: v for k, v in h.items() if k != "hostKey"} for h in HOSTS]
    with pytest.raises(UserError, match=r"hostKey.*ssh-keyscan.*insecureSkipHostKeyCheck"):
        parse_settings({"profile": "baremetal", "hosts": hosts, "backend": "nvidia"})
    settings = parse_settings({"profile": "baremetal", "hosts": hosts, "backend": "nvidia",
                               "insecureSkipHostKeyCheck": True})
    assert settings.insecure_skip_host_key_check is True
