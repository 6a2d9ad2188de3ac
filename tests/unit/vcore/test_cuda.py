"""CUDA and NVML in one process: quota, cuGetProcAddress through a dlopen'ed handle, virtual memory
info, pass-through without limits, configuration errors and logging."""

from __future__ import annotations

LIMIT = {"CUDA_DEVICE_MEMORY_LIMIT_0": "1024m"}


def test_every_memory_entry_point_counts_against_the_quota(vc) -> None:
    proc = vc.run("t_cuda", "quota", env=LIMIT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


def test_unsuffixed_limit_applies_to_every_device(vc, kv) -> None:
    proc = vc.run("t_cuda", "fill", "100", env={"CUDA_DEVICE_MEMORY_LIMIT": "1g"})
    assert proc.returncode == 0, proc.stderr
    assert kv(proc.stdout) == {"filled_mib": "1000", "total_mib": "1024", "free_mib": "24"}


def test_limit_suffixes_are_powers_of_1024_and_bare_numbers_are_bytes(vc, kv) -> None:
    for value, total in (("2048k", "2"), ("3G", "3072"), (str(5 * 1024 * 1024), "5")):
        proc = vc.run("t_cuda", "fill", "1", env={"CUDA_DEVICE_MEMORY_LIMIT_0": value})
        assert proc.returncode == 0, proc.stderr
        assert kv(proc.stdout)["total_mib"] == total
        assert kv(proc.stdout)["filled_mib"] == total


def test_cuda_runtime_path_through_dlopen_and_cugetprocaddress(vc) -> None:
    proc = vc.run("t_procaddr", env={"CUDA_DEVICE_MEMORY_LIMIT": "1g"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


def test_without_limits_every_lookup_returns_the_drivers_own_functions(vc) -> None:
    proc = vc.run("t_procaddr", "passthrough")
    assert proc.returncode == 0, proc.stderr


def test_without_limits_allocation_and_info_pass_through(vc) -> None:
    proc = vc.run("t_cuda", "passthrough")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert not vc.region.exists(), "pass-through must not create a shared region"


def test_nvml_memory_info_is_virtualised(vc) -> None:
    proc = vc.run("t_nvml", env=LIMIT)
    assert proc.returncode == 0, proc.stderr


def test_refusal_logs_one_line_with_request_used_and_limit(vc, kv) -> None:
    proc = vc.run("t_cuda", "fill", "300", env=LIMIT)
    assert proc.returncode == 0
    assert kv(proc.stdout)["filled_mib"] == "900"
    lines = proc.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].endswith(
        "warn: cuda memory quota exceeded on device 0: request 300 MiB, used 900 MiB, limit 1024 MiB"
    )


def test_logs_are_silent_when_asked_and_detailed_at_debug(vc) -> None:
    quiet = vc.run("t_cuda", "fill", "300", env={**LIMIT, "VCORE_LOG": "off"})
    assert quiet.stderr == ""
    debug = vc.run("t_cuda", "fill", "300", env={**LIMIT, "VCORE_LOG": "debug"})
    assert "reserved" in debug.stderr
    assert "shared region" in debug.stderr
    assert len(debug.stderr.splitlines()) > 3


def test_invalid_limit_refuses_every_allocation_with_a_clear_message(vc, kv) -> None:
    proc = vc.run("t_cuda", "fill", "1", env={"CUDA_DEVICE_MEMORY_LIMIT_0": "12x"})
    assert proc.returncode == 0
    assert kv(proc.stdout)["filled_mib"] == "0"
    assert "invalid CUDA_DEVICE_MEMORY_LIMIT_0=12x" in proc.stderr


def test_vcore_disable_turns_everything_off_in_debug_builds_only(vc, kv) -> None:
    debug = {**LIMIT, "VCORE_DISABLE": "1", "LD_PRELOAD": str(vc.build / "debug" / "libvcore.so")}
    assert kv(vc.run("t_cuda", "fill", "1000", env=debug).stdout)["filled_mib"] == "21000"
    release = vc.run("t_cuda", "fill", "100", env={**LIMIT, "VCORE_DISABLE": "1"})
    assert kv(release.stdout)["filled_mib"] == "1000"
