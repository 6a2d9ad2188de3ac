"""Whether a folder's list of entries can have changed since it was last checked (one ``stat``).

The driver checks every few seconds that the CDI specs of its running claims still exist
(``DriverState.restore_specs``). Listing the folder and comparing it with the checkpoint on every
pass costs time in proportion to the claims; on a fleet's shard of nodes that was the driver's
largest periodic cost. Creating, removing or renaming an entry sets the folder's mtime and ctime,
and replacing the folder (a fresh tmpfs, ``rm -rf`` and ``mkdir``) changes its device or inode, so an
unchanged stamp means the entries are the ones the last full check saw.

Timestamps come from the kernel's coarse clock: a change in the same tick as the check can leave
the time as it was. A stamp is therefore trusted only when the folder last changed at least
:data:`SETTLE_NS` before it was taken; a folder that changed more recently is checked in full
again next time. That makes the skip safe against changes made while the check was running.
"""

from __future__ import annotations

import os
import stat as stat_mode
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

SETTLE_NS = 2_000_000_000  # above a coarse clock tick (1 to 10 ms) and a filesystem's 1 s time granularity


@dataclass(frozen=True)
class Stamp:
    """What identifies a folder's entries: where it lives and when they last changed."""

    device: int
    inode: int
    mtime_ns: int
    ctime_ns: int

    def settled(self, now_ns: int) -> bool:
        """The folder last changed long enough ago that its times will move on any further change."""
        return now_ns - max(self.mtime_ns, self.ctime_ns) >= SETTLE_NS


def stamp(folder: Path) -> Stamp | None:
    """The folder's stamp, None where it does not exist (or is not a folder)."""
    try:
        st = os.stat(folder)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if not stat_mode.S_ISDIR(st.st_mode):
        return None
    return Stamp(st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)


class UnchangedSince:
    """Remembers one folder's stamp after a full check found everything in place.

    ``unchanged()`` answers whether the next check may be skipped; ``checked(stamp)`` records a
    full check that found nothing missing, with the stamp taken *before* that check's listing.
    """

    def __init__(self, folder: Path, clock_ns: Callable[[], int] = time.time_ns) -> None:
        self.folder = folder
        self.clock_ns = clock_ns  # the wall clock, as the kernel stamps files with it
        self._verified: Stamp | None = None

    def unchanged(self) -> tuple[bool, Stamp | None]:
        """Whether the folder is as the last good check saw it, and its stamp now (for ``checked``)."""
        now = stamp(self.folder)
        return now is not None and now == self._verified, now

    def checked(self, before: Stamp | None) -> None:
        """A full check, begun at stamp ``before``, found everything: skip checks while it holds."""
        self._verified = before if before is not None and before.settled(self.clock_ns()) else None

    def forget(self) -> None:
        """Check in full next time (something was missing, or the check failed)."""
        self._verified = None
