"""The device inventory: the default is Lab 20's host, and bad files get clear errors."""

from __future__ import annotations

import pytest

from dralab.errors import UserError
from dralab.model.inventory import load_inventory, parse_inventory


def test_default_inventory_is_lab20_host() -> None:
    inv = load_inventory()
    node = inv.node("aio-node74-arm")
    assert [d.name for d in node.devices] == ["npu-0-0", "npu-1-0"]
    first, second = node.devices
    assert first.uuid == "68496E64-20E05477-92C31323-6E78030A-BD003019"
    assert second.uuid == "D8496E64-20C101B1-C0D42F23-AED8030A-40003039"
    assert first.memory == "21525Mi" and first.cores == 100
    assert (first.physical_id, second.physical_id) == (0, 2)


def test_device_names_follow_the_vendor_pattern() -> None:
    inv = parse_inventory(
        {
            "nodes": [
                {
                    "name": "n1",
                    "devices": [
                        {"vendor": "ascend", "uuid": "u0", "memory": "1Gi", "index": 3},
                        {"vendor": "nvidia", "uuid": "u1", "memory": "1Gi", "index": 0},
                    ],
                }
            ]
        }
    )
    assert [d.name for d in inv.node("n1").devices] == ["npu-3-0", "gpu-0"]


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({}, "non-empty 'nodes'"),
        ({"nodes": [{"devices": []}]}, "needs a 'name'"),
        ({"nodes": [{"name": "n", "devices": [{"uuid": "u", "memory": "1Gi"}]}]}, "'vendor' is required"),
        ({"nodes": [{"name": "n", "devices": [{"vendor": "ascend", "memory": "1Gi"}]}]}, "'uuid' is required"),
        (
            {"nodes": [{"name": "n", "devices": [{"vendor": "ascend", "uuid": "u", "memory": "lots"}]}]},
            "not a valid quantity",
        ),
    ],
)
def test_bad_inventories_say_what_is_wrong(doc: dict, message: str) -> None:
    with pytest.raises(UserError, match=message):
        parse_inventory(doc)


def test_unknown_node_lists_known_ones() -> None:
    with pytest.raises(UserError, match="aio-node74-arm"):
        load_inventory().node("other")
