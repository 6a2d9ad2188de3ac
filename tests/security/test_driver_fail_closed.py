"""Attack: a claim runs with the whole device because the enforcement library is not there.

Before the fix, a library missing where the driver looks (the init container failed, a wrong
``enforcementLibrary``, a library built for another architecture, a file that is no library) was
only noted: NodePrepareResources succeeded with a CDI spec without the library and without
``/etc/ld.so.preload``, so the claim's container ran unlimited beside its sharers, and the pod
showed nothing. Now the kubelet gets the claim's error (the pod's event, naming the path and the
fix), no spec is written, readiness says why, and only ``enforcement: none`` prepares the claim
without the library. Self-contained (the ELF header is built here), through the driver's real
gRPC socket, under the kit's audit-hook sandbox.
"""

from __future__ import annotations

import platform
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
import yaml

from dralab.driver.claims import InMemoryClaimSource
from dralab.driver.proto import dra_v1_pb2, dra_v1_pb2_grpc
from dralab.driver.runner import DriverProcess, RunOptions
from dralab_kit.fixtures.driver_claims import CLAIM_A, CLAIM_A_UID, DRIVER, NAMESPACE, NODE, lab20_claim
from dralab_kit.fixtures.sandbox import Sandbox

EM = {"x86_64": 62, "aarch64": 183}
HERE = EM.get(platform.machine(), 62)
FOREIGN = 183 if HERE == 62 else 62


def elf(machine: int) -> bytes:
    """An ELF64 little-endian shared-object header for ``machine`` (all the driver reads of a library)."""
    return b"\x7fELF\x02\x01\x01" + bytes(9) + (3).to_bytes(2, "little") + machine.to_bytes(2, "little") + bytes(44)


@pytest.fixture
def root() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="dfc", dir="/tmp"))
    try:
        with Sandbox(path):
            yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _driver(root: Path, library: Path, **kw) -> DriverProcess:
    opts = RunOptions(node=NODE, backend="fake", plugin_dir=str(root / "p"), registry_dir=str(root / "r"),
                      cdi_dir=str(root / "cdi"), state_dir=str(root / "s"), enforcement_library=str(library),
                      publish=False, **kw)
    return DriverProcess(opts, claims=InMemoryClaimSource([lab20_claim()])).start()


def _prepare(root: Path) -> str:
    """NodePrepareResources for Lab 20's claim A, as the kubelet sends it; the claim's error ('' = prepared)."""
    req = dra_v1_pb2.NodePrepareResourcesRequest(
        claims=[dra_v1_pb2.Claim(namespace=NAMESPACE, name=CLAIM_A, uid=CLAIM_A_UID)]
    )
    with grpc.insecure_channel(f"unix://{root / 'p' / DRIVER / 'dra.sock'}") as ch:
        return dra_v1_pb2_grpc.DRAPluginStub(ch).NodePrepareResources(req, timeout=30).claims[CLAIM_A_UID].error


def _claim_specs(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "cdi").iterdir() if CLAIM_A_UID in p.name)


ATTACKS: dict[str, tuple[Callable[[Path], object], str]] = {
    "init container failed": (lambda p: None, "is missing"),
    "a folder where the library should be": (lambda p: p.mkdir(), "cannot be read"),
    "built for another architecture": (lambda p: p.write_bytes(elf(FOREIGN)), "is built for"),
    "not a library": (lambda p: p.write_text("<html>404</html>"), "is not an ELF file"),
    "an empty file": (lambda p: p.write_bytes(b""), "is empty"),
}


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_the_claim_is_refused_without_a_usable_library(root: Path, attack: str) -> None:
    make, problem = ATTACKS[attack]
    library = root / "lib" / "libvcore.so"
    library.parent.mkdir()
    make(library)
    proc = _driver(root, library)
    try:
        error = _prepare(root)
        assert error.startswith(f"enforcement library {library} {problem}"), error
        assert "set driver.enforcementLibrary" in error and "driver.enforcement: none" in error
        assert _claim_specs(root) == [], "no CDI spec: the container cannot start unenforced"
        ready, why = proc.ready()
        assert not ready and str(library) in why
    finally:
        proc.stop()


def test_a_usable_library_is_preloaded(root: Path) -> None:
    library = root / "lib" / "libvcore.so"
    library.parent.mkdir()
    library.write_bytes(elf(HERE))
    proc = _driver(root, library)
    try:
        assert _prepare(root) == ""
        [name] = _claim_specs(root)
        edits = yaml.safe_load((root / "cdi" / name).read_text())["devices"][0]["containerEdits"]
        assert "/etc/ld.so.preload" in {m["containerPath"] for m in edits["mounts"]}
    finally:
        proc.stop()


def test_running_unenforced_takes_the_explicit_opt_out(root: Path) -> None:
    library = root / "lib" / "libvcore.so"
    proc = _driver(root, library, enforcement="none")
    try:
        assert _prepare(root) == ""
        [name] = _claim_specs(root)
        spec = yaml.safe_load((root / "cdi" / name).read_text())
        targets = {m["containerPath"] for m in spec["devices"][0]["containerEdits"]["mounts"]}
        assert "/etc/ld.so.preload" not in targets
        assert "quotas not enforced" in spec["annotations"]["dralab.io/notes"]
    finally:
        proc.stop()
