"""The cuLaunchKernel throttle on the fake runtime (kernels take a simulated 1 ms each).

Only a loose smoke bound of the duty cycle against the fake device is checked here: accuracy (within
5 percentage points at 25/50/75 %) is judged by `dralab bench vcore`. How well it bounds real SM use is
for the GPU check (vcore/gpu/) and has not been measured.
"""

from __future__ import annotations

import pytest

KERNELS = {"VCORE_FAKE_KERNEL_US": "1000", "VCORE_SM_MAX_QUEUED": "10", "VCORE_SM_WINDOW_MS": "20"}


def _busy_share(vc, kv, extra: dict[str, str]) -> float:
    proc = vc.run("t_throttle", "100", env={**KERNELS, **extra})
    assert proc.returncode == 0, proc.stderr
    result = kv(proc.stdout)
    return int(result["busy_ns"]) / int(result["wall_ns"])


@pytest.mark.parametrize("limit", [25, 50])
def test_sm_limit_bounds_the_device_duty_cycle(vc, kv, limit: int) -> None:
    share = _busy_share(vc, kv, {"CUDA_DEVICE_SM_LIMIT_0": str(limit)})
    # The upper bound is the promise (machine load only lowers the share); the lower bound only
    # guards against throttling far too hard.
    assert share <= limit / 100 + 0.05
    assert share >= limit / 100 * 0.4


def test_no_sm_limit_no_throttle(vc, kv) -> None:
    assert _busy_share(vc, kv, {}) > 0.5


def test_throttle_can_be_switched_off(vc, kv) -> None:
    assert _busy_share(vc, kv, {"CUDA_DEVICE_SM_LIMIT_0": "25", "VCORE_SM_THROTTLE": "0"}) > 0.5
