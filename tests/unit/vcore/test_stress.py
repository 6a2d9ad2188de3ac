"""Thread stress in one process, preloaded and in ThreadSanitizer / AddressSanitizer builds."""

from __future__ import annotations

import subprocess

import pytest

from dralab.vcore import build_dir, ensure_built

STRESS_ENV = {"CUDA_DEVICE_MEMORY_LIMIT_0": "64m", "VCORE_LOG": "error"}


def test_threads_hammering_every_entry_point_stay_within_the_quota(vc) -> None:
    proc = vc.run("t_stress", "8", "20000", env=STRESS_ENV)
    assert proc.returncode == 0, proc.stderr
    assert "ok" in proc.stdout


@pytest.mark.parametrize("sanitizer", ["tsan", "asan"])
def test_sanitizer_build_under_thread_stress(vc, sanitizer: str) -> None:
    ensure_built("sanitize")
    env = vc.env(STRESS_ENV, preload=False)
    env["TSAN_OPTIONS"] = "halt_on_error=1"
    proc = subprocess.run(
        [str(build_dir() / "san" / f"t_stress_{sanitizer}"), "8", "2000"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if "unexpected memory mapping" in proc.stderr:
        pytest.skip("ThreadSanitizer cannot run with this kernel's address-space layout")
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "Sanitizer" not in proc.stderr
    assert "ok" in proc.stdout
