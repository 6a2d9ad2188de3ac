"""Size-limited claim folders: a tmpfs of a fixed size mounted on a claim's own folder.

A bind mount cannot cap what a container writes into a host folder, so without this a claim can
fill the disk that holds the driver's state. Where the driver may mount (``CAP_SYS_ADMIN``, and
its state folder shared with the host through bidirectional mount propagation, so the container
runtime's bind mount of the claim folder sees the tmpfs), ``--claim-dir-size`` gives every claim
folder its own tmpfs: writes past the size fail with ENOSPC inside that claim only. The mount
carries ``nosuid,nodev,noexec``, the claim folder's mode and group, and an inode cap in
proportion to its size.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from pathlib import Path

MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MNT_DETACH = 0x2

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def mount_tmpfs(path: Path, size_bytes: int, mode: int, gid: int | None = None) -> None:
    """Mount a tmpfs of ``size_bytes`` on ``path`` (OSError when not permitted)."""
    options = f"size={size_bytes},nr_inodes={max(64, size_bytes // 16384)},mode={mode:o}"
    if gid is not None:
        options += f",gid={gid}"
    _check(
        _libc.mount(b"tmpfs", os.fsencode(path), b"tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, options.encode()),
        f"mounting a {size_bytes}-byte tmpfs on {path}",
    )


def unmount(path: Path) -> None:
    """Detach whatever is mounted on ``path`` (a container still using it keeps it until it ends)."""
    _check(_libc.umount2(os.fsencode(path), MNT_DETACH), f"unmounting {path}")


def is_mount(path: Path) -> bool:
    return os.path.ismount(path)
