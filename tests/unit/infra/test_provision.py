"""dralab_kit.provision: the kind and kubeadm config generators, versions and the Ansible inventory (pure)."""

from __future__ import annotations

import re
import tomllib

import pytest
import yaml

from dralab.errors import UserError
from dralab.versions import (
    GATED_COMPONENTS,
    KIND_NODE_IMAGE,
    KIND_RELEASES,
    SUPPORTED_KUBERNETES_VERSIONS,
    check_kubernetes_version,
    feature_gates_arg,
    feature_gates_for,
    kind_release,
    parse_feature_gates,
)
from dralab_kit.provision import kind, kubeadm
from dralab_kit.provision.ansible import inventory, playbooks_digest


def test_kind_config_gates_all_components_and_enables_cdi() -> None:
    cfg = kind.kind_config(workers=2)
    assert cfg["apiVersion"] == "kind.x-k8s.io/v1alpha4"
    assert cfg["featureGates"] == {"DRAConsumableCapacity": True}
    assert [n["role"] for n in cfg["nodes"]] == ["control-plane", "worker", "worker"]
    patch = tomllib.loads(cfg["containerdConfigPatches"][0])
    cri = patch["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["enable_cdi"] is True and cri["cdi_spec_dirs"] == ["/etc/cdi", "/var/run/cdi"]
    assert cri["containerd"]["runtimes"]["ascend"] == {"runtime_type": "io.containerd.runc.v2"}


def test_kind_config_renders_round_trip_and_the_cli_writes_it(tmp_path) -> None:
    text = kind.render(kind.kind_config(workers=0, runtime_handler=""))
    assert yaml.safe_load(text)["nodes"] == [{"role": "control-plane", "image": KIND_NODE_IMAGE}]
    assert "runtimes" not in text
    assert "containerdConfigPatches:\n- |\n" in kind.render(kind.kind_config())  # readable literal block
    out = tmp_path / "kind.yaml"
    assert kind.main(["--workers", "1", "--no-image", "--out", str(out)]) == 0
    nodes = yaml.safe_load(out.read_text())["nodes"]
    assert nodes == [{"role": "control-plane"}, {"role": "worker"}]
    with pytest.raises(ValueError):
        kind.kind_config(workers=-1)


@pytest.mark.parametrize("version", SUPPORTED_KUBERNETES_VERSIONS)
def test_kind_config_takes_gates_and_node_image_from_the_version(version: str) -> None:
    cfg = kind.kind_config(workers=1, kubernetes_version=version)
    gates = feature_gates_for(version)
    assert cfg.get("featureGates") == (gates or None)  # none to pass from 1.36 on: the key is left out
    minor = version.rsplit(".", 1)[0]
    for node in cfg["nodes"]:
        assert node["image"] == kind_release(version)[1]
        assert re.fullmatch(rf"kindest/node:{re.escape(minor)}\.\d+@sha256:[0-9a-f]{{64}}", node["image"]), node


def test_kind_releases_pin_one_image_per_supported_minor_and_refuse_others() -> None:
    assert sorted(KIND_RELEASES) == sorted(int(v.split(".")[1]) for v in SUPPORTED_KUBERNETES_VERSIONS)
    assert len({image for _, image in KIND_RELEASES.values()}) == len(KIND_RELEASES)
    assert all(re.fullmatch(r"v0\.\d+\.\d+", release) for release, _ in KIND_RELEASES.values())
    with pytest.raises(UserError, match=r"no kind node image is pinned for Kubernetes v1\.34\.2: use one of 1\.35"):
        kind_release("v1.34.2")
    with pytest.raises(UserError, match="not one dralab builds"):
        kind.kind_config(kubernetes_version="v1.36.0")


def test_kind_cli_writes_the_config_of_a_version(tmp_path, capsys) -> None:
    out = tmp_path / "kind.yaml"
    assert kind.main(["--kubernetes", "v1.37.2", "--workers", "0", "--out", str(out)]) == 0
    cfg = yaml.safe_load(out.read_text())
    assert "featureGates" not in cfg and cfg["nodes"][0]["image"].startswith("kindest/node:v1.37.")
    with pytest.raises(SystemExit):
        kind.main(["--kubernetes", "v1.33.0"])
    assert "too old" in capsys.readouterr().err


def test_kubeadm_v1beta4_uses_lists_of_extra_args_and_gates_everything() -> None:
    docs = kubeadm.kubeadm_config(kubernetes_version="1.35.4", advertise_address="192.0.2.1", node_name="n1")
    init, cluster, kubelet = docs
    assert init["apiVersion"] == cluster["apiVersion"] == "kubeadm.k8s.io/v1beta4"
    assert cluster["kubernetesVersion"] == "v1.35.4"
    assert cluster["controlPlaneEndpoint"] == "192.0.2.1:6443"
    for key in ("apiServer", "controllerManager", "scheduler"):
        assert cluster[key]["extraArgs"] == [{"name": "feature-gates", "value": "DRAConsumableCapacity=true"}]
    assert kubelet["kind"] == "KubeletConfiguration" and kubelet["featureGates"] == {"DRAConsumableCapacity": True}
    assert init["nodeRegistration"]["criSocket"] == "unix:///run/containerd/containerd.sock"
    assert "taints" not in init["nodeRegistration"]
    gates = kubeadm.gates_by_component(list(yaml.safe_load_all(kubeadm.render(docs))))
    assert set(gates) == set(GATED_COMPONENTS) and all(g == {"DRAConsumableCapacity": True} for g in gates.values())


def test_single_node_kubeadm_drops_the_control_plane_taint_and_keeps_extra_gates() -> None:
    docs = kubeadm.kubeadm_config(
        kubernetes_version="v1.35.7",
        advertise_address="10.0.0.5",
        node_name="aio-node74-arm",
        schedule_on_control_plane=True,
        feature_gates={"DRAConsumableCapacity": True, "DRADeviceTaints": True},
    )
    assert docs[0]["nodeRegistration"]["taints"] == []
    assert docs[1]["apiServer"]["extraArgs"][0]["value"] == "DRAConsumableCapacity=true,DRADeviceTaints=true"


@pytest.mark.parametrize(
    ("version", "expected"), [("v1.35.4", "v1.35.4"), ("1.34.0", "v1.34.0"), (" v1.36.1 ", "v1.36.1")]
)
def test_supported_versions(version: str, expected: str) -> None:
    assert check_kubernetes_version(version) == expected


@pytest.mark.parametrize(
    ("version", "message"),
    [("v1.33.9", "too old"), ("v2.0.0", "not a 1.x release"), ("v0.35.0", "not a 1.x release"), ("1.35", "bad")],
)
def test_unsupported_versions(version: str, message: str) -> None:
    with pytest.raises(UserError, match=message):
        check_kubernetes_version(version)


def test_feature_gate_text_round_trip() -> None:
    gates = {"B": False, "A": True}
    assert feature_gates_arg(gates) == "A=true,B=false"
    assert parse_feature_gates("A=true, B=false") == {"A": True, "B": False}
    with pytest.raises(UserError, match="NAME=true"):
        parse_feature_gates("A=yes")


def test_ansible_inventory_groups_hosts_by_backend() -> None:
    hosts = [
        {"name": "a", "address": "192.0.2.1", "user": "root"},
        {"name": "b", "address": "192.0.2.2", "user": "u", "port": 2222},
    ]
    inv = inventory(hosts, "ascend")
    members = inv["all"]["children"]["dralab"]["hosts"]
    assert members["b"] == {"ansible_host": "192.0.2.2", "ansible_user": "u", "ansible_port": 2222}
    assert set(inv["all"]["children"]["ascend"]["hosts"]) == {"a", "b"}
    assert "ascend" not in inventory(hosts, "nvidia")["all"]["children"]
    assert len(playbooks_digest()) == 64
