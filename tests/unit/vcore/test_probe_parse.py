"""Pure parts of dralab.vcore: the probe's records and the environment it runs with."""

from __future__ import annotations

from pathlib import Path

import pytest

from dralab.errors import UserError
from dralab.vcore import fake_runtime_dir, library_path, parse_probe_output, probe_environment

STDOUT = """probe vendor=ascend device=0
runtime name=libascendcl.so
info when=before code=0 total_bytes=8589934592 free_bytes=8589934592 total_mib=8192.0 free_mib=8192.0
alloc n=1 request_mib=2050.0 code=0 granted=1 allocated_mib=2050.0
alloc n=2 request_mib=2050.0 code=207001 granted=0 allocated_mib=2050.0
info when=at_refusal code=0 total_bytes=8589934592 free_bytes=6442450944 total_mib=8192.0 free_mib=6142.0
result granted=1 refused=1 code=207001 allocated_mib=2050.0
"""
STDERR = "vcore[7]: warn: npu memory quota exceeded on device 0: request 2050 MiB, used 6150 MiB, limit 8192 MiB\n"


def test_parse_records_and_refusal_line() -> None:
    result = parse_probe_output(STDOUT, STDERR, 0, "ascend")
    assert result.granted_mib == [2050.0]
    assert result.refused is not None and result.refused.code == 207001
    assert result.total_mib == 8192.0 and result.free_mib == 8192.0
    assert result.info["at_refusal"].free_mib == 6142.0
    assert result.refusal is not None
    assert (result.refusal.request_mib, result.refusal.used_mib, result.refusal.limit_mib) == (2050, 6150, 8192)
    assert result.log_lines == [STDERR.strip()]
    assert result.error is None


def test_parse_failure_keeps_the_reason() -> None:
    result = parse_probe_output('probe vendor=nvidia device=0\nerror stage=dlopen message="nope"\n', "", 1, "nvidia")
    assert result.error is not None and "stage=dlopen" in result.error
    assert result.allocations == [] and result.total_mib is None


def test_environment_moves_the_region_and_preloads_the_library(tmp_path: Path) -> None:
    claim = {"NPU_MEM_QUOTA": "8192", "NPU_LOCAL_SHM_PATH": "/hami-vnpu-shmem/vnpu_local_shmem"}
    env = probe_environment(claim, "ascend", tmp_path)
    assert env["NPU_MEM_QUOTA"] == "8192"
    assert env["NPU_LOCAL_SHM_PATH"] == str(tmp_path / "vnpu_local_shmem")
    assert env["CUDA_DEVICE_MEMORY_SHARED_CACHE"] == str(tmp_path / "vcore-ascend.cache")
    assert env["LD_PRELOAD"] == str(library_path())
    assert env["LD_LIBRARY_PATH"].split(":")[0] == str(fake_runtime_dir())
    assert env["VCORE_FAKE_TOTAL_MIB"] == "21525"
    assert probe_environment({"VCORE_FAKE_TOTAL_MIB": "100"}, "nvidia", tmp_path)["VCORE_FAKE_TOTAL_MIB"] == "100"


def test_unknown_vendor_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="unknown vendor"):
        probe_environment({}, "tpu", tmp_path)
