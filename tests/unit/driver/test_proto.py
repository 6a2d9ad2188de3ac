"""The generated messages against the field numbers of the kubelet's protocols (FACTS §2)."""

from __future__ import annotations

import pytest
from google.protobuf import descriptor_pool

from dralab.driver.proto import dra_v1_pb2, dra_v1beta1_pb2, pluginregistration_pb2

V1_FIELDS = {
    "NodePrepareResourcesRequest": {"claims": 1},
    "Claim": {"namespace": 1, "uid": 2, "name": 3},
    "NodePrepareResourcesResponse": {"claims": 1},
    "NodePrepareResourceResponse": {"devices": 1, "error": 2},
    "Device": {"request_names": 1, "pool_name": 2, "device_name": 3, "cdi_device_ids": 4, "share_id": 5},
    "NodeUnprepareResourcesRequest": {"claims": 1},
    "NodeUnprepareResourcesResponse": {"claims": 1},
    "NodeUnprepareResourceResponse": {"error": 1},
}


def _fields(module, message: str) -> dict[str, int]:
    return {f.name: f.number for f in module.DESCRIPTOR.message_types_by_name[message].fields}


@pytest.mark.parametrize("message", sorted(V1_FIELDS))
def test_v1_field_numbers(message: str) -> None:
    assert _fields(dra_v1_pb2, message) == V1_FIELDS[message]


@pytest.mark.parametrize("message", sorted(V1_FIELDS))
def test_v1beta1_is_v1_without_share_id(message: str) -> None:
    expected = {k: v for k, v in V1_FIELDS[message].items() if k != "share_id"}
    assert _fields(dra_v1beta1_pb2, message) == expected


def test_registration_field_numbers() -> None:
    assert _fields(pluginregistration_pb2, "PluginInfo") == {
        "type": 1,
        "name": 2,
        "endpoint": 3,
        "supported_versions": 4,
    }
    assert _fields(pluginregistration_pb2, "RegistrationStatus") == {"plugin_registered": 1, "error": 2}


def test_packages_and_service_paths() -> None:
    assert dra_v1_pb2.DESCRIPTOR.package == "k8s.io.kubelet.pkg.apis.dra.v1"
    assert dra_v1beta1_pb2.DESCRIPTOR.package == "k8s.io.kubelet.pkg.apis.dra.v1beta1"
    assert pluginregistration_pb2.DESCRIPTOR.package == "pluginregistration"
    svc = dra_v1_pb2.DESCRIPTOR.services_by_name["DRAPlugin"]
    assert svc.full_name == "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin"
    assert [m.name for m in svc.methods] == ["NodePrepareResources", "NodeUnprepareResources"]
    assert (
        pluginregistration_pb2.DESCRIPTOR.services_by_name["Registration"].full_name
        == "pluginregistration.Registration"
    )


def test_distinct_files_in_the_descriptor_pool() -> None:
    pool = descriptor_pool.Default()
    names = {m.DESCRIPTOR.name for m in (dra_v1_pb2, dra_v1beta1_pb2, pluginregistration_pb2)}
    assert len(names) == 3
    for name in names:
        assert pool.FindFileByName(name).name == name


def test_wire_round_trip_by_field_number() -> None:
    resp = dra_v1_pb2.NodePrepareResourcesResponse()
    dev = resp.claims["uid-1"].devices.add(
        request_names=["npu"], pool_name="p", device_name="npu-0-0", cdi_device_ids=["k/c=uid-1"], share_id="s"
    )
    wire = resp.SerializeToString()
    again = dra_v1_pb2.NodePrepareResourcesResponse.FromString(wire)
    assert again == resp
    assert again.claims["uid-1"].devices[0].share_id == "s"
    # a v1beta1 reader sees the same devices and skips field 5
    beta = dra_v1beta1_pb2.NodePrepareResourcesResponse.FromString(wire)
    assert beta.claims["uid-1"].devices[0].device_name == dev.device_name
    # Device field 5 encodes as tag (5 << 3 | 2) = 0x2a
    assert b"\x2a\x01s" in dev.SerializeToString()
    # unset optional share_id is absent from the wire
    plain = dra_v1_pb2.Device(device_name="x")
    assert not plain.HasField("share_id")
    assert b"\x2a" not in plain.SerializeToString()


def test_committed_modules_match_the_protos(tmp_path) -> None:
    pytest.importorskip("grpc_tools")
    from dralab.driver.proto.generate import HERE, generate

    for path in generate(tmp_path):
        committed = HERE / path.name
        assert path.read_text() == committed.read_text(), (
            f"{committed.name} is stale: run python -m dralab.driver.proto.generate"
        )
