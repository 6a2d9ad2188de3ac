"""Which processes are still running: the leftover check of the tests that take clusters down."""

from __future__ import annotations

import os
from pathlib import Path


def processes_naming(text: str) -> list[int]:
    """Pids, other than this process, whose command line contains ``text``: a cluster's components all
    name its folder (their state and logs), and so its name."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(int(proc.name))
    return found
