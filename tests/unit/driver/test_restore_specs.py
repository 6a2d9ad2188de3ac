"""The periodic check for lost CDI specs: one stat while nothing changed, never a claim the kubelet unprepared."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from dralab.driver import dirstamp
from dralab.driver import state as state_module
from dralab.driver.cdi import ClaimRef
from dralab.driver.dirstamp import SETTLE_NS, UnchangedSince, stamp
from dralab_kit.fixtures.driver_claims import CLAIM_A, CLAIM_A_UID, NAMESPACE, lab20_claim

REF_A = ClaimRef(NAMESPACE, CLAIM_A, CLAIM_A_UID)


def _later() -> int:
    """A wall clock well past every change these tests make: their folders count as settled."""
    return time.time_ns() + 10 * SETTLE_NS


def _backdate(folder: Path) -> None:
    """Set the folder's mtime well in the past, so the next change moves it even within one clock tick."""
    old = time.time_ns() - 10 * SETTLE_NS
    os.utime(folder, ns=(old, old))


def test_stamp_of_a_missing_folder_is_none(tmp_path: Path) -> None:
    assert stamp(tmp_path / "absent") is None
    (tmp_path / "file").write_text("x")
    assert stamp(tmp_path / "file") is None


@pytest.mark.parametrize("change", ["create", "remove", "rename", "replace folder"])
def test_any_change_to_the_entries_breaks_a_settled_stamp(tmp_path: Path, change: str) -> None:
    folder = tmp_path / "cdi"
    folder.mkdir()
    (folder / "a.yaml").write_text("a")
    _backdate(folder)
    seen = UnchangedSince(folder, clock_ns=_later)
    unchanged, before = seen.unchanged()
    assert not unchanged, "nothing was checked yet"
    seen.checked(before)
    assert seen.unchanged()[0]
    if change == "create":
        (folder / "b.yaml").write_text("b")
    elif change == "remove":
        (folder / "a.yaml").unlink()
    elif change == "rename":
        (folder / "a.yaml").rename(folder / "c.yaml")
    else:
        (folder / "a.yaml").unlink()
        folder.rmdir()
        folder.mkdir()
    assert not seen.unchanged()[0], change


def test_a_folder_changed_just_before_the_check_is_checked_again(tmp_path: Path) -> None:
    """A change in the same clock tick as the check may leave its times as they were: not trusted."""
    seen = UnchangedSince(tmp_path)  # the real clock: the folder was made a moment ago
    seen.checked(stamp(tmp_path))
    assert not seen.unchanged()[0]


def test_forget_and_a_missing_folder_mean_a_full_check(tmp_path: Path) -> None:
    seen = UnchangedSince(tmp_path / "cdi", clock_ns=_later)
    seen.checked(None)
    assert seen.unchanged() == (False, None)
    (tmp_path / "cdi").mkdir()
    seen.checked(stamp(tmp_path / "cdi"))
    assert seen.unchanged()[0]
    seen.forget()
    assert not seen.unchanged()[0]


def _counting_listdir(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    listed: list[str] = []
    real = os.listdir

    def listdir(path: os.PathLike[str] | str) -> list[str]:
        listed.append(str(path))
        return real(path)

    monkeypatch.setattr(state_module.os, "listdir", listdir)
    return listed


def test_restore_lists_the_folder_only_after_it_changed(tmp_path: Path, make_state, claims, monkeypatch) -> None:
    state = make_state(tmp_path, claims)
    state._specs_seen = UnchangedSince(state.cdi_dir, clock_ns=_later)
    state.prepare([REF_A])
    _backdate(state.cdi_dir)
    listed = _counting_listdir(monkeypatch)
    assert state.restore_specs() == []
    assert state.restore_specs() == []
    assert state.restore_specs() == []
    assert len(listed) == 1, "one listing, then one stat a pass while the folder is unchanged"
    spec = state.spec_path(CLAIM_A_UID)
    spec.unlink()
    assert state.restore_specs() == [CLAIM_A_UID]
    assert spec.exists()
    assert len(listed) == 2


def test_restore_never_prepares_a_claim_unprepared_meanwhile(tmp_path: Path, make_state, claims) -> None:
    """Restore decides from a listing, then rewrites: a claim unprepared in between stays unprepared."""
    state = make_state(tmp_path, claims)
    result = state.prepare([REF_A], repeat_only=True)[CLAIM_A_UID]
    assert result.error == f"claim {CLAIM_A_UID} is no longer prepared"
    assert state.prepared_claims() == {}
    assert not [p for p in state.cdi_dir.iterdir() if CLAIM_A_UID in p.name]


def test_restore_rewrites_a_wiped_folder(tmp_path: Path, make_state, claims) -> None:
    state = make_state(tmp_path, claims)
    state._specs_seen = UnchangedSince(state.cdi_dir, clock_ns=_later)
    claims.put(lab20_claim(uid="uid-b", name="b"))
    state.prepare([REF_A, ClaimRef(NAMESPACE, "b", "uid-b")])
    assert state.restore_specs() == []
    names = sorted(p.name for p in state.cdi_dir.iterdir())
    for path in state.cdi_dir.iterdir():
        path.unlink()
    state.cdi_dir.rmdir()
    assert sorted(state.restore_specs()) == sorted([CLAIM_A_UID, "uid-b"])
    assert sorted(p.name for p in state.cdi_dir.iterdir()) == names


def test_dirstamp_has_no_side_effects(tmp_path: Path) -> None:
    before = sorted(tmp_path.iterdir())
    UnchangedSince(tmp_path).unchanged()
    dirstamp.stamp(tmp_path)
    assert sorted(tmp_path.iterdir()) == before
