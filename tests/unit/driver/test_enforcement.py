"""The enforcement env per profile (dralab.model.enforcement)."""

from __future__ import annotations

import pytest

from dralab.errors import UserError
from dralab.model.enforcement import DeviceShare, enforcement_env, layout, preload_entry

GIB = 2**30
TOTAL = 21525 * 2**20


def test_vnpu_claim_a() -> None:
    env = enforcement_env("hami-vnpu-core", [DeviceShare(0, 0, TOTAL, 8 * GIB, 50)])
    assert env == {
        "ASCEND_VISIBLE_DEVICES": "0",
        "NPU_MEM_QUOTA": "8192",
        "NPU_PRIORITY": "50",
        "NPU_GLOBAL_SHM_PATH": "/hami-shared-region/0_global_registry",
        "NPU_LOCAL_SHM_PATH": "/hami-vnpu-shmem/vnpu_local_shmem",
    }


def test_vnpu_zero_cores_omits_priority_and_whole_device_memory() -> None:
    env = enforcement_env("hami-vnpu-core", [DeviceShare(1, 2, TOTAL, None, 0)])
    assert env["NPU_MEM_QUOTA"] == "21525"
    assert env["ASCEND_VISIBLE_DEVICES"] == "2"
    assert "NPU_PRIORITY" not in env


def test_vnpu_several_devices() -> None:
    env = enforcement_env(
        "hami-vnpu-core", [DeviceShare(0, 0, TOTAL, 8 * GIB, 50), DeviceShare(1, 2, TOTAL, 4 * GIB, 30)]
    )
    assert env["ASCEND_VISIBLE_DEVICES"] == "0,2"
    assert env["NPU_MEM_QUOTA"] == "4096"
    assert env["NPU_PRIORITY"] == "30"


def test_hami_core_order_and_omissions() -> None:
    env = enforcement_env(
        "hami-core", [DeviceShare(1, 1, 24 * GIB, 3 * GIB, 0), DeviceShare(0, 0, 24 * GIB, 5 * GIB, 25)], "uid-9"
    )
    assert list(env.items()) == [
        ("CUDA_DEVICE_MEMORY_LIMIT_0", "3072m"),
        ("CUDA_DEVICE_MEMORY_LIMIT_1", "5120m"),
        ("CUDA_DEVICE_SM_LIMIT_1", "25"),
        ("CUDA_DEVICE_MEMORY_SHARED_CACHE", "/usr/local/vgpu/uid-9.cache"),
    ]


def test_memory_rounds_up_to_whole_mib() -> None:
    assert enforcement_env("hami-core", [DeviceShare(0, 0, GIB, 2**20 + 1, 10)])["CUDA_DEVICE_MEMORY_LIMIT_0"] == "2m"


def test_none_and_unknown_profiles() -> None:
    assert enforcement_env("none", [DeviceShare(0, 0, GIB)]) == {}
    assert enforcement_env("hami-core", []) == {}
    with pytest.raises(UserError, match="unknown enforcement profile"):
        enforcement_env("mystery", [DeviceShare(0, 0, GIB)])


def test_layout_and_preload() -> None:
    assert layout("hami-vnpu-core").claim_dir == "/hami-vnpu-shmem"
    assert layout("hami-vnpu-core").shared_dir == "/hami-shared-region"
    assert preload_entry("libvnpu.so") == "/usr/local/dralab/lib/libvnpu.so\n"
