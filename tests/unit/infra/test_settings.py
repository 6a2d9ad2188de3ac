"""Stack configuration validation: clear one-line errors before any resource exists."""

from __future__ import annotations

import pytest
from dralab_infra.settings import parse_settings

from dralab.errors import UserError

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
