"""Faults the existing drivers do not survive: killed mid-prepare, corrupt checkpoint, wiped CDI dir,
replaced claims, other drivers' results, concurrent calls."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import yaml

from dralab.driver.cdi import ClaimRef, env_of
from dralab.driver.checkpoint import PREPARE_COMPLETED, PREPARE_STARTED, ClaimEntry, encode
from dralab.driver.claims import InMemoryClaimSource, allocated_claim
from dralab_kit.fixtures.driver_claims import CLAIM_A, CLAIM_A_UID, NAMESPACE, NODE, lab20_claim

REF_A = ClaimRef(NAMESPACE, CLAIM_A, CLAIM_A_UID)
SPEC_NAME = f"k8s.ascend.project-hami.io-npu_{CLAIM_A_UID}.yaml"


def _checkpoint(tmp_path: Path) -> Path:
    return tmp_path / "state" / "ascend.project-hami.io" / "checkpoint.json"


def _slots(tmp_path: Path) -> list[Path]:
    """Both checkpoint slot files (write n goes to slot n % 2)."""
    first = _checkpoint(tmp_path)
    return [first, first.with_name("checkpoint.1.json")]


def _newest(tmp_path: Path) -> Path:
    """The slot file holding the newest checkpoint."""
    slots = [p for p in _slots(tmp_path) if p.exists()]
    return max(slots, key=lambda p: json.loads(p.read_text()).get("sequence", 0))


def _on_disk(tmp_path: Path) -> dict:
    return json.loads(_newest(tmp_path).read_text())


def test_killed_during_prepare_is_redone_after_restart(tmp_path: Path, make_state, claims) -> None:
    state = make_state(tmp_path, claims)
    # What a kill between the two checkpoint writes leaves: a PrepareStarted entry and maybe a spec.
    state.checkpoint.claims[CLAIM_A_UID] = ClaimEntry(claim=REF_A, state=PREPARE_STARTED, boot_id="boot-1")
    state.store.save(state.checkpoint)
    (tmp_path / "cdi" / SPEC_NAME).write_text("half written")
    restarted = make_state(tmp_path, claims)
    assert restarted.prepared_claims()[CLAIM_A_UID].state == PREPARE_STARTED
    result = restarted.prepare([REF_A])[CLAIM_A_UID]
    assert result.error == ""
    assert restarted.prepared_claims()[CLAIM_A_UID].state == PREPARE_COMPLETED
    assert env_of(yaml.safe_load((tmp_path / "cdi" / SPEC_NAME).read_text()))["NPU_MEM_QUOTA"] == "8192"


def test_killed_during_prepare_then_unprepared(tmp_path: Path, make_state, claims) -> None:
    state = make_state(tmp_path, claims)
    state.checkpoint.claims[CLAIM_A_UID] = ClaimEntry(claim=REF_A, state=PREPARE_STARTED, boot_id="boot-1")
    state.store.save(state.checkpoint)
    (tmp_path / "cdi" / SPEC_NAME).write_text("half written")
    restarted = make_state(tmp_path, claims)
    assert restarted.unprepare([REF_A]) == {CLAIM_A_UID: ""}
    assert not (tmp_path / "cdi" / SPEC_NAME).exists()
    assert restarted.prepared_claims() == {}


def test_corrupt_checkpoint_is_quarantined_and_rebuilt_from_cdi(tmp_path: Path, make_state, claims) -> None:
    state = make_state(tmp_path, claims)
    first = state.prepare([REF_A])[CLAIM_A_UID]
    for slot in _slots(tmp_path):
        slot.write_text('{"version": 1, "claims": {tru')  # torn / garbage
    restarted = make_state(tmp_path, claims)
    quarantined = list(_checkpoint(tmp_path).parent.glob("checkpoint*.corrupt-*"))
    assert len(quarantined) == 2
    assert all(q.read_text().startswith('{"version": 1') for q in quarantined)
    entry = restarted.prepared_claims()[CLAIM_A_UID]
    assert entry.state == PREPARE_COMPLETED
    assert entry.claim == REF_A
    assert entry.devices == first.devices
    assert "dralab_driver_checkpoint_quarantined_total" in restarted.metrics.render().decode()
    # and it unprepares from the rebuilt state without the API
    claims.remove(NAMESPACE, CLAIM_A)
    assert restarted.unprepare([REF_A]) == {CLAIM_A_UID: ""}
    assert not (tmp_path / "cdi" / SPEC_NAME).exists()


def test_checksum_mismatch_is_corruption(tmp_path: Path, make_state, claims) -> None:
    state = make_state(tmp_path, claims)
    state.prepare([REF_A])
    newest = _newest(tmp_path)
    data = json.loads(newest.read_text())
    data["claims"][CLAIM_A_UID]["namespace"] = "tampered"
    newest.write_text(json.dumps(data))
    restarted = make_state(tmp_path, claims)
    assert restarted.prepared_claims()[CLAIM_A_UID].claim.namespace == NAMESPACE  # from the CDI spec
    assert restarted.store.quarantined


def test_corrupt_checkpoint_and_no_specs_starts_empty(tmp_path: Path, make_state, claims) -> None:
    _checkpoint(tmp_path).parent.mkdir(parents=True)
    _checkpoint(tmp_path).write_bytes(b"\x00\xff\x00")
    state = make_state(tmp_path, claims)
    assert state.prepared_claims() == {}
    assert state.unprepare([REF_A]) == {CLAIM_A_UID: ""}


def test_cdi_dir_wiped_by_reboot_is_rewritten_on_prepare(tmp_path: Path, make_state, claims) -> None:
    state = make_state(tmp_path, claims)
    first = state.prepare([REF_A])[CLAIM_A_UID]
    for path in (tmp_path / "cdi").iterdir():
        path.unlink()
    rebooted = make_state(tmp_path, claims, boot_id="boot-2")
    assert rebooted.prepared_claims()[CLAIM_A_UID].state == PREPARE_COMPLETED
    again = rebooted.prepare([REF_A])[CLAIM_A_UID]
    assert again.devices == first.devices
    assert env_of(yaml.safe_load((tmp_path / "cdi" / SPEC_NAME).read_text()))["NPU_PRIORITY"] == "50"
    assert (tmp_path / "cdi" / "k8s.ascend.project-hami.io-npu_common.yaml").exists()
    assert _on_disk(tmp_path)["bootID"] == "boot-2"


def test_replaced_claim_with_new_uid_is_refused(tmp_path: Path, make_state) -> None:
    claims = InMemoryClaimSource([lab20_claim(uid="new-uid")])
    state = make_state(tmp_path, claims)
    result = state.prepare([REF_A])[CLAIM_A_UID]
    assert "has uid new-uid" in result.error and "replaced" in result.error
    assert not (tmp_path / "cdi" / SPEC_NAME).exists()
    assert state.prepared_claims() == {}


def test_unallocated_claim_is_refused(tmp_path: Path, make_state) -> None:
    claim = lab20_claim()
    del claim["status"]
    state = make_state(tmp_path, InMemoryClaimSource([claim]))
    assert "not allocated" in state.prepare([REF_A])[CLAIM_A_UID].error


def test_only_this_drivers_results_are_taken(tmp_path: Path, make_state) -> None:
    results = [
        {"request": "gpu", "driver": "gpu.example.com", "pool": NODE, "device": "gpu-0"},
        {
            "request": "npu",
            "driver": "ascend.project-hami.io",
            "pool": NODE,
            "device": "npu-1-0",
            "shareID": "s-1",
            "consumedCapacity": {"memory": "2Gi", "cores": "10"},
        },
    ]
    state = make_state(tmp_path, InMemoryClaimSource([allocated_claim(NAMESPACE, CLAIM_A, CLAIM_A_UID, results)]))
    result = state.prepare([REF_A])[CLAIM_A_UID]
    assert result.error == ""
    assert [d.device_name for d in result.devices] == ["npu-1-0"]
    env = env_of(yaml.safe_load((tmp_path / "cdi" / SPEC_NAME).read_text()))
    assert (env["ASCEND_VISIBLE_DEVICES"], env["NPU_MEM_QUOTA"], env["NPU_PRIORITY"]) == ("2", "2048", "10")


def test_result_for_another_nodes_pool_is_refused(tmp_path: Path, make_state) -> None:
    claim = lab20_claim(node="other-node")
    state = make_state(tmp_path, InMemoryClaimSource([claim]))
    assert "not this node's pool" in state.prepare([REF_A])[CLAIM_A_UID].error


def test_unknown_device_is_refused(tmp_path: Path, make_state) -> None:
    state = make_state(tmp_path, InMemoryClaimSource([lab20_claim(device="npu-9-0")]))
    assert "not a device of node" in state.prepare([REF_A])[CLAIM_A_UID].error


def test_bad_consumed_capacity_is_a_claim_error(tmp_path: Path, make_state) -> None:
    state = make_state(tmp_path, InMemoryClaimSource([lab20_claim(memory="lots")]))
    assert "not a valid quantity" in state.prepare([REF_A])[CLAIM_A_UID].error
    assert state.prepared_claims() == {}


def test_concurrent_calls_are_serialized(tmp_path: Path, make_state) -> None:
    claims = InMemoryClaimSource([lab20_claim(uid=f"uid-{i}", name=f"c-{i}") for i in range(24)])
    state = make_state(tmp_path, claims)
    errors: list[str] = []

    def work(i: int) -> None:
        ref = ClaimRef(NAMESPACE, f"c-{i}", f"uid-{i}")
        for _ in range(3):
            errors.extend(r.error for r in state.prepare([ref]).values() if r.error)
        if i % 2:
            state.unprepare([ref])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    remaining = set(state.prepared_claims())
    assert remaining == {f"uid-{i}" for i in range(0, 24, 2)}
    assert set(_on_disk(tmp_path)["claims"]) == remaining
    specs = {p.name for p in (tmp_path / "cdi").iterdir()} - {"k8s.ascend.project-hami.io-npu_common.yaml"}
    assert specs == {f"k8s.ascend.project-hami.io-npu_{u}.yaml" for u in remaining}


def test_reconcile_releases_claims_deleted_behind_the_kubelets_back(tmp_path: Path, make_state, claims) -> None:
    state = make_state(tmp_path, claims)
    state.prepare([REF_A])
    assert state.reconcile() == []
    claims.remove(NAMESPACE, CLAIM_A)
    assert state.reconcile() == [CLAIM_A_UID]
    assert not (tmp_path / "cdi" / SPEC_NAME).exists()


def test_checkpoint_written_by_another_driver_is_not_trusted(tmp_path: Path, make_state, claims) -> None:
    from dralab.driver.checkpoint import Checkpoint

    path = _checkpoint(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_bytes(encode(Checkpoint(driver="other.example.com")))
    state = make_state(tmp_path, claims)
    assert state.store.quarantined


def test_spec_emptied_by_a_crash_is_rewritten_on_repeat(tmp_path: Path, make_state, claims) -> None:
    state = make_state(tmp_path, claims)
    state.prepare([REF_A])
    (tmp_path / "cdi" / SPEC_NAME).write_text("")  # what an unflushed rename can leave after power loss
    restarted = make_state(tmp_path, claims)
    assert restarted.prepare([REF_A])[CLAIM_A_UID].error == ""
    assert env_of(yaml.safe_load((tmp_path / "cdi" / SPEC_NAME).read_text()))["NPU_MEM_QUOTA"] == "8192"


def test_files_of_a_prepare_that_never_answered_are_removed_at_start(tmp_path: Path, make_state, claims) -> None:
    state = make_state(tmp_path, claims)
    state.prepare([REF_A])
    # killed after writing claim B's spec and directory, before its checkpoint write
    (tmp_path / "cdi" / "k8s.ascend.project-hami.io-npu_uid-b.yaml").write_text("devices: []\n")
    (tmp_path / "state" / "ascend.project-hami.io" / "claims" / "uid-b").mkdir()
    (tmp_path / "cdi" / "k8s.other.example.com-x_uid-c.yaml").write_text("{}\n")  # not ours: left alone
    restarted = make_state(tmp_path, claims)
    assert not (tmp_path / "cdi" / "k8s.ascend.project-hami.io-npu_uid-b.yaml").exists()
    assert not (tmp_path / "state" / "ascend.project-hami.io" / "claims" / "uid-b").exists()
    assert (tmp_path / "cdi" / "k8s.other.example.com-x_uid-c.yaml").exists()
    assert (tmp_path / "cdi" / SPEC_NAME).exists()
    assert set(restarted.prepared_claims()) == {CLAIM_A_UID}


def test_deleted_checkpoint_is_rebuilt_from_specs(tmp_path: Path, make_state, claims) -> None:
    state = make_state(tmp_path, claims)
    state.prepare([REF_A])
    for slot in _slots(tmp_path):
        slot.unlink(missing_ok=True)
    restarted = make_state(tmp_path, claims)
    assert set(restarted.prepared_claims()) == {CLAIM_A_UID}
    assert any(slot.exists() for slot in _slots(tmp_path))


def test_write_failure_is_a_claim_error_not_a_crash(tmp_path: Path, make_state, claims, monkeypatch) -> None:
    import dralab.driver.state as state_mod

    state = make_state(tmp_path, claims)

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(state_mod, "atomic_write", full)
    result = state.prepare([REF_A])[CLAIM_A_UID]
    assert "No space left" in result.error
    assert state.prepared_claims() == {}


def test_write_n_goes_to_slot_n_mod_2_and_the_newest_wins(tmp_path: Path, make_state, claims) -> None:
    state = make_state(tmp_path, claims)
    refs = [ClaimRef(NAMESPACE, f"c{i}", f"uid-{i}") for i in range(3)]
    for ref in refs:
        claims.put(lab20_claim(uid=ref.uid, name=ref.name))
        assert state.prepare([ref])[ref.uid].error == ""
    seqs = [json.loads(p.read_text())["sequence"] for p in _slots(tmp_path)]
    assert seqs[0] % 2 == 0 and seqs[1] % 2 == 1 and abs(seqs[0] - seqs[1]) == 1
    restarted = make_state(tmp_path, claims)
    assert set(restarted.prepared_claims()) == {r.uid for r in refs}


def test_a_torn_newest_slot_falls_back_and_keeps_every_claim_with_a_spec(tmp_path: Path, make_state, claims) -> None:
    state = make_state(tmp_path, claims)
    state.prepare([REF_A])
    ref_b = ClaimRef(NAMESPACE, "b", "uid-b")
    claims.put(lab20_claim(uid="uid-b", name="b"))
    assert state.prepare([ref_b])["uid-b"].error == ""  # answered: must survive whatever happens next
    newest = _newest(tmp_path)
    newest.write_bytes(newest.read_bytes()[:100])  # what a crash in the middle of the write leaves
    restarted = make_state(tmp_path, claims)
    assert set(restarted.prepared_claims()) == {CLAIM_A_UID, "uid-b"}
    assert not restarted.store.quarantined, "a torn slot is the other slot's job, not a quarantine"
    assert set(_on_disk(tmp_path)["claims"]) == {CLAIM_A_UID, "uid-b"}


def test_a_slot_left_unknown_by_a_failed_write_is_rewritten(tmp_path: Path, make_state, claims, monkeypatch) -> None:
    import os

    import dralab.driver.checkpoint as checkpoint_mod

    state = make_state(tmp_path, claims)
    for i in range(2):  # both slots exist and are written in place from now on
        ref = ClaimRef(NAMESPACE, f"c{i}", f"uid-{i}")
        claims.put(lab20_claim(uid=ref.uid, name=ref.name))
        assert state.prepare([ref])[ref.uid].error == ""
    target = state.store.files()[(state.store.sequence + 1) % 2]

    def torn(fd: int, data: bytes, offset: int) -> int:
        os.write(fd, b"x" * (len(data) + 500))  # garbage longer than anything written before
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(checkpoint_mod.os, "pwrite", torn)
    assert "Input/output error" in state.prepare([REF_A])[CLAIM_A_UID].error
    monkeypatch.undo()
    assert state.prepare([REF_A])[CLAIM_A_UID].error == ""
    assert json.loads(target.read_text())["sequence"] == state.store.sequence  # whole and readable again
    restarted = make_state(tmp_path, claims)
    assert set(restarted.prepared_claims()) == {"uid-0", "uid-1", CLAIM_A_UID}


def test_readers_outside_the_driver_get_the_newest_slot(tmp_path: Path, make_state, claims) -> None:
    from dralab.driver.checkpoint import newest_document

    state = make_state(tmp_path, claims)
    state.prepare([REF_A])
    ref_b = ClaimRef(NAMESPACE, "b", "uid-b")
    claims.put(lab20_claim(uid="uid-b", name="b"))
    state.prepare([ref_b])
    state.unprepare([REF_A])
    doc = newest_document(_checkpoint(tmp_path))
    assert doc is not None and set(doc["claims"]) == {"uid-b"}
    _newest(tmp_path).write_text("torn")
    assert set(newest_document(_checkpoint(tmp_path))["claims"]) == {CLAIM_A_UID, "uid-b"}, "the older slot"
    for slot in _slots(tmp_path):
        slot.unlink()
    assert newest_document(_checkpoint(tmp_path)) is None


def test_specs_wiped_under_running_claims_are_restored_without_a_prepare(tmp_path: Path, make_state, claims) -> None:
    """The real kubelet never calls Prepare again for running pods: the driver notices the loss itself."""
    state = make_state(tmp_path, claims)
    first = state.prepare([REF_A])[CLAIM_A_UID]
    assert state.restore_specs() == []  # nothing lost, nothing rewritten
    for path in (tmp_path / "cdi").iterdir():
        path.unlink()
    assert state.restore_specs() == [CLAIM_A_UID]
    spec = yaml.safe_load((tmp_path / "cdi" / SPEC_NAME).read_text())
    assert env_of(spec)["NPU_MEM_QUOTA"] == "8192"
    assert (tmp_path / "cdi" / "k8s.ascend.project-hami.io-npu_common.yaml").exists()
    assert state.prepared_claims()[CLAIM_A_UID].devices == first.devices
    state.unprepare([REF_A])
    assert state.restore_specs() == []
    assert not (tmp_path / "cdi" / SPEC_NAME).exists()  # an unprepared claim's spec is never brought back
