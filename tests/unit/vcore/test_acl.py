"""AscendCL: NPU_MEM_QUOTA in MiB, 207001 past it, aclrtGetMemInfo reporting the quota; the probe
replays Lab 20's Step 8 through dralab.vcore.run_probe."""

from __future__ import annotations

from dralab.vcore import run_probe

LAB20_CLAIM_ENV = {
    "ASCEND_VISIBLE_DEVICES": "0",
    "NPU_MEM_QUOTA": "8192",
    "NPU_PRIORITY": "50",
    "NPU_GLOBAL_SHM_PATH": "/hami-shared-region/0_global_registry",
    "NPU_LOCAL_SHM_PATH": "/hami-vnpu-shmem/vnpu_local_shmem",
}


def test_acl_quota_refusal_code_and_reported_total(vc) -> None:
    proc = vc.run("t_acl", env={"NPU_MEM_QUOTA": "8192"})
    assert proc.returncode == 0, proc.stderr
    assert "npu memory quota exceeded on device 0: request 2050 MiB, used 6150 MiB, limit 8192 MiB" in proc.stderr


def test_acl_without_quota_passes_through(vc) -> None:
    proc = vc.run("t_acl", "passthrough")
    assert proc.returncode == 0, proc.stderr


def test_probe_replays_lab20_step8(vcore_build, tmp_path) -> None:
    result = run_probe(LAB20_CLAIM_ENV, "ascend", [2050], region_dir=tmp_path)
    assert result.error is None, result.stderr
    assert result.granted_mib == [2050, 2050, 2050]
    assert result.refused is not None
    assert result.refused.code == 207001
    assert result.refusal is not None
    assert (result.refusal.request_mib, result.refusal.used_mib, result.refusal.limit_mib) == (2050, 6150, 8192)
    assert result.total_mib == 8192  # not the card's 21525
    assert result.info["at_refusal"].free_mib == 8192 - 6150
    assert result.info["after_free"].free_mib == 8192
    # The claim's container path was moved into the given directory.
    assert (tmp_path / "vnpu_local_shmem").exists()


def test_probe_on_nvidia_with_the_claims_limit(vcore_build) -> None:
    env = {"CUDA_DEVICE_MEMORY_LIMIT_0": "8192m", "CUDA_DEVICE_MEMORY_SHARED_CACHE": "/claims/x/vcore.cache"}
    result = run_probe(env, "nvidia", [4000, 4000, 1000])
    assert result.granted_mib == [4000, 4000]
    assert result.refused is not None and result.refused.code == 2
    assert result.total_mib == 8192


def test_probe_without_quota_reports_the_fake_card(vcore_build) -> None:
    result = run_probe({"VCORE_FAKE_TOTAL_MIB": "4096"}, "ascend", [1024])
    assert result.total_mib == 4096
    assert result.granted_mib == [1024] * 4
    assert result.refusal is None  # the fake card itself ran out, not a quota
