"""``dralab bench setup``: a newcomer's first ``make lab``, cold, phase by phase.

Runs the README's main job in a copy of nothing a previous run left: an empty dralab build
cache, an empty Go build cache and module cache, a new virtual environment and a new
``DRALAB_HOME``, all in a temp folder (the developer's own caches and clusters are not touched).
The phases are the Makefile's own targets, timed one by one: ``env`` (pip), ``vcore`` (gcc),
``binaries-local`` (Go builds, with each build's own time as the builder records it) and the
lab itself (``dralab lab run``: cluster bring-up, then Lab 20). The baseline, measured in the same
run, is the warm ``make lab`` right after: the same commands with every cache filled.

The Debian packages are not part of the timing (``scripts/system-packages`` runs first and
installs what is missing). Downloads go through the registries this machine reaches (PyPI, the
Go module proxy), so the figure includes them, as a newcomer's does.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import click

from dralab_kit import CHECKOUT
from dralab_kit.bench import DEFAULT_OUT
from dralab_kit.bench.common import write_result

PHASES = ("env", "vcore", "binaries-local", "lab")


def _repo() -> Path:
    root = CHECKOUT
    if not (root / "Makefile").is_file():
        raise click.ClickException("dralab bench setup runs in a checkout of dralab (it times its Makefile)")
    return root


def _phase(repo: Path, target: str, env: dict[str, str], log: Path) -> float:
    started = time.monotonic()
    with log.open("a") as out:
        out.write(f"\n==== make {target}\n")
        out.flush()
        proc = subprocess.run(["make", "-s", target], cwd=repo, env=env, stdout=out, stderr=subprocess.STDOUT,
                              check=False)
    seconds = time.monotonic() - started
    if proc.returncode != 0:
        raise click.ClickException(f"make {target} failed after {seconds:.0f}s (exit {proc.returncode}); see {log}")
    return round(seconds, 1)


def _builds(cache: Path) -> list[dict[str, Any]]:
    path = cache / "gobuild" / "build-times.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _run(repo: Path, root: Path, log: Path) -> dict[str, Any]:
    env = {
        **os.environ,
        "VENV": str(root / "venv"),
        "DRALAB_CACHE": str(root / "cache"),
        "DRALAB_HOME": str(root / "home"),
        "GOCACHE": str(root / "go-build"),
        "GOMODCACHE": str(root / "go-mod"),
    }
    phases = {target: _phase(repo, target, env, log) for target in PHASES}
    subprocess.run([str(root / "venv" / "bin" / "dralab"), "cluster", "down", "--all"], env=env, check=False,
                   capture_output=True)
    return {"phases_s": phases, "total_s": round(sum(phases.values()), 1), "builds": _builds(root / "cache")}


@click.command("setup")
@click.option("--out", default=DEFAULT_OUT, show_default=True, help="Folder for setup.json.")
def setup(out: str) -> None:
    """Time a cold `make lab` (empty caches, new venv) phase by phase, then a warm one as the baseline.

    \b
    Example:
      dralab bench setup --out bench/results
    """
    repo = _repo()
    with tempfile.TemporaryDirectory(prefix="dralab-bench-setup-") as tmp:
        root = Path(tmp)
        log = root / "make.log"
        cold = _run(repo, root, log)
        warm = _run(repo, root, log)  # the same caches, now full: the baseline
        # Go writes its module cache read-only: make it removable with the temp folder
        subprocess.run(["chmod", "-R", "u+w", str(root / "go-mod")], check=False)
        tail = log.read_text()[-4000:]
    result = {
        "main_job": "make lab",
        "cold": cold,
        "warm": {k: v for k, v in warm.items() if k != "builds"},
        "cold_over_warm": round(cold["total_s"] / warm["total_s"], 1) if warm["total_s"] else None,
        "log_tail": tail,
    }
    path = write_result(out, "setup", result)
    phases = ", ".join(f"{k} {v:.0f}s" for k, v in cold["phases_s"].items())
    click.echo(f"cold make lab {cold['total_s']:.0f}s ({phases}); warm {warm['total_s']:.0f}s")
    click.echo(str(path))
