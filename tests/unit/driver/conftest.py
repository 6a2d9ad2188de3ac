"""Fixtures for driver unit tests: Lab 20's node, an in-memory claim source, short socket paths."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dralab.driver.claims import InMemoryClaimSource
from dralab.driver.devices import BackendOptions
from dralab.driver.devices.fake import FakeBackend
from dralab.driver.library import stub_library
from dralab.driver.state import DriverState
from dralab.kube.paths import SLICES_PATH, node_path
from dralab.model.vendors import load_vendor_table
from dralab_kit.fixtures.driver_claims import NODE, lab20_claim
from dralab_kit.fixtures.fakeapi import FakeKube


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A short temp dir: unix socket paths must stay under 108 bytes, pytest's tmp_path can be long."""
    path = Path(tempfile.mkdtemp(prefix="drv", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def library(tmp_path: Path) -> Path:
    """An enforcement library the driver's check accepts on this machine: a 64-byte ELF header, nothing built."""
    lib = tmp_path / "lib" / "libvcore.so"
    lib.parent.mkdir()
    lib.write_bytes(stub_library())
    return lib


@pytest.fixture
def claims() -> InMemoryClaimSource:
    return InMemoryClaimSource([lab20_claim()])


def _make_state(root: Path, claims: InMemoryClaimSource, library: Path, boot_id: str = "boot-1") -> DriverState:
    table = load_vendor_table()
    backend = FakeBackend.from_options(BackendOptions(node=NODE, state_dir=root / "state"))
    return DriverState(
        vendor=table.get("ascend"),
        node=NODE,
        backend=backend,
        claims=claims,
        cdi_dir=root / "cdi",
        state_dir=root / "state",
        library=library,
        boot_id=boot_id,
    ).open()


@pytest.fixture
def make_state(library: Path):
    """Open a driver state over ``root`` (call again on the same root to simulate a restart)."""

    def make(root: Path, claims: InMemoryClaimSource, boot_id: str = "boot-1") -> DriverState:
        return _make_state(root, claims, library, boot_id)

    return make


@pytest.fixture
def state(tmp_path: Path, claims: InMemoryClaimSource, library: Path) -> DriverState:
    return _make_state(tmp_path, claims, library)


def node_api(node: str = NODE, uid: str = "uid-node", version: str = "v1.36.3") -> FakeKube:
    """The shared in-memory apiserver with ``node`` in it (the owner of its ResourceSlices)."""
    api = FakeKube({node_path(node): {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node, "uid": uid}}})
    api.version["gitVersion"] = version
    return api


def published(api: FakeKube) -> dict[str, dict[str, Any]]:
    """The ResourceSlices in ``api`` by name."""
    return {s["metadata"]["name"]: s for s in api.list(SLICES_PATH)["items"]}
