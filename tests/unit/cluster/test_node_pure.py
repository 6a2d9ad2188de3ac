"""The real node's pure parts: OCI archives, configs, paths, the tap's record decoding (nothing runs)."""

from __future__ import annotations

import hashlib
import json
import tarfile
import tomllib
from pathlib import Path

import pytest

from dralab.driver.proto import dra_v1_pb2 as pb
from dralab_kit.cluster import build
from dralab_kit.cluster.node import components, config, images, integration, lifecycle, tap
from dralab_kit.cluster.node.paths import SOCKET_BUDGET, NodePaths

LDD = """\tlinux-vdso.so.1 (0x00007ffd)
\tlibdl.so.2 => /lib/x86_64-linux-gnu/libdl.so.2 (0x00007f93)
\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f93)
\t/lib64/ld-linux-x86-64.so.2 (0x00007f93)
"""


def test_parse_ldd_keeps_resolved_libraries_and_the_loader() -> None:
    assert images.parse_ldd(LDD) == [
        Path("/lib/x86_64-linux-gnu/libdl.so.2"),
        Path("/lib/x86_64-linux-gnu/libc.so.6"),
        Path("/lib64/ld-linux-x86-64.so.2"),
    ]


def test_oci_arch_names() -> None:
    assert images.oci_arch("x86_64") == "amd64"
    assert images.oci_arch("aarch64") == "arm64"


def test_oci_archive_is_a_complete_deterministic_layout(tmp_path: Path) -> None:
    payload = tmp_path / "hello"
    payload.write_bytes(b"#!/bin/sh\necho hi\n")
    layer = images.Layer()
    layer.add_file("usr/bin/hello", payload, 0o755)
    layer.add_link("bin/hi", "../usr/bin/hello")
    first = images.write_oci_archive(tmp_path / "a.tar", "dralab.local/t:1", layer, ["/usr/bin/hello"], arch="amd64")
    second = images.write_oci_archive(tmp_path / "b.tar", "dralab.local/t:1", layer, ["/usr/bin/hello"], arch="amd64")
    assert first == second  # same inputs, same digest
    with tarfile.open(tmp_path / "a.tar") as tar:
        names = tar.getnames()
        index = json.loads(tar.extractfile("index.json").read())  # type: ignore[union-attr]
        blobs = {n.rsplit("/", 1)[1]: tar.extractfile(n).read() for n in names if n.startswith("blobs/")}  # type: ignore[union-attr]
    assert "oci-layout" in names
    entry = index["manifests"][0]
    assert entry["annotations"]["io.containerd.image.name"] == "dralab.local/t:1"
    for digest, data in blobs.items():
        assert hashlib.sha256(data).hexdigest() == digest
    manifest = json.loads(blobs[entry["digest"].split(":")[1]])
    cfg = json.loads(blobs[manifest["config"]["digest"].split(":")[1]])
    assert cfg["rootfs"]["diff_ids"] == [manifest["layers"][0]["digest"]]
    assert cfg["config"]["Entrypoint"] == ["/usr/bin/hello"]
    import io

    with tarfile.open(fileobj=io.BytesIO(blobs[manifest["layers"][0]["digest"].split(":")[1]])) as layer_tar:
        members = {m.name: m for m in layer_tar.getmembers()}
    assert members["usr/bin/hello"].mode == 0o755 and members["usr/bin/hello"].mtime == 0
    assert members["bin/hi"].issym() and members["bin/hi"].linkname == "../usr/bin/hello"
    assert members["usr"].isdir() and members["usr/bin"].isdir()


def _paths(tmp_path: Path) -> NodePaths:
    return NodePaths("c", "n1", tmp_path / "node")


def test_containerd_base_is_valid_toml_with_the_machine_settings(tmp_path: Path) -> None:
    paths = _paths(tmp_path)
    doc = tomllib.loads(config.containerd_base(paths, Path("/x/runc"), Path("/x/cni"), 4321))
    runtime = doc["plugins"]["io.containerd.cri.v1.runtime"]
    assert doc["version"] == 3
    assert doc["root"].startswith(str(paths.root)) and doc["state"].startswith(str(paths.root))
    assert doc["grpc"]["address"] == str(paths.containerd_socket)
    assert runtime["restrict_oom_score_adj"] is True
    assert runtime["containerd"]["runtimes"]["runc"]["options"] == {"BinaryName": "/x/runc", "SystemdCgroup": False}
    assert runtime["cni"]["conf_dir"] == str(paths.cni_conf_dir)
    assert doc["plugins"]["io.containerd.cri.v1.images"]["pinned_images"]["sandbox"] == images.PAUSE_IMAGE
    assert doc["plugins"]["io.containerd.grpc.v1.cri"]["stream_server_address"] == "127.0.0.1"
    assert doc["metrics"]["address"] == "127.0.0.1:4321"
    assert "io.containerd.nri.v1.nri" in doc["disabled_plugins"]
    # enable_cdi and the ascend handler are the roles' job, not the base file's
    assert "enable_cdi" not in runtime and "ascend" not in runtime["containerd"]["runtimes"]


def test_kubelet_base_stays_on_loopback_and_private_paths(tmp_path: Path) -> None:
    paths = _paths(tmp_path)
    cfg = config.kubelet_base(paths, {"port": 1, "healthz": 2, "containerd": 3}, Path("/ca.crt"))
    assert cfg["address"] == "127.0.0.1" and cfg["healthzBindAddress"] == "127.0.0.1" and cfg["readOnlyPort"] == 0
    assert cfg["authentication"]["anonymous"]["enabled"] is False
    assert cfg["failCgroupV1"] is False and cfg["failSwapOn"] is False and cfg["cgroupDriver"] == "cgroupfs"
    assert cfg["makeIPTablesUtilChains"] is False
    assert cfg["containerRuntimeEndpoint"] == f"unix://{paths.containerd_socket}"
    assert cfg["podLogsDir"].startswith(str(paths.root))
    assert cfg["featureGates"] == {}  # the kubelet_feature_gates role sets them


def test_cni_bridge_has_no_gateway_and_no_masquerade(tmp_path: Path) -> None:
    plugin = config.cni_conflist(_paths(tmp_path))["plugins"][0]
    assert plugin["type"] == "bridge" and plugin["isGateway"] is False and plugin["ipMasq"] is False
    assert len(plugin["bridge"]) <= 15
    assert plugin["ipam"]["dataDir"].startswith(str(tmp_path))


def test_role_vars_point_only_at_private_files(tmp_path: Path) -> None:
    paths = _paths(tmp_path)
    values = config.role_vars(paths, tmp_path / "cdi", Path("/x/runc"))
    keys = ("containerd_cdi_config_path", "kubelet_feature_gates_config_path", "kubelet_feature_gates_manifests_dir")
    for key in keys:
        assert values[key].startswith(str(tmp_path)), key
    assert values["containerd_cdi_spec_dirs"] == [str(tmp_path / "cdi")]
    assert values["containerd_cdi_manage_service"] is False and values["kubelet_feature_gates_manage_service"] is False
    assert values["ascend_runtime_binary"] == "/x/runc"


def test_kubelet_root_moves_when_plugin_sockets_would_be_too_long(tmp_path: Path) -> None:
    short = NodePaths("c", "n1", Path("/r/n1"))
    assert short.kubelet_root == Path("/r/n1/k")
    deep = NodePaths("c", "n1", Path("/" + "d" * 80) / "n1")
    assert not deep.kubelet_root.is_relative_to(deep.root)
    for paths in (short, deep):
        assert len(str(paths.plugins_registry / ("x" * 22 + "-reg.sock"))) <= SOCKET_BUDGET


def test_holder_and_node_processes_enter_one_namespace(tmp_path: Path) -> None:
    paths = _paths(tmp_path)
    holder = components.holder_spec(paths)
    assert holder.argv[:4] == ["unshare", "--mount", "--propagation", "private"]
    ctrd = components.containerd_spec(paths, 42, Path("/b/containerd"), 9)
    kubelet = components.kubelet_spec(paths, 42, Path("/b/kubelet"), 8)
    for spec in (ctrd, kubelet):
        assert spec.argv[:3] == ["nsenter", "--mount=/proc/42/ns/mnt", "--"]
        assert spec.env["PATH"].split(":")[0] == "/b"
    assert "--cloud-provider=external" in kubelet.argv
    assert f"--root-dir={paths.kubelet_root}" in kubelet.argv


def test_aliases_name_the_real_node_components() -> None:
    state = {"realNode": "n1"}
    assert integration.resolve_alias(state, "kubelet") == "kubelet/n1"
    assert integration.resolve_alias(state, "containerd") == "containerd/n1"
    assert integration.resolve_alias(state, "scheduler") == "scheduler"
    assert integration.resolve_alias({}, "kubelet") == "kubelet"


def test_rbac_binds_system_node_to_the_nodes_group() -> None:
    binding = lifecycle.rbac_binding()
    assert binding["roleRef"]["name"] == "system:node"
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:nodes"}]


def test_node_binaries_are_known() -> None:
    assert {
        "kubelet",
        "containerd",
        "ctr",
        "containerd-shim-runc-v2",
        "runc",
        "bridge",
        "host-local",
        "loopback",
    } <= set(build.NODE_BINARIES)
    assert build.binary_path("bridge").parent == build.cni_bin_dir()


PREPARE = "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources"


def test_tap_decodes_a_prepare_with_cdi_ids_and_unknown_fields() -> None:
    request = pb.NodePrepareResourcesRequest(claims=[pb.Claim(namespace="ns", uid="u1", name="c1")]).SerializeToString()
    request += b"\xa0\x06\x01"  # field 100, varint: a field this schema does not know
    response = pb.NodePrepareResourcesResponse(
        claims={"u1": pb.NodePrepareResourceResponse(devices=[pb.Device(cdi_device_ids=["k/npu=u1"])])}
    ).SerializeToString()
    fields = tap.decode(PREPARE, request, response)
    assert fields["call"] == "NodePrepareResources"
    assert fields["claims"] == [{"namespace": "ns", "name": "c1", "uid": "u1"}]
    assert fields["cdiDeviceIDs"] == ["k/npu=u1"]
    assert fields["unknownFields"] == {"request": 1}
    assert "error" not in fields


def test_tap_reports_per_claim_errors() -> None:
    request = pb.NodePrepareResourcesRequest(claims=[pb.Claim(namespace="ns", uid="u1", name="c1")]).SerializeToString()
    response = pb.NodePrepareResourcesResponse(
        claims={"u1": pb.NodePrepareResourceResponse(error="no such device")}
    ).SerializeToString()
    assert tap.decode(PREPARE, request, response)["error"] == "u1: no such device"


@pytest.mark.parametrize("method", ["/grpc.health.v1.Health/Check", "/other.Service/Call"])
def test_tap_leaves_other_methods_undecoded(method: str) -> None:
    fields = tap.decode(method, b"\x00", b"")
    assert fields["claims"] == [] and "request" not in fields


REGISTERED = {
    "metadata": {
        "resourceVersion": "7",
        "labels": {
            "kubernetes.io/hostname": "aio-node74-arm",
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
        },
        "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
    },
    "spec": {
        "taints": [
            {"key": lifecycle.UNINITIALIZED_TAINT, "value": "true", "effect": "NoSchedule"},
            {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
        ]
    },
}


def test_node_patch_without_inventory_labels_never_nulls_the_kubelets_labels() -> None:
    patch = lifecycle.node_patch(REGISTERED, {})
    assert patch == {"spec": {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]}}
    assert "metadata" not in patch  # no "labels": null, which deleted kubernetes.io/hostname


def test_node_patch_adds_only_the_labels_that_differ() -> None:
    patch = lifecycle.node_patch(REGISTERED, {"kubernetes.io/hostname": "aio-node74-arm", "accelerator": "310p"})
    assert patch is not None
    assert patch["metadata"] == {"labels": {"accelerator": "310p"}}


def test_node_patch_sends_an_empty_taint_list_not_null_and_nothing_when_done() -> None:
    only_uninitialized = {"metadata": {}, "spec": {"taints": [{"key": lifecycle.UNINITIALIZED_TAINT}]}}
    assert lifecycle.node_patch(only_uninitialized, {}) == {"spec": {"taints": []}}
    assert lifecycle.node_patch({"metadata": {"labels": {"a": "b"}}, "spec": {}}, {"a": "b"}) is None


def test_role_vars_name_the_version_the_role_chooses_gates_for(tmp_path: Path) -> None:
    values = config.role_vars(_paths(tmp_path), tmp_path / "cdi", Path("/x/runc"), version="v1.37.2")
    assert values["kubelet_feature_gates_kubernetes_version"] == "v1.37.2"
    assert "kubelet_feature_gates_kubelet" not in values  # the role's generated table decides
