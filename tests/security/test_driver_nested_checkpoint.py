"""Attack: a deeply nested checkpoint (or CDI spec) crashes the driver at start with RecursionError.

Whoever can write the state folder (or a damaged disk) must not be able to keep the driver from
starting: a checkpoint nested past the parser's recursion limit goes the way of any corrupt
checkpoint (quarantined, rebuilt from the CDI specs), and a nested spec is skipped by the rebuild.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from dralab.driver.cdi import ClaimRef
from dralab.driver.checkpoint import PREPARE_COMPLETED, decode
from dralab.driver.claims import InMemoryClaimSource
from dralab.driver.devices import BackendOptions
from dralab.driver.devices.fake import FakeBackend
from dralab.driver.library import stub_library
from dralab.driver.state import DriverState
from dralab.model.vendors import load_vendor_table
from dralab_kit.fixtures.driver_claims import CLAIM_A, CLAIM_A_UID, NAMESPACE, NODE, lab20_claim
from dralab_kit.fixtures.sandbox import Sandbox

DEPTH = 200_000


@pytest.fixture
def root() -> Iterator[Path]:
    top = Path(tempfile.mkdtemp(prefix="dnest", dir="/tmp"))
    try:
        with Sandbox(top):
            yield top
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _open(root: Path) -> DriverState:
    lib = root / "lib" / "libvcore.so"
    lib.parent.mkdir(exist_ok=True)
    lib.write_bytes(stub_library())  # an ELF header the driver accepts
    return DriverState(
        vendor=load_vendor_table().get("ascend"),
        node=NODE,
        backend=FakeBackend.from_options(BackendOptions(node=NODE, state_dir=root / "s")),
        claims=InMemoryClaimSource([lab20_claim()]),
        cdi_dir=root / "cdi",
        state_dir=root / "s",
        library=lib,
        boot_id="boot-1",
    ).open()


def _files(state: DriverState) -> tuple[Path, ...]:
    """The checkpoint's files (one file before the two-slot checkpoint: the test then attacks that)."""
    files = getattr(state.store, "files", None)
    return files() if files else (state.store.path,)


@pytest.mark.parametrize(
    "payload",
    [
        b"[" * DEPTH + b"]" * DEPTH,
        b'{"version": 1, "claims": ' + b'{"x": ' * DEPTH + b"1" + b"}" * DEPTH + b"}",
    ],
    ids=["array", "object"],
)
def test_nested_checkpoint_is_quarantined_and_rebuilt(root: Path, payload: bytes) -> None:
    state = _open(root)
    assert state.prepare([ClaimRef(NAMESPACE, CLAIM_A, CLAIM_A_UID)])[CLAIM_A_UID].error == ""
    for path in _files(state):  # every checkpoint file the driver reads
        path.write_bytes(payload)

    again = _open(root)  # a restart over the damaged files

    assert len(again.store.quarantined) == len(_files(again))
    assert all(q.read_bytes() == payload for q in again.store.quarantined), "kept for inspection"
    assert again.checkpoint.claims[CLAIM_A_UID].state == PREPARE_COMPLETED, "rebuilt from the claim's CDI spec"
    [written] = [p for p in _files(again) if p.exists()]
    assert decode(written.read_bytes(), again.driver).claims.keys() == {CLAIM_A_UID}


def test_one_nested_slot_falls_back_to_the_other(root: Path) -> None:
    state = _open(root)
    assert state.prepare([ClaimRef(NAMESPACE, CLAIM_A, CLAIM_A_UID)])[CLAIM_A_UID].error == ""
    state.prepare([ClaimRef(NAMESPACE, CLAIM_A, CLAIM_A_UID)])  # a repeat: nothing new to write
    nested = _files(state)[0]
    nested.write_bytes(b"[" * DEPTH + b"]" * DEPTH)

    again = _open(root)

    assert again.checkpoint.claims[CLAIM_A_UID].state == PREPARE_COMPLETED


def test_nested_cdi_spec_is_skipped_by_the_rebuild(root: Path) -> None:
    state = _open(root)
    nested = state.spec_path("uid-nested")
    nested.write_text("a: " + "[" * DEPTH + "]" * DEPTH + "\n")
    state.store.path.write_bytes(b"not json")

    again = _open(root)

    assert len(again.store.quarantined) == 1
    assert "uid-nested" not in again.checkpoint.claims
