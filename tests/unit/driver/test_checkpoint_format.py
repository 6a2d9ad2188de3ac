"""Checkpoint format versions: an upgrade reads the old release's checkpoint, a rollback the new one's.

``fixtures/checkpoint/format-1.json`` was written by the last format 1 release, and
``fixtures/checkpoint/format1_release.py`` is that release's checkpoint module, frozen: the driver a
``helm rollback`` runs.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

import dralab.driver.checkpoint as checkpoint
from dralab.driver.cdi import ClaimRef
from dralab.driver.checkpoint import (
    FORMAT,
    PREPARE_COMPLETED,
    PREPARE_STARTED,
    WRITER,
    Checkpoint,
    CorruptCheckpoint,
    IncompatibleCheckpoint,
    _digest,
    decode,
    encode,
    migrate,
    migrate_1_to_2,
)
from dralab_kit.fixtures.driver_claims import CLAIM_A, CLAIM_A_UID, NAMESPACE, lab20_claim
from dralab_kit.fixtures.logs import kept_records

FIXTURES = Path(__file__).parent / "fixtures" / "checkpoint"
DRIVER = "ascend.project-hami.io"  # the golden file's driver too
REF_A = ClaimRef(NAMESPACE, CLAIM_A, CLAIM_A_UID)


@pytest.fixture(scope="module")
def release1() -> Iterator[ModuleType]:
    """The format 1 release's checkpoint module, as a rollback would run it."""
    spec = importlib.util.spec_from_file_location("dralab_checkpoint_format1", FIXTURES / "format1_release.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


@pytest.fixture
def logged() -> Iterator[list[logging.LogRecord]]:
    """The checkpoint module's log records (the dralab logger does not propagate to caplog)."""
    with kept_records("dralab.driver.checkpoint") as records:
        yield records


def _signed(body: dict) -> bytes:
    """A document as some release would write it: ``body`` plus its checksum."""
    return (json.dumps({**body, "checksum": _digest(body)}, sort_keys=True) + "\n").encode()


def _golden() -> dict:
    raw = json.loads((FIXTURES / "format-1.json").read_text())
    del raw["checksum"]
    return raw


def _slots(tmp_path: Path) -> list[Path]:
    first = tmp_path / "state" / DRIVER / "checkpoint.json"
    return [first, first.with_name("checkpoint.1.json")]


def _newest(tmp_path: Path) -> Path:
    return max((p for p in _slots(tmp_path) if p.exists()), key=lambda p: json.loads(p.read_text())["sequence"])


def _future(claims: dict, version: int, fmt: int = 99, sequence: int = 50) -> bytes:
    """What a later release might write: new top-level and entry fields this release does not know."""
    entries = {uid: {**entry, "mountedTmpfs": True} for uid, entry in claims.items()}
    return _signed(
        {
            "version": version,
            "format": fmt,
            "writer": "dralab 9.9.9",
            "driver": DRIVER,
            "bootID": "boot-1",
            "sequence": sequence,
            "claims": entries,
            "claimFolders": {"layout": "per-claim tmpfs"},
        }
    )


# -- pure functions ---------------------------------------------------------------------------------


def test_a_format_1_file_decodes_migrated_with_every_claim() -> None:
    cp = decode((FIXTURES / "format-1.json").read_bytes(), DRIVER)
    assert (cp.format, cp.writer, cp.sequence, cp.boot_id) == (1, "", 7, "boot-0")
    assert set(cp.claims) == {"uid-a", "uid-b"}
    a, b = cp.claims["uid-a"], cp.claims["uid-b"]
    assert a.claim == ClaimRef("lab", "a", "uid-a") and a.state == PREPARE_COMPLETED
    assert [d.device_name for d in a.devices] == ["npu-0-0"] and a.devices[0].share_id == "s-1"
    assert a.cdi_spec == "k8s.ascend.project-hami.io-npu_uid-a.yaml"
    assert b.state == PREPARE_STARTED and b.devices == ()


def test_a_format_1_file_is_checksummed_as_written() -> None:
    data = (FIXTURES / "format-1.json").read_bytes().replace(b'"namespace": "lab"', b'"namespace": "lbb"', 1)
    with pytest.raises(CorruptCheckpoint, match="checksum mismatch"):
        decode(data, DRIVER)
    # a checksum over the migrated form is not the file's: migration comes after verification
    body = _golden()
    forged = {**body, "checksum": _digest(migrate_1_to_2(body))}
    with pytest.raises(CorruptCheckpoint, match="checksum mismatch"):
        decode(json.dumps(forged).encode(), DRIVER)


def test_migrate_1_to_2_names_the_format_and_an_unknown_writer() -> None:
    body = _golden()
    before = json.dumps(body, sort_keys=True)
    out = migrate_1_to_2(body)
    assert json.dumps(body, sort_keys=True) == before, "pure: the input is not changed"
    assert (out["format"], out["writer"], out["version"]) == (2, "", 1)
    assert {k: v for k, v in out.items() if k not in ("format", "writer")} == body


def test_migrations_apply_in_order_up_to_this_format(monkeypatch) -> None:
    seen: list[int] = []

    def two_to_three(doc: dict) -> dict:
        seen.append(doc["format"])
        return {**doc, "format": 3, "extra": doc["writer"] + "!"}

    monkeypatch.setattr(checkpoint, "FORMAT", 3)
    monkeypatch.setitem(checkpoint.MIGRATIONS, 2, two_to_three)
    out = migrate(_golden())
    assert seen == [2] and (out["format"], out["extra"]) == (3, "!")
    assert migrate({**out, "format": 5}) == {**out, "format": 5}, "a newer format is left as it is"


def test_every_older_format_has_a_migration() -> None:
    assert set(checkpoint.MIGRATIONS) == set(range(1, FORMAT))


def test_this_release_writes_format_2_readable_by_format_1() -> None:
    doc = json.loads(encode(Checkpoint(driver=DRIVER, sequence=3)))
    assert (doc["version"], doc["format"], doc["writer"]) == (1, 2, WRITER)
    assert WRITER.startswith("dralab ")


def test_round_trip() -> None:
    golden = decode((FIXTURES / "format-1.json").read_bytes(), DRIVER)
    again = decode(encode(golden), DRIVER)
    assert again.claims == golden.claims
    assert (again.sequence, again.boot_id, again.format, again.writer) == (7, "boot-0", FORMAT, WRITER)
    assert encode(again) == encode(golden)


def test_a_newer_format_declared_readable_here_is_read_ignoring_unknown_fields() -> None:
    claims = json.loads((FIXTURES / "format-1.json").read_text())["claims"]
    cp = decode(_future(claims, version=2), DRIVER)
    assert (cp.format, cp.writer) == (99, "dralab 9.9.9")
    assert cp.claims == decode((FIXTURES / "format-1.json").read_bytes(), DRIVER).claims


def test_a_newer_format_for_newer_readers_is_incompatible_not_corrupt() -> None:
    with pytest.raises(IncompatibleCheckpoint) as caught:
        decode(_future({}, version=3), DRIVER)
    assert not isinstance(caught.value, CorruptCheckpoint)
    assert (caught.value.version, caught.value.format, caught.value.writer) == (3, 99, "dralab 9.9.9")
    message = str(caught.value)
    assert "format 99" in message and f"up to {FORMAT}" in message and "roll forward to dralab 9.9.9" in message
    # a torn newer file is still corruption: the checksum comes first
    with pytest.raises(CorruptCheckpoint, match="checksum"):
        decode(_future({}, version=3).replace(b"9.9.9", b"9.9.8", 1), DRIVER)


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"version": None}, "bad version None"),
        ({"version": "1"}, "bad version '1'"),
        ({"version": True}, "bad version True"),
        ({"version": 0}, "bad version 0"),
        ({"format": 1.5}, "bad format 1.5"),
        ({"version": 2, "format": 1}, "format 1 cannot need a reader of format 2"),
        ({"writer": 7}, "bad writer 7"),
    ],
)
def test_malformed_version_fields_are_corrupt(fields: dict, reason: str) -> None:
    body = {"version": 1, "format": 2, "writer": WRITER, "driver": DRIVER, "sequence": 1, "claims": {}, **fields}
    with pytest.raises(CorruptCheckpoint, match=reason):
        decode(_signed({k: v for k, v in body.items() if v is not None}), DRIVER)


# -- the previous release ---------------------------------------------------------------------------


def test_the_format_1_release_reads_what_this_one_writes(release1) -> None:
    golden = decode((FIXTURES / "format-1.json").read_bytes(), DRIVER)
    old = release1.decode(encode(golden), DRIVER)
    assert {uid: e.to_dict() for uid, e in old.claims.items()} == {uid: e.to_dict() for uid, e in golden.claims.items()}


def test_rollback_and_roll_forward_lose_no_claim(tmp_path: Path, make_state, claims, release1) -> None:
    state = make_state(tmp_path, claims)
    refs = [ClaimRef(NAMESPACE, f"c{i}", f"uid-{i}") for i in range(3)]
    for ref in refs:
        claims.put(lab20_claim(uid=ref.uid, name=ref.name))
        assert state.prepare([ref])[ref.uid].error == ""
    assert {json.loads(p.read_text())["format"] for p in _slots(tmp_path)} == {2}
    # helm rollback: the format 1 release opens this release's slots
    old = release1.CheckpointStore(_slots(tmp_path)[0], DRIVER, tmp_path / "cdi", state.cdi_class, "boot-1")
    loaded = old.load()
    assert set(loaded.claims) == {r.uid for r in refs} and old.quarantined == []
    loaded.claims.pop("uid-0")  # the old release unprepares one claim
    old.save(loaded)
    assert "format" not in json.loads(_newest(tmp_path).read_text()), "written by the format 1 release"
    # roll forward: this release reads the old one's newest slot
    again = make_state(tmp_path, claims)
    assert set(again.prepared_claims()) == {"uid-1", "uid-2"}
    assert again.store.quarantined == []


def test_an_upgrade_from_format_1_slots_keeps_every_claim(tmp_path: Path, make_state, claims, release1) -> None:
    slots = _slots(tmp_path)
    slots[0].parent.mkdir(parents=True)
    slots[1].write_bytes((FIXTURES / "format-1.json").read_bytes())  # sequence 7: slot 1
    state = make_state(tmp_path, claims)
    assert set(state.prepared_claims()) == {"uid-a", "uid-b"} and state.store.quarantined == []
    assert state.prepare([REF_A])[CLAIM_A_UID].error == ""
    doc = json.loads(_newest(tmp_path).read_text())
    assert doc["format"] == FORMAT and doc["sequence"] > 7 and set(doc["claims"]) == {"uid-a", "uid-b", CLAIM_A_UID}


# -- a newer release's checkpoint -------------------------------------------------------------------


def test_a_compatible_newer_slot_is_used_and_rewritten_in_this_format(
    tmp_path: Path, make_state, claims, logged
) -> None:
    state = make_state(tmp_path, claims)
    state.prepare([REF_A])
    written = json.loads(_newest(tmp_path).read_text())["claims"]
    for slot in _slots(tmp_path):
        slot.unlink(missing_ok=True)
    _slots(tmp_path)[0].write_bytes(_future(written, version=1))
    again = make_state(tmp_path, claims)
    assert set(again.prepared_claims()) == {CLAIM_A_UID} and again.store.quarantined == []
    assert any("newer format 99" in r.getMessage() and r.levelno == logging.WARNING for r in logged)
    again.unprepare([REF_A])
    doc = json.loads(_newest(tmp_path).read_text())
    assert (doc["format"], doc["claims"]) == (FORMAT, {}) and "claimFolders" not in doc


def test_an_incompatible_newest_slot_is_kept_aside_and_the_older_one_used(
    tmp_path: Path, make_state, claims, logged
) -> None:
    state = make_state(tmp_path, claims)
    ref_b = ClaimRef(NAMESPACE, "b", "uid-b")
    claims.put(lab20_claim(uid="uid-b", name="b"))
    assert state.prepare([REF_A])[CLAIM_A_UID].error == ""
    assert state.prepare([ref_b])["uid-b"].error == ""  # only in the newest slot and its CDI spec
    newest = _newest(tmp_path)
    future = _future(json.loads(newest.read_text())["claims"], version=3, sequence=state.store.sequence)
    newest.write_bytes(future)
    again = make_state(tmp_path, claims)
    assert set(again.prepared_claims()) == {CLAIM_A_UID, "uid-b"}, "uid-b comes back from its CDI spec"
    kept = list(newest.parent.glob(f"{newest.name}.newer-format99-*"))
    assert len(kept) == 1 and kept[0].read_bytes() == future
    assert again.store.quarantined == kept
    errors = [r for r in logged if r.levelno == logging.ERROR]
    assert len(errors) == 1
    line = errors[0]
    assert "roll forward to dralab 9.9.9" in line.getMessage() and "using the other slot" in line.getMessage()
    assert line.fields["fileFormat"] == 99 and line.fields["readerFormat"] == FORMAT  # type: ignore[attr-defined]
    assert line.fields["writer"] == "dralab 9.9.9" and line.fields["reader"] == WRITER  # type: ignore[attr-defined]
    for i in range(3):  # both slots written again: the kept file is never touched
        ref = ClaimRef(NAMESPACE, f"c{i}", f"uid-{i}")
        claims.put(lab20_claim(uid=ref.uid, name=ref.name))
        assert again.prepare([ref])[ref.uid].error == ""
    assert kept[0].read_bytes() == future
    assert all(json.loads(p.read_text())["format"] == FORMAT for p in _slots(tmp_path))
    assert "dralab_driver_checkpoint_quarantined_total" in again.metrics.render().decode()


def test_incompatible_slots_alone_are_kept_aside_and_the_specs_rebuild_the_state(
    tmp_path: Path, make_state, claims, logged
) -> None:
    state = make_state(tmp_path, claims)
    first = state.prepare([REF_A])[CLAIM_A_UID]
    written = json.loads(_newest(tmp_path).read_text())["claims"]
    futures = [_future(written, version=5, sequence=40 + i) for i in range(2)]
    for slot, data in zip(_slots(tmp_path), futures, strict=True):
        slot.write_bytes(data)
    again = make_state(tmp_path, claims)
    entry = again.prepared_claims()[CLAIM_A_UID]
    assert entry.state == PREPARE_COMPLETED and entry.devices == first.devices
    kept = sorted(_slots(tmp_path)[0].parent.glob("checkpoint*.newer-format99-*"))
    assert sorted(k.read_bytes() for k in kept) == sorted(futures)
    assert not list(_slots(tmp_path)[0].parent.glob("checkpoint*.corrupt-*")), "not treated as corrupt"
    (line,) = [r for r in logged if r.levelno == logging.ERROR]
    assert "state rebuilt from the CDI specs" in line.getMessage() and "roll forward" in line.getMessage()
    assert line.fields["claims"] == [CLAIM_A_UID]  # type: ignore[attr-defined]
    assert decode(_newest(tmp_path).read_bytes(), DRIVER).claims.keys() == {CLAIM_A_UID}
