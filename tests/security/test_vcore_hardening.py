"""Attack 7: vcore's easy switches. The region file is private to the container's user, VCORE_DISABLE
works only in debug builds, a claim container without a usable limit fails closed and says so, and
devices beyond the 16th are limited like the first.

vcore stays a fair-share limiter for cooperating tenants (SECURITY.md): these close the easy
switches, not every bypass of an LD_PRELOAD library.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from dralab.vcore import build_dir, ensure_built, fake_runtime_dir, library_path

LIMIT = {"CUDA_DEVICE_MEMORY_LIMIT_0": "1024m"}


@pytest.fixture(scope="module")
def built() -> Path:
    ensure_built()
    return build_dir()


def run(built: Path, tmp: Path, *args: str, env: dict[str, str] | None = None, library: Path | None = None,
        umask: int = 0) -> subprocess.CompletedProcess[str]:
    full = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LD_LIBRARY_PATH": str(fake_runtime_dir()),
        "LD_PRELOAD": str(library or library_path()),
        "VCORE_FAKE_TOTAL_MIB": "21525",
        "CUDA_DEVICE_MEMORY_SHARED_CACHE": str(tmp / "region" / "vcore.cache"),
        **(env or {}),
    }
    return subprocess.run([str(built / "tests" / "t_cuda"), *args], env=full, capture_output=True, text=True,
                          timeout=60, check=False, preexec_fn=lambda: os.umask(umask))


def filled(proc: subprocess.CompletedProcess[str]) -> int:
    assert proc.returncode == 0, proc.stderr
    fields = dict(p.split("=", 1) for p in proc.stdout.split() if "=" in p)
    return int(fields["filled_mib"])


def test_region_file_and_directory_are_private_even_with_umask_0(built: Path, tmp_path: Path) -> None:
    assert filled(run(built, tmp_path, "fill", "100", env=LIMIT, umask=0)) == 1000
    region = tmp_path / "region" / "vcore.cache"
    assert stat.S_IMODE(region.stat().st_mode) == 0o600
    assert stat.S_IMODE(region.parent.stat().st_mode) & 0o077 == 0


def test_region_in_a_claim_group_directory_is_shared_with_the_group_only(built: Path, tmp_path: Path) -> None:
    """The driver makes a claim's directory 0770 for the claim's group: the region follows it (0660)."""
    (tmp_path / "region").mkdir(mode=0o770)
    (tmp_path / "region").chmod(0o770)
    assert filled(run(built, tmp_path, "fill", "100", env=LIMIT, umask=0o022)) == 1000
    assert stat.S_IMODE((tmp_path / "region" / "vcore.cache").stat().st_mode) == 0o660


def test_vcore_disable_is_ignored_by_the_release_library(built: Path, tmp_path: Path) -> None:
    proc = run(built, tmp_path, "fill", "100", env={**LIMIT, "VCORE_DISABLE": "1"})
    assert filled(proc) == 1000, "VCORE_DISABLE lifted the quota of a release build"
    assert "VCORE_DISABLE is ignored" in proc.stderr


def test_vcore_disable_works_in_the_debug_library(built: Path, tmp_path: Path) -> None:
    debug = built / "debug" / "libvcore.so"
    proc = run(built, tmp_path, "fill", "100", env={**LIMIT, "VCORE_DISABLE": "1"}, library=debug)
    assert filled(proc) > 1000


@pytest.mark.parametrize("limit", [None, "", "lots"])
def test_claim_container_without_a_usable_limit_fails_closed(built: Path, tmp_path: Path, limit: str | None) -> None:
    """The claim directory the driver mounts marks a claim container; there a missing limit refuses all."""
    claim_dir = tmp_path / "vgpu"
    claim_dir.mkdir()
    env = {"VCORE_CLAIM_DIRS": str(claim_dir)}
    if limit is not None:
        env["CUDA_DEVICE_MEMORY_LIMIT"] = limit
    proc = run(built, tmp_path, "fill", "100", env=env, library=built / "debug" / "libvcore.so")
    assert filled(proc) == 0
    assert "every allocation is refused" in proc.stderr


def test_release_library_ignores_the_claim_dir_override(built: Path, tmp_path: Path) -> None:
    """VCORE_CLAIM_DIRS is a test hook of debug builds: a tenant cannot point it away in production."""
    proc = run(built, tmp_path, "passthrough", env={"VCORE_CLAIM_DIRS": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("device", [16, 20, 63])
def test_devices_beyond_the_sixteenth_are_limited(built: Path, tmp_path: Path, device: int) -> None:
    env = {f"CUDA_DEVICE_MEMORY_LIMIT_{device}": "1024m", "VCORE_FAKE_DEVICES": "64"}
    assert filled(run(built, tmp_path, "filldev", str(device), "100", env=env)) == 1000


def test_device_beyond_what_vcore_tracks_is_refused_not_unlimited(built: Path, tmp_path: Path) -> None:
    env = {"CUDA_DEVICE_MEMORY_LIMIT": "1024m", "VCORE_FAKE_DEVICES": "80"}
    assert filled(run(built, tmp_path, "filldev", "70", "100", env=env)) == 0
