"""Attack: a tenant reads or changes another claim's files through the driver's host directories.

Before the fix the state root was 0755, ``shared`` and every ``claims/<uid>`` were 0777, and
``shared`` was mounted read-write into every claim's containers on the node. Now the state root is
0700, a claim's directory is reachable only through that claim's own mount, and the only thing
claims share is the registry file of a device they were both allocated (Ascend's contract), mounted
as that single file. Every run is in a temp folder under the kit's audit-hook sandbox.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from dralab.driver.cdi import ClaimRef
from dralab.driver.claims import InMemoryClaimSource, allocated_claim
from dralab.driver.library import stub_library
from dralab.driver.runner import DriverProcess, RunOptions
from dralab_kit.fixtures.driver_claims import NODE, lab20_claim
from dralab_kit.fixtures.sandbox import Sandbox

NS = "tenants"
# Lab 20's node: npu-0-0 is physical id 0, npu-1-0 physical id 2
CLAIMS = {"a": ("uid-a", "npu-0-0"), "b": ("uid-b", "npu-1-0"), "c": ("uid-c", "npu-0-0")}


def _start(root: Path, source: InMemoryClaimSource, backend_devices: str | None = None, node: str = NODE):
    lib = root / "lib" / "libvcore.so"
    lib.parent.mkdir(exist_ok=True)
    lib.write_bytes(stub_library())  # an ELF header the driver accepts
    opts = RunOptions(
        node=node,
        backend="fake",
        devices_file=backend_devices,
        plugin_dir=str(root / "p"),
        registry_dir=str(root / "r"),
        cdi_dir=str(root / "cdi"),
        state_dir=str(root / "s"),
        enforcement_library=str(lib),
        publish=False,
    )
    return DriverProcess(opts, claims=source).start()  # type: ignore[arg-type]


@pytest.fixture
def sandbox_root() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="dsec", dir="/tmp"))
    try:
        with Sandbox(root):
            yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def ascend(sandbox_root: Path) -> Iterator[tuple[Path, dict[str, dict]]]:
    """Three Ascend claims prepared on Lab 20's node: a and c share npu-0-0, b has npu-1-0."""
    source = InMemoryClaimSource(
        [lab20_claim(uid=uid, name=name, namespace=NS, device=dev) for name, (uid, dev) in CLAIMS.items()]
    )
    proc = _start(sandbox_root, source)
    try:
        state = proc.served[0].state
        out = state.prepare([ClaimRef(NS, name, uid) for name, (uid, _) in CLAIMS.items()])
        assert all(r.error == "" for r in out.values()), out
        specs = {name: yaml.safe_load(state.spec_path(uid).read_text()) for name, (uid, _) in CLAIMS.items()}
        yield sandbox_root, specs
    finally:
        proc.stop()


def _rw_mounts(spec: dict) -> dict[str, str]:
    """host path -> container path of every read-write mount of a claim spec."""
    mounts = spec["devices"][0]["containerEdits"].get("mounts") or []
    return {m["hostPath"]: m["containerPath"] for m in mounts if "rw" in m["options"]}


def _walk(top: Path) -> Iterator[Path]:
    yield top
    yield from top.rglob("*")


def test_state_root_is_private(ascend) -> None:
    root, _ = ascend
    for folder in (root / "s", root / "s" / "ascend.project-hami.io", root / "s" / "ascend.project-hami.io" / "claims"):
        mode = stat.S_IMODE(folder.stat().st_mode)
        assert mode == 0o700, f"{folder} has mode {mode:o}: only the driver may enter the state root"


def test_nothing_the_driver_made_is_world_writable(ascend) -> None:
    root, _ = ascend
    for top in (root / "s", root / "cdi"):
        for path in _walk(top):
            st = path.lstat()
            if stat.S_ISCHR(st.st_mode) or stat.S_ISLNK(st.st_mode):
                continue  # the fake backend's device nodes copy /dev/null
            mode = stat.S_IMODE(st.st_mode)
            assert not mode & 0o002, f"{path} is world-writable ({mode:o})"


def test_claim_directory_is_mounted_only_into_its_claim(ascend) -> None:
    root, specs = ascend
    claims_root = root / "s" / "ascend.project-hami.io" / "claims"
    for name, (uid, _) in CLAIMS.items():
        own = claims_root / uid
        assert not stat.S_IMODE(own.stat().st_mode) & 0o007, f"{own} is open to other users"
        for other, spec in specs.items():
            if other == name:
                assert str(own) in _rw_mounts(spec)
            else:
                mounted = {m["hostPath"] for m in spec["devices"][0]["containerEdits"]["mounts"]}
                assert str(own) not in mounted, f"claim {other} gets claim {name}'s directory"


def test_claims_on_other_devices_share_nothing_writable(ascend) -> None:
    _, specs = ascend
    a, b, c = (_rw_mounts(specs[k]) for k in "abc")
    assert not set(a) & set(b), f"claims on different devices share writable paths: {set(a) & set(b)}"
    shared = set(a) & set(c)  # the same device: only that device's registry, as a single file
    assert [Path(p).name for p in shared] == ["0_global_registry"], shared
    [registry] = shared
    assert Path(registry).is_file()
    assert a[registry] == "/hami-shared-region/0_global_registry"
    assert not stat.S_IMODE(os.stat(registry).st_mode) & 0o007
    for spec in specs.values():
        for host in _rw_mounts(spec):
            assert not (Path(host).is_dir() and Path(host).name == "shared"), "the whole shared folder is mounted"


def test_vendor_without_a_shared_region_mounts_none(sandbox_root: Path) -> None:
    results = [{"request": "gpu", "driver": "hami-core-gpu.project-hami.io", "pool": "gpu-node-0", "device": "gpu-0",
                "consumedCapacity": {"memory": "4Gi", "cores": "20"}}]
    source = InMemoryClaimSource([allocated_claim(NS, "g", "uid-g", results)])
    proc = _start(sandbox_root, source, backend_devices="nvidia-gpus", node="gpu-node-0")
    try:
        state = proc.served[0].state
        assert state.prepare([ClaimRef(NS, "g", "uid-g")])["uid-g"].error == ""
        spec = yaml.safe_load(state.spec_path("uid-g").read_text())
    finally:
        proc.stop()
    rw = _rw_mounts(spec)
    assert list(rw.values()) == ["/usr/local/vgpu"], f"only the claim's own directory is writable: {rw}"
    assert not (sandbox_root / "s" / "hami-core-gpu.project-hami.io" / "shared").exists()
