"""The Pulumi program per profile under mocks: which resources, with the properties that matter."""

from __future__ import annotations

import json

import pulumi
import pytest
import yaml

from dralab.versions import GATED_COMPONENTS
from dralab_kit.provision.kubeadm import gates_by_component

from .conftest import Recorder, run_program

HOSTS = [
    {"name": "cp", "address": "192.0.2.1", "user": "ubuntu", "role": "control-plane", "hostKey": "ssh-ed25519 AAAA"},
    {"name": "w1", "address": "192.0.2.2", "user": "ubuntu", "role": "worker", "hostKey": "ssh-ed25519 BBBB"},
]


def test_local_profile_creates_only_api_objects(kubeconfig: str) -> None:
    rec = run_program({"profile": "local", "kubeconfig": kubeconfig})
    types = {r.typ for r in rec.resources}
    assert types == {
        "dralab:profiles:Local",
        "pulumi:providers:kubernetes",
        "kubernetes:core/v1:Namespace",
        "kubernetes:node.k8s.io/v1:RuntimeClass",
        "kubernetes:resource.k8s.io/v1:DeviceClass",
    }
    assert rec.named("local").inputs["kubeconfig"] == kubeconfig
    runtime = rec.named("runtimeclass-ascend").inputs
    assert runtime["handler"] == "ascend" and runtime["metadata"]["name"] == "ascend"
    classes = {
        r.inputs["metadata"]["name"]: r.inputs["spec"] for r in rec.of_type("kubernetes:resource.k8s.io/v1:DeviceClass")
    }
    assert set(classes) == {"hami-vnpu-core.project-hami.io", "hami-core-gpu.project-hami.io", "dra.hygon.com"}
    assert (
        'device.attributes["ascend.project-hami.io"].type == "HAMivNPUCore"'
        in (classes["hami-vnpu-core.project-hami.io"]["selectors"][0]["cel"]["expression"])
    )
    ns = {
        r.inputs["metadata"]["name"]: r.inputs["metadata"]["labels"]
        for r in rec.of_type("kubernetes:core/v1:Namespace")
    }
    assert ns["dralab-system"]["dralab.io/convert"] == "false"
    assert ns["dra-ascend-e2e"]["hami.io/webhook"] == "ignore"


def test_local_profile_vendors_and_namespaces_come_from_config(kubeconfig: str) -> None:
    rec = run_program(
        {"kubeconfig": kubeconfig, "vendors": ["ascend"], "namespaces": [{"name": "lab", "labels": {"a": "b"}}]}
    )
    assert [r.inputs["metadata"]["name"] for r in rec.of_type("kubernetes:resource.k8s.io/v1:DeviceClass")] == [
        "hami-vnpu-core.project-hami.io"
    ]
    names = sorted(r.inputs["metadata"]["name"] for r in rec.of_type("kubernetes:core/v1:Namespace"))
    assert names == ["dralab-system", "lab"]


def test_kind_profile_follows_the_stacks_kubernetes_version() -> None:
    rec = run_program({"profile": "kind", "kubernetesVersion": "v1.37.2"})
    config = yaml.safe_load(rec.named("kind-cluster").inputs["stdin"])
    assert "featureGates" not in config  # 1.37 needs no gate passed
    assert all(n["image"].startswith("kindest/node:v1.37.") and "@sha256:" in n["image"] for n in config["nodes"])


def test_kind_profile_creates_the_cluster_cert_manager_and_the_chart() -> None:
    rec = run_program({"profile": "kind", "workers": 2, "image": "dralab:e2e", "loadImage": True})
    cluster = rec.named("kind-cluster").inputs
    assert cluster["create"].startswith("kind create cluster --name dralab --config -")
    assert cluster["delete"] == "kind delete cluster --name dralab"
    config = yaml.safe_load(cluster["stdin"])
    # the gate reaches all four components through kind's top-level featureGates
    assert config["featureGates"] == {"DRAConsumableCapacity": True}
    patch = config["containerdConfigPatches"][0]
    assert "enable_cdi = true" in patch and 'cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]' in patch
    assert '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.ascend]' in patch
    assert 'runtime_type = "io.containerd.runc.v2"' in patch
    assert [n["role"] for n in config["nodes"]] == ["control-plane", "worker", "worker"]
    assert all(n["image"].startswith("kindest/node:v1.35.") and "@sha256:" in n["image"] for n in config["nodes"])
    assert rec.named("kind-load-image").inputs["create"] == "kind load docker-image dralab:e2e --name dralab"
    releases = {r.name: r.inputs for r in rec.of_type("kubernetes:helm.sh/v3:Release")}
    cm = releases["cert-manager"]
    assert cm["values"] == {"crds": {"enabled": True}} and cm["repositoryOpts"]["repo"] == "https://charts.jetstack.io"
    dralab = releases["dralab"]
    assert dralab["chart"].endswith("charts/dralab") and dralab["namespace"] == "dralab-system"
    assert dralab["values"]["driver"]["backend"] == "fake"
    assert dralab["values"]["image"] == {"repository": "dralab", "tag": "e2e"}
    assert rec.named("runtimeclass-ascend").inputs["handler"] == "ascend"


def test_kind_profile_without_image_loading() -> None:
    rec = run_program({"profile": "kind"})
    assert not [r for r in rec.resources if r.name == "kind-load-image"]
    assert yaml.safe_load(rec.named("kind-cluster").inputs["stdin"])["nodes"][1]["role"] == "worker"


def kubeadm_config_text(rec: Recorder) -> str:
    """The kubeadm config the program uploads (a StringAsset of the CopyToRemote)."""
    source = rec.named("kubeadm-config").inputs["source"]
    assert isinstance(source, pulumi.StringAsset), source
    return source.text


def _baremetal(**extra) -> Recorder:
    config = {"profile": "baremetal", "hosts": HOSTS, "backend": "nvidia", **extra}
    return run_program(config, secrets={"sshPrivateKey": "-----BEGIN KEY-----\nx\n-----END KEY-----\n"})


def test_baremetal_prepares_hosts_then_runs_kubeadm_with_the_gate_everywhere() -> None:
    rec = _baremetal()
    prepare = rec.named("prepare-hosts").inputs
    assert prepare["create"].endswith("-m dralab_kit.provision.ansible")
    inv = json.loads(prepare["environment"]["DRALAB_ANSIBLE_INVENTORY"])
    assert "environment" in rec.named("prepare-hosts").secret_inputs  # it carries the SSH key
    assert set(inv["all"]["children"]["dralab"]["hosts"]) == {"cp", "w1"}
    assert inv["all"]["vars"]["dralab_backend"] == "nvidia"
    extravars = json.loads(prepare["environment"]["DRALAB_ANSIBLE_EXTRAVARS"])
    assert extravars["kubelet_feature_gates_kubernetes_version"] == "v1.35.4"  # the role's gates follow it
    init = rec.named("kubeadm-init").inputs
    assert "connection" in rec.named("kubeadm-init").secret_inputs
    assert init["connection"]["host"] == "192.0.2.1" and init["connection"]["user"] == "ubuntu"
    assert "sudo kubeadm init --config /etc/dralab/kubeadm.yaml" in init["create"]
    upload = rec.named("kubeadm-config")
    assert upload.typ == "command:remote:CopyToRemote"
    assert upload.inputs["connection"]["host"] == "192.0.2.1" and "connection" in upload.secret_inputs
    assert f"install -D -m 0600 {upload.inputs['remotePath']} /etc/dralab/kubeadm.yaml" in init["create"]
    docs = list(yaml.safe_load_all(kubeadm_config_text(rec)))
    assert [d["kind"] for d in docs] == ["InitConfiguration", "ClusterConfiguration", "KubeletConfiguration"]
    assert all(d["apiVersion"] == "kubeadm.k8s.io/v1beta4" for d in docs[:2])
    gates = gates_by_component(docs)
    assert set(gates) == set(GATED_COMPONENTS)
    assert all(g == {"DRAConsumableCapacity": True} for g in gates.values())
    assert docs[1]["apiServer"]["extraArgs"] == [{"name": "feature-gates", "value": "DRAConsumableCapacity=true"}]
    assert "taints" not in docs[0]["nodeRegistration"]  # a worker exists: the control plane keeps its taint
    join = rec.named("kubeadm-join-w1").inputs
    assert join["connection"]["host"] == "192.0.2.2"
    assert "sudo kubeadm join 192.0.2.1:6443 --token abc.def" in join["create"]
    assert "flannel" in rec.named("cni").inputs["create"]
    assert rec.named("admin-kubeconfig").inputs["create"] == "sudo cat /etc/kubernetes/admin.conf"
    release = next(r for r in rec.of_type("kubernetes:helm.sh/v3:Release") if r.name == "dralab").inputs
    assert release["values"]["driver"]["backend"] == "nvidia"
    assert release["values"]["vendors"]["enabled"] == ["nvidia"]


def test_single_node_baremetal_schedules_on_the_control_plane() -> None:
    rec = run_program(
        {"profile": "baremetal", "hosts": HOSTS[:1], "kubernetesVersion": "v1.35.7", "cni": ""},
        secrets={"sshPrivateKey": "k"},
    )
    docs = list(yaml.safe_load_all(kubeadm_config_text(rec)))
    assert docs[0]["nodeRegistration"]["taints"] == []
    assert docs[1]["kubernetesVersion"] == "v1.35.7"
    names = {r.name for r in rec.resources}
    assert "join-command" not in names and "cni" not in names
    release = next(r for r in rec.of_type("kubernetes:helm.sh/v3:Release") if r.name == "dralab").inputs
    assert release["values"]["driver"]["backend"] == "ascend"


def test_baremetal_without_an_ssh_key_stops_with_the_fix() -> None:
    with pytest.raises(pulumi.RunError, match="config set --secret dralab:sshPrivateKey"):
        run_program({"profile": "baremetal", "hosts": HOSTS})


def test_invalid_config_is_a_run_error_without_traceback() -> None:
    with pytest.raises(pulumi.RunError, match="exactly one host with role control-plane"):
        run_program({"profile": "baremetal", "hosts": HOSTS[1:]}, secrets={"sshPrivateKey": "k"})


def test_local_profile_takes_kubeconfig_from_the_environment(kubeconfig: str, monkeypatch) -> None:
    monkeypatch.setenv("KUBECONFIG", kubeconfig)
    rec = run_program({"profile": "local"})
    assert rec.named("local").inputs["kubeconfig"] == kubeconfig


def test_local_profile_without_a_cluster_says_how_to_get_one(monkeypatch, tmp_path) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("DRALAB_HOME", str(tmp_path))
    with pytest.raises(pulumi.RunError, match="dralab cluster up"):
        run_program({"profile": "local", "clusterName": "nothere"})


PROFILE_TYPES = {
    "local": "dralab:profiles:Local",
    "kind": "dralab:profiles:Kind",
    "baremetal": "dralab:profiles:Baremetal",
    "node": "dralab:profiles:Node",
}


def test_node_profile_stands_up_cluster_images_cert_manager_and_the_chart() -> None:
    rec = run_program({"profile": "node", "clusterName": "dralab-node-chart"})
    dynamic = {r.name: r.inputs for r in rec.of_type("pulumi-python:dynamic:Resource")}
    assert dynamic["node-cluster"]["name"] == "dralab-node-chart"
    assert dynamic["node-cluster"]["kubernetes"] == "v1.35.4"
    assert len(dynamic["node-images"]["revision"]) == 16  # the image's inputs: a change imports a new image
    releases = {r.name: r.inputs for r in rec.of_type("kubernetes:helm.sh/v3:Release")}
    cm = releases["cert-manager"]
    assert cm["chart"].endswith("cert-manager") and cm["values"]["installCRDs"] is True
    assert cm["values"]["image"]["pullPolicy"] == "Never"  # built here, imported, never pulled
    values = releases["dralab"]["values"]
    assert values["image"] == {"repository": "dralab.local/dralab", "tag": "0.1.0-test", "pullPolicy": "Never"}
    assert "runtimeClasses" not in values and values["monitor"]["enabled"] is True  # the chart makes `ascend`
    assert values["webhook"]["certManager"]["caInjector"] == "dralab"
    assert values["driver"]["registryDir"].endswith("plugins_registry")


def test_node_profile_refuses_real_device_backends() -> None:
    with pytest.raises(Exception, match="backend must be fake on node"):
        run_program({"profile": "node", "backend": "ascend"})


@pytest.mark.parametrize("profile", sorted(PROFILE_TYPES))
def test_each_profile_is_one_component_owning_every_resource(profile: str, kubeconfig: str) -> None:
    if profile == "baremetal":
        rec = _baremetal()
    elif profile == "local":
        rec = run_program({"profile": profile, "kubeconfig": kubeconfig})
    elif profile == "node":
        rec = run_program({"profile": profile, "clusterName": "dralab-node-chart"})
    else:
        rec = run_program({"profile": profile})
    components = [r for r in rec.resources if r.typ.startswith("dralab:profiles:")]
    assert [(c.typ, c.name) for c in components] == [(PROFILE_TYPES[profile], f"dralab-{profile}")]
    assert components[0].parent.endswith("pulumi:pulumi:Stack::dralab-test")  # the stack's own child
    children = [r for r in rec.resources if r is not components[0]]
    assert children
    for child in children:
        assert child.parent.endswith(f"${PROFILE_TYPES[profile]}::dralab-{profile}"), (child.name, child.parent)
        # adopted in place from stacks made before the component existed: no replacement
        assert child.aliased_to_root, child.name


def test_config_change_updates_the_uploaded_kubeadm_config_without_a_new_trigger() -> None:
    first = _baremetal()
    second = _baremetal(podSubnet="10.99.0.0/16")
    assert kubeadm_config_text(first) != kubeadm_config_text(second)
    init = [rec.named("kubeadm-init").inputs for rec in (first, second)]
    assert init[0]["environment"] != init[1]["environment"]  # an update re-installs the file
    assert init[0].get("triggers") == init[1].get("triggers")  # but nothing replaces the cluster


def test_baremetal_refuses_an_ssh_key_stored_in_plain_text() -> None:
    with pytest.raises(pulumi.RunError, match=r"plain text.*--secret"):
        run_program({"profile": "baremetal", "hosts": HOSTS, "sshPrivateKey": "-----BEGIN KEY-----"})
