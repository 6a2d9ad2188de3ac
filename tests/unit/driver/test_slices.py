"""ResourceSlice building against Lab 20 Step 3."""

from __future__ import annotations

from pathlib import Path

from dralab.driver.devices import BackendOptions
from dralab.driver.devices.fake import FakeBackend
from dralab.driver.slices import build_slices, comparable
from dralab.model.vendors import load_vendor_table

NODE = "aio-node74-arm"


def _lab20_slices(tmp_path: Path, **kw):
    table = load_vendor_table()
    devices = FakeBackend.from_options(BackendOptions(node=NODE, state_dir=tmp_path, dry_run=True)).enumerate()
    return build_slices(table.get("ascend"), NODE, devices, **kw)


def test_lab20_slice(tmp_path: Path) -> None:
    [slc] = _lab20_slices(tmp_path, node_uid="node-uid-1")
    assert slc["apiVersion"] == "resource.k8s.io/v1"
    assert slc["metadata"]["generateName"] == "aio-node74-arm-ascend.project-hami.io-"
    assert slc["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": "node-uid-1", "controller": True}
    ]
    spec = slc["spec"]
    assert spec["driver"] == "ascend.project-hami.io"
    assert spec["nodeName"] == NODE
    assert spec["pool"] == {"name": NODE, "generation": 1, "resourceSliceCount": 1}
    first, second = spec["devices"]
    assert first["name"] == "npu-0-0" and second["name"] == "npu-1-0"
    assert first["allowMultipleAllocations"] is True
    assert first["attributes"] == {
        "brand": {"string": "Huawei"},
        "index": {"int": 0},
        "model": {"string": "310P3"},
        "physicalID": {"int": 0},
        "productName": {"string": "310P3"},
        "type": {"string": "HAMivNPUCore"},
        "uuid": {"string": "68496E64-20E05477-92C31323-6E78030A-BD003019"},
    }
    assert first["capacity"] == {
        "cores": {
            "value": "100",
            "requestPolicy": {"default": "100", "validRange": {"min": "0", "max": "100", "step": "1"}},
        },
        "memory": {
            "value": "21525Mi",
            "requestPolicy": {"default": "21525Mi", "validRange": {"min": "1Mi", "max": "21525Mi", "step": "1Mi"}},
        },
    }
    assert second["attributes"]["physicalID"] == {"int": 2}
    assert second["attributes"]["index"] == {"int": 1}
    assert second["attributes"]["uuid"] == {"string": "D8496E64-20C101B1-C0D42F23-AED8030A-40003039"}
    # the inventory's descriptive extras are not published
    assert "npuID" not in first["attributes"] and "pcieBusID" not in first["attributes"]


def test_large_pools_are_split_and_counted(tmp_path: Path) -> None:
    table = load_vendor_table()
    [dev] = FakeBackend.from_options(BackendOptions(node=NODE, state_dir=tmp_path, dry_run=True)).enumerate()[:1]
    from dataclasses import replace

    many = [replace(dev, name=f"npu-{i}-0", index=i) for i in range(130)]
    slices = build_slices(table.get("ascend"), NODE, many, generation=4, max_per_slice=128)
    assert [len(s["spec"]["devices"]) for s in slices] == [128, 2]
    assert {s["spec"]["pool"]["resourceSliceCount"] for s in slices} == {2}
    assert {s["spec"]["pool"]["generation"] for s in slices} == {4}


def test_no_devices_still_publishes_an_empty_pool(tmp_path: Path) -> None:
    [slc] = build_slices(load_vendor_table().get("ascend"), NODE, [])
    assert slc["spec"]["devices"] == []


def test_comparable_ignores_generation_only(tmp_path: Path) -> None:
    a = _lab20_slices(tmp_path, generation=1)[0]["spec"]
    b = _lab20_slices(tmp_path, generation=7)[0]["spec"]
    assert a != b and comparable(a) == comparable(b)
