"""Reading what a container would get from a claim: CDI specs resolved by the kubelet's device ids."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cdi import claim_view, read_records


def _node(tmp_path: Path) -> Path:
    cdi = tmp_path / "cdi"
    cdi.mkdir()
    (cdi / "k8s.x-npu_u1.yaml").write_text(
        json.dumps(
            {
                "cdiVersion": "0.6.0",
                "kind": "k8s.x/npu",
                "containerEdits": {"env": ["SHARED=1"]},
                "devices": [
                    {
                        "name": "u1",
                        "containerEdits": {
                            "env": ["NPU_MEM_QUOTA=8192", "A=b=c"],
                            "deviceNodes": [{"path": "/dev/davinci0"}],
                            "mounts": [{"hostPath": "/h", "containerPath": "/c"}],
                        },
                    }
                ],
            }
        )
    )
    (cdi / "k8s.x-npu_common.yaml").write_text(
        json.dumps(
            {
                "cdiVersion": "0.6.0",
                "kind": "k8s.x/npu",
                "devices": [{"name": "common", "containerEdits": {"deviceNodes": [{"path": "/dev/davinci_manager"}]}}],
            }
        )
    )
    (cdi / "junk.yaml").write_text("{not yaml")
    (cdi / "notes.txt").write_text("ignored")
    return tmp_path  # fmt: skip


def _records(node: Path, *records: dict) -> None:
    (node / "kubelet-records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records) + '{"torn": ')


def test_env_and_devices_follow_the_ids_the_kubelet_got(tmp_path: Path) -> None:
    node = _node(tmp_path)
    _records(node, {"call": "NodePrepareResources", "time": "1", "claims": [{"uid": "u1"}],
                    "cdiDeviceIDs": ["k8s.x/npu=u1", "k8s.x/npu=common"], "error": None})  # fmt: skip
    view = claim_view(node, "u1")
    assert view["exists"] and view["files"] == ["k8s.x-npu_u1.yaml"]
    assert view["specFiles"] == ["k8s.x-npu_common.yaml", "k8s.x-npu_u1.yaml"]
    assert view["env"] == {"SHARED": "1", "NPU_MEM_QUOTA": "8192", "A": "b=c"}
    assert view["deviceNodes"] == ["/dev/davinci0", "/dev/davinci_manager"]
    assert view["mounts"] == [{"hostPath": "/h", "containerPath": "/c"}]
    assert view["prepared"] and not view["unprepared"] and view["unresolved"] == []


def test_without_records_the_claims_own_device_is_used(tmp_path: Path) -> None:
    view = claim_view(_node(tmp_path), "u1")
    assert view["cdiDeviceIDs"] == ["k8s.x/npu=u1"] and not view["prepared"]
    assert view["env"]["NPU_MEM_QUOTA"] == "8192"


def test_unprepared_and_missing_claims(tmp_path: Path) -> None:
    node = _node(tmp_path)
    _records(node,
             {"call": "NodePrepareResources", "time": "1", "claims": [{"uid": "gone"}],
              "cdiDeviceIDs": ["k8s.x/npu=gone"]},
             {"call": "NodeUnprepareResources", "time": "2", "claims": [{"uid": "gone"}]})  # fmt: skip
    view = claim_view(node, "gone")
    assert not view["exists"] and view["unprepared"] and view["unresolved"] == ["k8s.x/npu=gone"]
    assert len(read_records(node / "kubelet-records.jsonl")) == 2



def test_without_call_records_the_checkpoint_says_prepared_and_then_unprepared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import harness.cdi as cdi

    node = _node(tmp_path)
    (node / "driver-state" / "x.driver").mkdir(parents=True)
    (node / "driver-state" / "x.driver" / "checkpoint.json").write_text("{}")
    held = {"u1"}
    record = {"call": "NodePrepareResources", "claims": [{"uid": "u1"}], "cdiDeviceIDs": ["k8s.x/npu=u1"], "time": ""}
    monkeypatch.setattr(cdi, "checkpoint_records", lambda _node, uid: [record] if uid in held else [])
    view = claim_view(node, "u1")
    assert view["prepared"] and not view["unprepared"]
    # NodeUnprepareResources takes the claim out of the checkpoint and its spec off the node
    held.clear()
    assert not claim_view(node, "u1")["unprepared"]  # out of the checkpoint, but its spec is still there
    (node / "cdi" / "k8s.x-npu_u1.yaml").unlink()
    gone = claim_view(node, "u1")
    assert gone["unprepared"] and not gone["prepared"] and not gone["exists"]


def test_without_a_driver_checkpoint_nothing_is_claimed_unprepared(tmp_path: Path) -> None:
    view = claim_view(tmp_path, "never")
    assert not view["unprepared"] and not view["prepared"]


def test_a_drivers_first_checkpoint_in_the_second_slot_is_read(tmp_path: Path) -> None:
    """A fresh driver's first write goes to checkpoint.1.json; checkpoint.json comes with the second."""
    from dralab.driver.cdi import ClaimRef, PreparedDevice
    from dralab.driver.checkpoint import PREPARE_COMPLETED, Checkpoint, ClaimEntry, encode

    node = _node(tmp_path)
    folder = node / "driver-state" / "x.driver"
    folder.mkdir(parents=True)
    device = PreparedDevice(("r",), "pool", "npu-0", ("k8s.x/npu=u1",))
    entry = ClaimEntry(claim=ClaimRef("ns", "c", "u1"), state=PREPARE_COMPLETED, devices=(device,))
    (folder / "checkpoint.1.json").write_bytes(encode(Checkpoint("x.driver", claims={"u1": entry}, sequence=1)))
    assert not (folder / "checkpoint.json").exists()
    assert claim_view(node, "u1")["prepared"]
