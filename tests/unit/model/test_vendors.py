"""The vendor table: shipped data, overrides, enabled subsets and the questions components ask."""

from __future__ import annotations

import pytest

from dralab.errors import UserError
from dralab.model.objects import device_classes
from dralab.model.vendors import load_vendor_table


def test_every_ascend_chip_has_its_resource_names_and_product() -> None:
    table = load_vendor_table()
    sets = {rs.count: rs for rs in table.get("ascend").resource_sets()}
    assert len(sets) == 7
    rs = sets["huawei.com/Ascend310P"]
    assert rs.memory == "huawei.com/Ascend310P-memory"
    assert rs.cores == "huawei.com/Ascend310P-core"
    assert rs.claim_suffix == "ascend310p"
    assert rs.product_name == "310P3"
    assert rs.use_uuid == "hami.io/use-Ascend310P-uuid"
    assert sets["huawei.com/Ascend910C"].product_name == "Ascend910"


def test_class_selector_matches_lab20() -> None:
    ascend = load_vendor_table().get("ascend")
    assert ascend.class_selector() == (
        'device.driver == "ascend.project-hami.io" && '
        'device.attributes["ascend.project-hami.io"].type == "HAMivNPUCore"'
    )


def test_new_vendor_is_a_table_entry() -> None:
    table = load_vendor_table(
        {
            "metax": {
                "driver": "gpu.metax-tech.com",
                "deviceClass": "gpu.metax-tech.com",
                "typeAttribute": "sgpu",
                "requestName": "gpu",
                "claimSuffix": "metax",
                "resources": {
                    "count": "metax-tech.com/sgpu",
                    "memory": "metax-tech.com/vmemory",
                    "cores": "metax-tech.com/vcore",
                },
                "annotations": {
                    "useUUID": "metax-tech.com/use-gpuuuid",
                    "noUseUUID": "metax-tech.com/nouse-gpuuuid",
                    "useType": "metax-tech.com/use-gputype",
                    "noUseType": "metax-tech.com/nouse-gputype",
                },
            }
        }
    )
    (rs,) = table.get("metax").resource_sets()
    assert rs.count == "metax-tech.com/sgpu"
    assert table.by_driver("gpu.metax-tech.com").key == "metax"


def test_unknown_enabled_vendor_is_a_clear_error() -> None:
    with pytest.raises(UserError, match="not in the vendor table"):
        load_vendor_table(enabled=["ascend", "cambricon"])


def test_device_classes_one_per_enabled_vendor() -> None:
    classes = device_classes(load_vendor_table(enabled=["ascend"]))
    assert [c["metadata"]["name"] for c in classes] == ["hami-vnpu-core.project-hami.io"]
