"""Attack: a claim fills the host's disk through its own (bind-mounted) claim folder.

With ``--claim-dir-size`` each claim folder is a tmpfs of that size, so the claim gets ENOSPC.

Mounting is destructive outside a sandbox, so the driver runs in a child process inside a private
mount namespace of its own (``unshare -m``) over a temp folder; the test is skipped where the
machine does not allow one.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

CHILD = r"""
import errno, json, os, sys
from pathlib import Path
from dralab.driver.cdi import ClaimRef
from dralab.driver.claims import InMemoryClaimSource
from dralab.driver.devices import BackendOptions
from dralab.driver.devices.fake import FakeBackend
from dralab.driver.library import stub_library
from dralab_kit.fixtures.driver_claims import CLAIM_A, CLAIM_A_UID, NAMESPACE, NODE, lab20_claim
from dralab.driver.state import DriverState
from dralab.model.vendors import load_vendor_table

root = Path(sys.argv[1])
lib = root / "lib" / "libvcore.so"
lib.parent.mkdir()
lib.write_bytes(stub_library())  # an ELF header the driver accepts

def open_state():
    return DriverState(vendor=load_vendor_table().get("ascend"), node=NODE,
                       backend=FakeBackend.from_options(BackendOptions(node=NODE, state_dir=root / "s")),
                       claims=InMemoryClaimSource([lab20_claim()]), cdi_dir=root / "cdi", state_dir=root / "s",
                       library=lib, boot_id="b", claim_dir_bytes=1 << 20, claim_gid=4242).open()

out = {}
state = open_state()
ref = ClaimRef(NAMESPACE, CLAIM_A, CLAIM_A_UID)
out["error"] = state.prepare([ref])[CLAIM_A_UID].error
folder = state.claim_dir(CLAIM_A_UID)
out["mounted"] = os.path.ismount(folder)
vfs = os.statvfs(folder)
out["size"] = vfs.f_blocks * vfs.f_frsize
st = folder.stat()
out["mode_gid"] = [st.st_mode & 0o7777, st.st_gid]
try:
    with open(folder / "fill", "wb") as fh:
        fh.write(b"x" * (2 << 20))
    out["fill"] = "written"
except OSError as exc:
    out["fill"] = errno.errorcode[exc.errno]
# a reboot takes the tmpfs and leaves the folder: a repeated Prepare mounts it again
import ctypes, ctypes.util
libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
libc.umount2(os.fsencode(folder), 2)
out["after_reboot_mounted"] = os.path.ismount(folder)
out["repeat_error"] = open_state().prepare([ref])[CLAIM_A_UID].error
out["repeat_mounted"] = os.path.ismount(folder)
out["unprepare"] = state.unprepare([ref])[CLAIM_A_UID]
out["after_unprepare"] = [os.path.ismount(folder), folder.exists()]
print(json.dumps(out))
"""


def _private_mount_namespace() -> bool:
    unshare = shutil.which("unshare")
    if unshare is None:
        return False
    probe = subprocess.run([unshare, "-m", "--propagation", "private", "true"], capture_output=True, check=False)
    return probe.returncode == 0


@pytest.fixture
def root() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="dlim", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.skipif(not _private_mount_namespace(), reason="no private mount namespace here (unshare -m refused)")
def test_claim_folder_is_a_tmpfs_of_the_given_size(root: Path) -> None:
    child = subprocess.run(
        ["unshare", "-m", "--propagation", "private", sys.executable, "-c", CHILD, str(root)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert child.returncode == 0, child.stderr[-2000:]
    out = json.loads(child.stdout.strip().splitlines()[-1])
    assert out["error"] == ""
    assert out["mounted"] and out["size"] == 1 << 20
    assert out["mode_gid"] == [0o770, 4242]
    assert out["fill"] == "ENOSPC", "a claim cannot write past its folder's size"
    assert not out["after_reboot_mounted"]
    assert out["repeat_error"] == "" and out["repeat_mounted"]
    assert out["unprepare"] == "" and out["after_unprepare"] == [False, False]


def test_a_driver_that_may_not_mount_refuses_to_start(tmp_path: Path, monkeypatch) -> None:
    from dralab.driver import limits
    from dralab.driver.claims import InMemoryClaimSource
    from dralab.driver.devices import BackendOptions
    from dralab.driver.devices.fake import FakeBackend
    from dralab.driver.library import stub_library
    from dralab.driver.state import DriverState
    from dralab.errors import UserError
    from dralab.model.vendors import load_vendor_table
    from dralab_kit.fixtures.driver_claims import NODE

    def refused(*args, **kwargs) -> None:
        raise OSError(1, "mounting: Operation not permitted")

    monkeypatch.setattr(limits, "mount_tmpfs", refused)  # what an unprivileged driver gets from mount(2)
    library = tmp_path / "lib" / "libvcore.so"
    library.parent.mkdir()
    library.write_bytes(stub_library())
    state = DriverState(
        vendor=load_vendor_table().get("ascend"),
        node=NODE,
        backend=FakeBackend.from_options(BackendOptions(node=NODE, state_dir=tmp_path / "s")),
        claims=InMemoryClaimSource(),
        cdi_dir=tmp_path / "cdi",
        state_dir=tmp_path / "s",
        library=library,
        boot_id="b",
        claim_dir_bytes=1 << 20,
    )
    with pytest.raises(UserError, match="--claim-dir-size needs a driver that may mount"):
        state.open()
