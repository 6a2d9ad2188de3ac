"""The external programs an image build runs, checked before anything starts, and run with a log.

Every failure a user can fix (no root, buildah or mmdebstrap missing, a step that failed) is a
``UserError`` that names the fix or the log file holding the tool's output, never a traceback.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from dralab.errors import UserError

# program -> the Debian package that provides it
PACKAGES: dict[str, str] = {"buildah": "buildah", "mmdebstrap": "mmdebstrap"}


def require_root(euid: int | None = None) -> None:
    """buildah with chroot isolation and mmdebstrap's root mode need uid 0 (no subuid setup to get wrong)."""
    if (os.geteuid() if euid is None else euid) != 0:
        raise UserError(
            "dralab image build runs buildah (chroot isolation) and mmdebstrap as root: "
            "run it as root (e.g. sudo -E .venv/bin/dralab image build)"
        )


def require_linux(platform: str | None = None) -> None:
    if (platform or sys.platform) != "linux":
        raise UserError("dralab image build needs Linux (buildah and mmdebstrap); on other systems use docker buildx")


def find_program(name: str, which: Callable[[str], str | None] = shutil.which) -> str:
    """The path of ``name``, or a ``UserError`` with the ``apt-get install`` line that provides it."""
    path = which(name)
    if path is None:
        package = PACKAGES.get(name, name)
        raise UserError(f"{name} is not installed; dralab image build needs it: apt-get install -y {package}")
    return path


def run_logged(
    argv: Sequence[str],
    log: Path,
    what: str,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    on_line: Callable[[str], None] | None = None,
    hint: str = "",
) -> None:
    """Run ``argv`` with stdout and stderr appended to ``log``; ``on_line`` sees each output line.

    The log keeps the whole output (a build prints thousands of lines) while the terminal shows
    progress only; on failure the error quotes the last lines and names the log.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    tail: deque[str] = deque(maxlen=15)
    started = time.monotonic()
    with log.open("a", encoding="utf-8") as out:
        out.write(f"\n$ {' '.join(argv)}\n")
        out.flush()
        try:
            proc = subprocess.Popen(
                list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=dict(env) if env is not None else None, cwd=cwd, text=True, errors="replace", bufsize=1,
            )  # fmt: skip
        except OSError as exc:
            raise UserError(f"{what}: cannot run {argv[0]}: {exc}") from exc
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                out.write(line)
                tail.append(line.rstrip("\n"))
                if on_line is not None:
                    on_line(line.rstrip("\n"))
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        rc = proc.wait()
        out.write(f"# exit {rc} after {time.monotonic() - started:.1f}s\n")
    if rc != 0:
        last = "\n  ".join(tail)
        fix = f"\n{hint}" if hint else ""
        raise UserError(f"{what} failed (exit {rc}); its last lines:\n  {last}\nfull output: {log}{fix}")
