"""The arm64 build (Lab 20's host is aarch64): cross-built, glibc 2.17 symbols only, and run under
qemu-user for the paths that differ by architecture (the dlsym trampoline, symbol binding).
Skipped where the cross compiler or qemu-aarch64 is not installed."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from dralab.vcore import ensure_built, source_dir

CROSS = "aarch64-linux-gnu-gcc"
SYSROOT = Path("/usr/aarch64-linux-gnu")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which(CROSS) is None or shutil.which("qemu-aarch64") is None or not SYSROOT.is_dir(),
        reason="needs aarch64-linux-gnu-gcc and qemu-aarch64 (apt-get install gcc-aarch64-linux-gnu qemu-user)",
    ),
]
BUILD = "build/arm64"
TARGETS = [f"{BUILD}/libvcore.so", f"{BUILD}/tests/t_cuda", f"{BUILD}/tests/t_procaddr", f"{BUILD}/tests/t_acl"]


@pytest.fixture(scope="module")
def arm64() -> Path:
    ensure_built(f"CC={CROSS}", f"BUILD={BUILD}", *TARGETS)
    return source_dir() / BUILD


def _run(arm64: Path, tmp_path: Path, program: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    cmd = ["qemu-aarch64", "-L", str(SYSROOT), "-E", f"LD_LIBRARY_PATH={arm64 / 'fake'}"]
    cmd += ["-E", f"LD_PRELOAD={arm64 / 'libvcore.so'}"]
    for key, value in {
        **env,
        "CUDA_DEVICE_MEMORY_SHARED_CACHE": str(tmp_path / "r"),
        "NPU_LOCAL_SHM_PATH": str(tmp_path / "n"),
    }.items():
        cmd += ["-E", f"{key}={value}"]
    return subprocess.run([*cmd, str(arm64 / "tests" / program), *args], capture_output=True, text=True, timeout=60)


def test_arm64_library_needs_only_glibc_2_17(arm64: Path) -> None:
    objdump = shutil.which("aarch64-linux-gnu-objdump") or "objdump"
    out = subprocess.run([objdump, "-T", str(arm64 / "libvcore.so")], capture_output=True, text=True, check=True)
    versions = set(re.findall(r"GLIBC_([\d.]+)", out.stdout))
    assert versions == {"2.17"}


@pytest.mark.parametrize(
    ("program", "args", "env"),
    [
        ("t_cuda", ["quota"], {"CUDA_DEVICE_MEMORY_LIMIT_0": "1024m"}),
        ("t_procaddr", [], {"CUDA_DEVICE_MEMORY_LIMIT": "1g"}),
        ("t_procaddr", ["passthrough"], {}),
        ("t_acl", [], {"NPU_MEM_QUOTA": "8192"}),
    ],
)
def test_arm64_build_enforces_under_qemu(arm64: Path, tmp_path: Path, program: str, args: list[str], env) -> None:
    proc = _run(arm64, tmp_path, program, *args, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"
