"""Group commit: overlapping Prepare calls share one durable checkpoint write, and a failed write fails them all."""

from __future__ import annotations

import threading
from pathlib import Path

from dralab.driver.cdi import ClaimRef
from dralab.driver.checkpoint import decode
from dralab.driver.claims import InMemoryClaimSource
from dralab_kit.fixtures.driver_claims import NAMESPACE, lab20_claim

N = 6
WAIT_S = 30.0  # a bound on a hang, never reached when the code is right


def _on_disk(state):
    """The newest checkpoint in the slot files."""
    slots = [decode(p.read_bytes(), state.driver) for p in state.store.files() if p.exists()]
    return max(slots, key=lambda cp: cp.sequence)


def _claims() -> tuple[InMemoryClaimSource, list[ClaimRef]]:
    refs = [ClaimRef(NAMESPACE, f"c{i}", f"uid-{i}") for i in range(N)]
    return InMemoryClaimSource([lab20_claim(uid=r.uid, name=r.name) for r in refs]), refs


class GatedSave:
    """Holds the first checkpoint write until every call has staged its change (forces the overlap)."""

    def __init__(self, state, fail_first: bool = False) -> None:
        self.state = state
        self.real = state.store.save
        self.gate = threading.Event()
        self.staged = threading.Semaphore(0)
        self.fail_first = fail_first
        self.calls = 0
        real_stage = state.commit.stage

        def stage() -> int:
            ticket = real_stage()
            self.staged.release()
            return ticket

        state.commit.stage = stage
        state.store.save = self.save

    def save(self, cp) -> None:
        self.calls += 1
        if self.calls == 1:
            assert self.gate.wait(WAIT_S)
            if self.fail_first:
                raise OSError(28, "No space left on device")
        self.real(cp)


def _run_concurrently(state, refs, gated: GatedSave) -> dict[str, str]:
    errors: dict[str, str] = {}
    lock = threading.Lock()

    def one(ref: ClaimRef) -> None:
        result = state.prepare([ref])[ref.uid]
        with lock:
            errors[ref.uid] = result.error

    threads = [threading.Thread(target=one, args=(r,)) for r in refs]
    for t in threads:
        t.start()
    for _ in refs:
        assert gated.staged.acquire(timeout=WAIT_S)
    gated.gate.set()
    for t in threads:
        t.join(WAIT_S)
    return errors


def test_overlapping_calls_share_one_write(tmp_path: Path, make_state) -> None:
    source, refs = _claims()
    state = make_state(tmp_path, source)
    gated = GatedSave(state)
    errors = _run_concurrently(state, refs, gated)
    assert errors == {r.uid: "" for r in refs}
    # the first write held every other call back; they all rode on the second one
    assert (gated.calls, state.commit.last_batch) == (2, N - 1)
    assert set(_on_disk(state).claims) == {r.uid for r in refs}


def test_a_failed_write_fails_every_call_it_covered_and_removes_their_files(tmp_path: Path, make_state) -> None:
    source, refs = _claims()
    state = make_state(tmp_path, source)
    gated = GatedSave(state, fail_first=True)
    errors = _run_concurrently(state, refs, gated)
    failed = [uid for uid, err in errors.items() if err]
    assert failed, "the call whose change the failed write carried must fail"
    for uid in failed:
        assert "No space left" in errors[uid]
        assert not state.spec_path(uid).exists() and not state.claim_dir(uid).exists()
        assert uid not in state.prepared_claims()
    on_disk = set(_on_disk(state).claims)
    # every success is durable; a failed claim may linger as an entry without files (the state a
    # reboot leaves, which a repeated Prepare rewrites), never the other way round
    assert {uid for uid, err in errors.items() if not err} <= on_disk <= set(errors)
    # the kubelet retries: the claims prepare now
    again = state.prepare([r for r in refs if r.uid in failed])
    assert all(not r.error for r in again.values())


def test_restart_after_a_commit_knows_the_claims(tmp_path: Path, make_state) -> None:
    source, refs = _claims()
    state = make_state(tmp_path, source)
    assert all(not r.error for r in state.prepare(refs).values())
    assert state.commit.writes == 1
    restarted = make_state(tmp_path, source)
    assert set(restarted.prepared_claims()) == {r.uid for r in refs}


def test_a_failed_write_does_not_stick_to_later_calls(tmp_path: Path, make_state) -> None:
    source, refs = _claims()
    state = make_state(tmp_path, source)
    kept, dropped = refs[0], refs[1]
    assert all(not r.error for r in state.prepare([kept, dropped]).values())
    real = state.store.save

    def full(cp) -> None:
        raise OSError(28, "No space left on device")

    state.store.save = full
    assert "No space left" in state.unprepare([dropped])[dropped.uid]
    state.store.save = real
    assert state.prepare([kept])[kept.uid].error == "", "a repeat after the failure answers"
    assert set(_on_disk(state).claims) == {kept.uid}
