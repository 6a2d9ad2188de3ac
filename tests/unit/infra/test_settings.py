"""Stack configuration validation: clear one-line errors before any resource exists."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from dralab.errors import UserError
from dralab_infra.settings import KNOWN_KEYS, parse_settings, settings_schema

HOSTS = [
    {"name": "cp", "address": "192.0.2.1", "user": "root", "role": "control-plane", "hostKey": "ssh-ed25519 AAAA"},
    {"name": "w1", "address": "192.0.2.2", "user": "root", "role": "worker", "port": 2222,
     "hostKey": "ssh-ed25519 BBBB"},
]


def test_defaults_are_the_local_profile() -> None:
    s = parse_settings({})
    assert s.profile == "local" and s.backend == "fake" and s.kubernetes_version == "v1.35.4"
    assert s.namespaces[0].name == "dra-ascend-e2e" and s.namespaces[0].labels == {"hami.io/webhook": "ignore"}


def test_baremetal_hosts_are_parsed() -> None:
    s = parse_settings({"profile": "baremetal", "hosts": HOSTS, "kubernetesVersion": "1.35.7"})
    assert s.backend == "ascend" and s.kubernetes_version == "v1.35.7"
    assert s.control_plane.name == "cp" and [h.port for h in s.workers_hosts] == [2222]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"profile": "openstack"}, "dralab:profile must be one of local, kind, baremetal"),
        ({"profile": "baremetal"}, "needs hosts"),
        ({"profile": "baremetal", "hosts": [HOSTS[1]]}, "exactly one host with role control-plane"),
        ({"profile": "baremetal", "hosts": [HOSTS[0], {**HOSTS[0], "role": "worker"}]}, "must be unique"),
        ({"profile": "baremetal", "hosts": [{"name": "cp", "user": "root"}]}, "hosts[0] lacks address"),
        ({"profile": "baremetal", "hosts": [{**HOSTS[0], "ip": "x"}]}, "unknown key(s) ip"),
        ({"profile": "baremetal", "hosts": [{**HOSTS[0], "name": "CP_1"}]}, "DNS label"),
        ({"profile": "baremetal", "hosts": HOSTS, "backend": "fake"}, "ascend or nvidia on baremetal"),
        ({"profile": "kind", "backend": "ascend"}, "must be fake on kind"),
        ({"kubernetesVersion": "v1.33.2"}, "too old"),
        ({"kubernetesVersion": "latest"}, "bad Kubernetes version"),
        ({"workers": "two"}, "whole number"),
        ({"workers": -1}, "at least 0"),
        ({"loadImage": "maybe"}, "true or false"),
        ({"vendors": ["metax"]}, "not in the vendor table"),
        ({"lifecycle": "pod"}, "dralab:lifecycle must be one of claim, template"),
        ({"profle": "kind"}, "unknown config key(s) dralab:profle"),
    ],
)
def test_bad_config_gets_a_clear_message(raw: dict, message: str) -> None:
    with pytest.raises(UserError) as err:
        parse_settings(raw)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


# --- the typed model behind the settings: its JSON Schema and the stack files -------------------

STACK_FILES = sorted((Path(__file__).resolve().parents[3] / "infra").glob("Pulumi.*.yaml"))


def _dralab_keys(path: Path) -> dict:
    config = yaml.safe_load(path.read_text())["config"]
    return {k.removeprefix("dralab:"): v for k, v in config.items() if k.startswith("dralab:")}


@pytest.mark.parametrize("path", STACK_FILES, ids=lambda p: p.name)
def test_shipped_stack_files_pass_the_model_and_its_schema(path: Path) -> None:
    raw = _dralab_keys(path)
    jsonschema.validate(raw, settings_schema())
    parse_settings(raw)


@pytest.mark.parametrize(
    "raw",
    [{"profle": "kind"}, {"profile": "openstack"}, {"workers": "two"}, {"loadImage": "maybe"},
     {"profile": "baremetal", "hosts": [{**HOSTS[0], "ip": "x"}]}],
)  # fmt: skip
def test_the_schema_refuses_what_the_model_refuses(raw: dict) -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(raw, settings_schema())
    with pytest.raises(UserError):
        parse_settings(raw)


def test_config_keys_are_the_models_aliases_and_values_arrive_as_text() -> None:
    expected = {"clusterName", "kubernetesVersion", "loadImage", "hosts", "sshPrivateKey", "insecureSkipHostKeyCheck"}
    assert expected <= set(KNOWN_KEYS)
    s = parse_settings({"profile": "kind", "workers": "3", "loadImage": "yes", "namespaces": ["a", {"name": "b"}]})
    assert s.workers == 3 and s.load_image is True
    assert [(n.name, n.labels) for n in s.namespaces] == [("a", {}), ("b", {})]
    assert s.hosts == ()


def test_dralab_schema_infra_prints_the_settings_schema() -> None:
    from click.testing import CliRunner

    from dralab.schema_cli import schema

    out = CliRunner().invoke(schema, ["infra"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["properties"]["hosts"]["description"].startswith("baremetal")
