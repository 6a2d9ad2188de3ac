"""The build: warnings are errors, the library loads on glibc >= 2.17, and exports only its hooks."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from dralab.vcore import library_path, probe_path

pytestmark = pytest.mark.skipif(shutil.which("objdump") is None, reason="objdump (binutils) not installed")

HOOKS = {
    "dlsym",
    "cuGetProcAddress",
    "cuGetProcAddress_v2",
    "cuMemAlloc_v2",
    "cuMemAllocManaged",
    "cuMemAllocPitch_v2",
    "cuMemAllocAsync",
    "cuMemAllocAsync_ptsz",
    "cuMemAllocFromPoolAsync",
    "cuMemAllocFromPoolAsync_ptsz",
    "cuMemFree_v2",
    "cuMemFreeAsync",
    "cuMemFreeAsync_ptsz",
    "cuMemCreate",
    "cuMemRelease",
    "cuMemGetInfo_v2",
    "cuDeviceTotalMem_v2",
    "cuLaunchKernel",
    "cuLaunchKernel_ptsz",
    "cuLaunchKernelEx",
    "cuLaunchKernelEx_ptsz",
    "nvmlDeviceGetMemoryInfo",
    "nvmlDeviceGetMemoryInfo_v2",
    "aclrtMalloc",
    "aclrtMallocCached",
    "aclrtMallocAlign32",
    "aclrtFree",
    "aclrtGetMemInfo",
}


def _dynamic_symbols(path: Path) -> list[list[str]]:
    out = subprocess.run(["objdump", "-T", str(path)], capture_output=True, text=True, check=True).stdout
    return [line.split() for line in out.splitlines() if " DF " in line or " DO " in line]


def _glibc_versions(path: Path) -> dict[str, tuple[int, ...]]:
    versions = {}
    for row in _dynamic_symbols(path):
        for token in row:
            match = re.fullmatch(r"\(?GLIBC_([\d.]+)\)?", token)
            if match:
                versions[row[-1]] = tuple(int(x) for x in match[1].split("."))
    return versions


def test_library_needs_nothing_newer_than_glibc_2_17(vcore_build: Path) -> None:
    versions = _glibc_versions(library_path())
    assert versions, "objdump found no versioned glibc references"
    too_new = {sym: ver for sym, ver in versions.items() if ver > (2, 17)}
    assert too_new == {}
    # The dl* functions moved into libc in 2.34 under new versions: the old ones must be named.
    assert versions["dlvsym"] <= (2, 17)
    assert versions["dlopen"] <= (2, 17)
    assert versions["pthread_mutex_consistent"] <= (2, 17)


def test_library_keeps_libdl_and_libpthread_for_old_hosts(vcore_build: Path) -> None:
    out = subprocess.run(["objdump", "-p", str(library_path())], capture_output=True, text=True, check=True).stdout
    needed = re.findall(r"NEEDED\s+(\S+)", out)
    assert {"libdl.so.2", "libpthread.so.0", "libc.so.6"} <= set(needed)


def test_library_exports_exactly_its_hooks(vcore_build: Path) -> None:
    exported = {row[-1] for row in _dynamic_symbols(library_path()) if "*UND*" not in row}
    exported -= {"_init", "_fini"}
    assert exported == HOOKS


def test_probe_references_no_newer_dl_symbols(vcore_build: Path) -> None:
    versions = _glibc_versions(probe_path())
    assert versions["dlsym"] <= (2, 17)
    assert versions["dlopen"] <= (2, 17)
