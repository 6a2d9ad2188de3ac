"""Benchmark result files: every figure travels with the context it was measured in.

A result is ``<out>/<name>.json``: the benchmark's own figures plus ``context`` (commit, date,
cores, load average at start and end, kernel, Python and Go versions, quick or full run and the
command line), so a reader can judge a number on a shared, loaded machine and a report can say
when and where it was taken. ``bench/results/`` holds the files behind ``bench/REPORT.md``.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dralab.util import atomic_write
from dralab_kit import CHECKOUT


@dataclass
class RunStart:
    """What is known when a benchmark starts (the end is read when it writes its result)."""

    started: float = field(default_factory=time.time)
    load_average: list[float] = field(default_factory=lambda: _loadavg())
    argv: list[str] = field(default_factory=lambda: list(sys.argv))


_start: RunStart | None = None


def mark_start() -> RunStart:
    """Record the start of a benchmark run (the ``dralab bench`` group calls it before each benchmark)."""
    global _start
    _start = RunStart()
    return _start


def _loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _git(*args: str) -> str | None:
    root = CHECKOUT
    try:
        proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def go_version() -> str | None:
    """``go version`` of the Go that dralab builds with, or None where there is none."""
    try:
        from dralab_kit.gobuild.toolchain import find_go

        return find_go(None).version_text
    except Exception:  # no Go, or a Go too old to use: the context says so instead of failing the run
        return None


def context(quick: bool | None, start: RunStart | None = None) -> dict[str, Any]:
    """Where and when a result was measured; ``quick`` says whether it was the reduced (``--quick``) run."""
    begun = start or _start or RunStart()
    commit = _git("rev-parse", "HEAD")
    dirty = _git("status", "--porcelain", "--untracked-files=no")
    return {
        "commit": commit,
        "dirty": bool(dirty) if dirty is not None else None,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(begun.started)),
        "duration_s": round(time.time() - begun.started, 1),
        "cores": len(os.sched_getaffinity(0)),
        "load_average": {"start": begun.load_average, "end": _loadavg()},
        "kernel": platform.release(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "go": go_version(),
        "run": "quick" if quick else ("full" if quick is not None else "unknown"),
        "command": " ".join(["dralab", *begun.argv[1:]]) if begun.argv else None,
    }


def _quick_from_click() -> bool | None:
    """The running benchmark command's ``--quick`` flag, when it has one."""
    import click

    ctx = click.get_current_context(silent=True)
    while ctx is not None:
        if "quick" in ctx.params:
            return bool(ctx.params["quick"])
        ctx = ctx.parent
    return None


def write_result(out_dir: str | Path, name: str, data: dict[str, Any], *, quick: bool | None = None) -> Path:
    """Write ``<out_dir>/<name>.json``: ``data`` with ``benchmark``, ``measured_at`` and ``context`` added."""
    if quick is None:
        quick = data.get("quick") if isinstance(data.get("quick"), bool) else _quick_from_click()
    ctx = context(quick)
    payload = {
        "benchmark": name,
        "measured_at": ctx["date"],
        "context": ctx,
        "machine": {"cpus": ctx["cores"], "python": ctx["python"], "platform": platform.platform()},
        **data,
    }
    path = Path(out_dir) / f"{name}.json"
    atomic_write(path, json.dumps(payload, indent=2, sort_keys=False) + "\n")
    return path


VERSIONED_GLOB = "kubernetes-v*"  # sub-folders of results measured on another Kubernetes than the default
VERSION_MARK = "@"  # "fleet@v1.37.2": the fleet result of the folder kubernetes-v1.37.2


def versioned_folders(folder: Path) -> dict[str, Path]:
    """``folder``'s ``kubernetes-vX.Y.Z`` sub-folders by version: results of the same benchmarks run on
    another Kubernetes version than the default, reported beside the default's, never mixed in."""
    return {sub.name.removeprefix("kubernetes-"): sub
            for sub in sorted(folder.glob(VERSIONED_GLOB)) if sub.is_dir()}


def load_versioned(folder: Path) -> dict[str, dict[str, Any]]:
    """The results of :func:`versioned_folders`, each as ``<name>@vX.Y.Z``."""
    return {f"{name}{VERSION_MARK}{version}": data
            for version, sub in versioned_folders(folder).items() for name, data in load_results(sub).items()}


def load_results(folder: Path) -> dict[str, dict[str, Any]]:
    """Every ``<name>.json`` in ``folder``, by name."""
    from dralab.errors import UserError

    if not folder.is_dir():
        raise UserError(f"results folder {folder} not found; run a benchmark with --out {folder} first")
    out = {}
    for path in sorted(folder.glob("*.json")):
        try:
            out[path.stem] = json.loads(path.read_text())
        except ValueError as exc:
            raise UserError(f"{path} is not valid JSON ({exc}); rerun the benchmark that wrote it") from None
    return out
