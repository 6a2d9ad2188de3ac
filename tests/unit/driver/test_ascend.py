"""npu-smi parsing against recorded outputs of Lab 20's host."""

from __future__ import annotations

from pathlib import Path

import pytest

from dralab.driver.devices import BackendOptions, Device
from dralab.driver.devices.ascend import (
    AscendBackend,
    NpuSmiError,
    chip_uuid,
    memory_mib,
    parse_device_share,
    parse_list,
    parse_mapping,
    parse_one,
    recorded_runner,
)
from dralab.driver.devices.fake import FakeBackend, from_inventory
from dralab.errors import UserError
from dralab.model.inventory import load_inventory
from dralab.model.vendors import load_vendor_table

FIXTURES = Path(__file__).parent / "fixtures" / "npu-smi"


def _backend(runner=None, **kw) -> AscendBackend:
    return AscendBackend(run=runner or recorded_runner(FIXTURES), vendor=load_vendor_table().get("ascend"), **kw)


def test_discovery_reproduces_the_lab20_inventory() -> None:
    found = _backend().enumerate()
    expected = [from_inventory(d) for d in load_inventory("lab20").node("aio-node74-arm").devices]
    assert found == expected


def test_list_and_mapping() -> None:
    assert parse_list((FIXTURES / "info_-l.txt").read_text()) == [(4, 1), (5, 1)]
    rows = parse_mapping((FIXTURES / "info_-m.txt").read_text())
    assert [(r.npu_id, r.chip_id, r.logic_id, r.phy_id, r.chip_name) for r in rows] == [
        (4, 0, 0, 0, "Ascend 310P3"),
        (5, 0, 1, 2, "Ascend 310P3"),
    ]


def test_mapping_without_phy_column_uses_logic_id_and_skips_mcu() -> None:
    text = (
        "\tNPU ID                         Chip ID                        Chip Logic ID                  Chip Name\n"
        "\t8                              0                              3                              Ascend 910B3\n"
        "\t8                              1                              -                              Mcu\n"
    )
    [row] = parse_mapping(text)
    assert (row.npu_id, row.logic_id, row.phy_id, row.chip_name) == (8, 3, 3, "Ascend 910B3")


def test_board_and_memory_fields() -> None:
    board = parse_one((FIXTURES / "info_-t_board_-i_4_-c_0.txt").read_text())
    assert chip_uuid(board["VDie ID"]) == "68496E64-20E05477-92C31323-6E78030A-BD003019"
    assert board["PCIe Bus Info"] == "0000:81:00.0"
    assert memory_mib(parse_one((FIXTURES / "info_-t_memory_-i_5_-c_0.txt").read_text())) == 21525
    assert memory_mib({"HBM Capacity(MB)": "65536", "DDR Capacity(MB)": "0"}) == 65536


def test_bad_outputs_are_clear_errors() -> None:
    with pytest.raises(NpuSmiError, match="no NPU"):
        parse_list("Total Count : 0\n")
    with pytest.raises(NpuSmiError, match="VDie"):
        chip_uuid("not hex at all")
    with pytest.raises(NpuSmiError, match="memory capacity"):
        memory_mib({"DDR Clock Speed(MHz)": "3200"})


def test_discovery_failure_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="npu-smi failed"):
        _backend(recorded_runner(tmp_path)).enumerate()


def test_missing_binary_is_a_user_error(tmp_path: Path) -> None:
    backend = AscendBackend.from_options(
        BackendOptions(node="n", state_dir=tmp_path, npu_smi=str(tmp_path / "no-npu-smi"))
    )
    with pytest.raises(UserError, match="not found"):
        backend.enumerate()


def test_device_share_status_as_lab20_prints_it() -> None:
    text = (FIXTURES / "info_-t_device-share.txt").read_text()
    assert parse_device_share(text) == {4: True, 5: True}
    assert parse_device_share(text.replace("True", "False", 1)) == {4: False, 5: True}


def test_device_share_off_is_enabled_only_when_asked() -> None:
    calls: list[tuple[tuple[str, ...], str | None]] = []
    base = recorded_runner(FIXTURES)

    def runner(args, stdin=None):
        calls.append((tuple(args), stdin))
        if args == ["info", "-t", "device-share"]:
            return base(args).replace("True", "False", 1)  # NPU 4 off, NPU 5 on
        if args[0] == "set":
            return "Status : OK\n"
        return base(args, stdin)

    _backend(runner).enumerate()
    assert not [c for c in calls if c[0][0] == "set"]
    calls.clear()
    _backend(runner, enable_share=True).enumerate()
    assert [c for c in calls if c[0][0] == "set"] == [(("set", "-t", "device-share", "-i", "4", "-d", "1"), "Y\n")]


def test_pcie_root_from_sysfs(tmp_path: Path) -> None:
    real = tmp_path / "devices" / "pci0000:80" / "0000:80:01.0" / "0000:81:00.0"
    real.mkdir(parents=True)
    link_dir = tmp_path / "bus" / "pci" / "devices"
    link_dir.mkdir(parents=True)
    (link_dir / "0000:81:00.0").symlink_to(real)
    [first, second] = _backend(sysfs=str(tmp_path)).enumerate()
    assert first.attributes == {"resource.kubernetes.io/pcieRoot": "pci0000:80"}
    assert second.attributes == {}


def test_device_nodes_only_where_they_exist(tmp_path: Path) -> None:
    backend = _backend()
    dev: Device = backend.enumerate()[0]
    edits = backend.edits([dev])
    assert all(Path(n.host_path).exists() for n in edits.device_nodes)
    assert _backend(inject_device_nodes=False).edits([dev]).device_nodes == ()


def test_fake_and_ascend_backends_publish_the_same_slice(tmp_path: Path) -> None:
    fake = FakeBackend.from_options(BackendOptions(node="aio-node74-arm", state_dir=tmp_path, dry_run=True))
    assert fake.enumerate() == _backend().enumerate()
