"""Prepare/unprepare of Lab 20's claim A, with the CDI spec checked field by field against Step 6."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import yaml

from dralab.driver.cdi import ClaimRef, env_of
from dralab.driver.claims import InMemoryClaimSource
from dralab_kit.fixtures.driver_claims import CLAIM_A, CLAIM_A_UID, NAMESPACE, NODE, SHARE_A, lab20_claim

REF_A = ClaimRef(NAMESPACE, CLAIM_A, CLAIM_A_UID)
KIND = "k8s.ascend.project-hami.io/npu"
SPEC_NAME = f"k8s.ascend.project-hami.io-npu_{CLAIM_A_UID}.yaml"


def test_claim_a_spec_matches_lab20_step6(state, tmp_path: Path, library: Path) -> None:
    result = state.prepare([REF_A])[CLAIM_A_UID]
    assert result.error == ""
    assert sorted(p.name for p in (tmp_path / "cdi").iterdir()) == [
        SPEC_NAME,
        "k8s.ascend.project-hami.io-npu_common.yaml",
    ]
    spec = yaml.safe_load((tmp_path / "cdi" / SPEC_NAME).read_text())
    assert spec["kind"] == KIND
    [device] = spec["devices"]
    assert device["name"] == CLAIM_A_UID
    edits = device["containerEdits"]
    assert edits["env"] == [
        "ASCEND_VISIBLE_DEVICES=0",
        "NPU_MEM_QUOTA=8192",
        "NPU_PRIORITY=50",
        "NPU_GLOBAL_SHM_PATH=/hami-shared-region/0_global_registry",
        "NPU_LOCAL_SHM_PATH=/hami-vnpu-shmem/vnpu_local_shmem",
    ]
    nodes = {n["path"]: n["hostPath"] for n in edits["deviceNodes"]}
    assert list(nodes) == ["/dev/davinci0", "/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"]
    null = os.stat("/dev/null").st_rdev
    for host in nodes.values():
        st = os.stat(host)
        assert stat.S_ISCHR(st.st_mode) and st.st_rdev == null
    root = tmp_path / "state" / "ascend.project-hami.io"
    mounts = {m["containerPath"]: (m["hostPath"], m["options"][0]) for m in edits["mounts"]}
    assert mounts == {
        "/usr/local/dralab/lib": (str(library.parent), "ro"),
        "/etc/ld.so.preload": (str(root / "ld.so.preload"), "ro"),
        "/hami-vnpu-shmem": (str(root / "claims" / CLAIM_A_UID), "rw"),
        "/hami-shared-region/0_global_registry": (str(root / "shared" / "0_global_registry"), "rw"),
    }
    assert (root / "ld.so.preload").read_text() == "/usr/local/dralab/lib/libvcore.so\n"
    assert (root / "claims" / CLAIM_A_UID).is_dir()
    [dev] = result.devices
    assert dev.cdi_device_ids == (f"{KIND}={CLAIM_A_UID}",)
    assert (dev.pool_name, dev.device_name, dev.share_id, dev.request_names) == (NODE, "npu-0-0", SHARE_A, ("npu",))


def test_second_device_uses_its_physical_id(tmp_path: Path, make_state) -> None:
    claims = InMemoryClaimSource([lab20_claim(device="npu-1-0")])
    state = make_state(tmp_path, claims)
    state.prepare([REF_A])
    env = env_of(yaml.safe_load((tmp_path / "cdi" / SPEC_NAME).read_text()))
    assert env["ASCEND_VISIBLE_DEVICES"] == "2"
    assert env["NPU_GLOBAL_SHM_PATH"] == "/hami-shared-region/2_global_registry"


def test_zero_cores_means_no_priority(tmp_path: Path, make_state) -> None:
    state = make_state(tmp_path, InMemoryClaimSource([lab20_claim(cores="0", memory="4Gi")]))
    state.prepare([REF_A])
    env = env_of(yaml.safe_load((tmp_path / "cdi" / SPEC_NAME).read_text()))
    assert env["NPU_MEM_QUOTA"] == "4096"
    assert "NPU_PRIORITY" not in env


def test_no_consumed_capacity_gives_the_whole_device(tmp_path: Path, make_state) -> None:
    state = make_state(tmp_path, InMemoryClaimSource([lab20_claim(cores=None, memory=None, share=None)]))
    [dev] = state.prepare([REF_A])[CLAIM_A_UID].devices
    env = env_of(yaml.safe_load((tmp_path / "cdi" / SPEC_NAME).read_text()))
    assert env["NPU_MEM_QUOTA"] == "21525"
    assert "NPU_PRIORITY" not in env
    assert dev.share_id is None


def test_byte_count_memory_is_converted(tmp_path: Path, make_state) -> None:
    state = make_state(tmp_path, InMemoryClaimSource([lab20_claim(memory="8589934592")]))
    state.prepare([REF_A])
    assert env_of(yaml.safe_load((tmp_path / "cdi" / SPEC_NAME).read_text()))["NPU_MEM_QUOTA"] == "8192"


def test_repeat_prepare_is_idempotent_without_api(state, claims: InMemoryClaimSource) -> None:
    first = state.prepare([REF_A])[CLAIM_A_UID]
    claims.remove(NAMESPACE, CLAIM_A)  # a repeat must not need the API
    again = state.prepare([REF_A])[CLAIM_A_UID]
    assert again == first
    assert again.error == ""


def test_unprepare_removes_spec_and_dirs(state, tmp_path: Path) -> None:
    state.prepare([REF_A])
    assert state.unprepare([REF_A]) == {CLAIM_A_UID: ""}
    assert not (tmp_path / "cdi" / SPEC_NAME).exists()
    assert not (tmp_path / "state" / "ascend.project-hami.io" / "claims" / CLAIM_A_UID).exists()
    assert state.prepared_claims() == {}
    # the common spec stays: it belongs to the node, not to a claim
    assert (tmp_path / "cdi" / "k8s.ascend.project-hami.io-npu_common.yaml").exists()


def test_unprepare_of_unknown_claim_succeeds(state) -> None:
    assert state.unprepare([ClaimRef("ns", "nope", "uid-nope")]) == {"uid-nope": ""}


def test_two_claims_share_one_device(tmp_path: Path, make_state) -> None:
    claim_b = lab20_claim(uid="uid-b", name="claim-b", share="5554db84-1574-46bd-a3ea-0b7197fbbbda")
    state = make_state(tmp_path, InMemoryClaimSource([lab20_claim(), claim_b]))
    out = state.prepare([REF_A, ClaimRef(NAMESPACE, "claim-b", "uid-b")])
    assert {out[u].devices[0].device_name for u in out} == {"npu-0-0"}
    assert {out[u].devices[0].share_id for u in out} == {SHARE_A, "5554db84-1574-46bd-a3ea-0b7197fbbbda"}
    for uid in (CLAIM_A_UID, "uid-b"):
        env = env_of(yaml.safe_load((tmp_path / "cdi" / f"k8s.ascend.project-hami.io-npu_{uid}.yaml").read_text()))
        assert (env["NPU_MEM_QUOTA"], env["NPU_PRIORITY"], env["ASCEND_VISIBLE_DEVICES"]) == ("8192", "50", "0")


def test_metrics_count_prepares_and_errors(state) -> None:
    state.prepare([REF_A, ClaimRef(NAMESPACE, "missing", "uid-x")])
    text = state.metrics.render().decode()
    assert 'dralab_driver_calls_total{call="prepare",driver="ascend.project-hami.io",result="ok"} 1.0' in text
    assert 'dralab_driver_errors_total{call="prepare",driver="ascend.project-hami.io",reason="not_found"} 1.0' in text
    assert 'dralab_driver_prepared_claims{driver="ascend.project-hami.io"} 1.0' in text


def test_nvidia_claim_gets_hami_core_env(tmp_path: Path, library: Path) -> None:
    from dralab.driver.claims import allocated_claim
    from dralab.driver.devices import BackendOptions
    from dralab.driver.devices.fake import FakeBackend
    from dralab.driver.state import DriverState
    from dralab.model.vendors import load_vendor_table

    results = [
        {
            "request": "gpu",
            "driver": "hami-core-gpu.project-hami.io",
            "pool": "gpu-node-0",
            "device": d,
            "shareID": s,
            "consumedCapacity": c,
        }
        for d, s, c in (
            ("gpu-1", "s1", {"memory": "3Gi", "cores": "0"}),
            ("gpu-0", "s0", {"memory": "5000Mi", "cores": "30"}),
        )
    ]
    claims = InMemoryClaimSource([allocated_claim("ns", "g", "uid-g", results)])
    backend = FakeBackend.from_options(
        BackendOptions(node="gpu-node-0", state_dir=tmp_path / "s", devices_file="nvidia-gpus")
    )
    state = DriverState(
        vendor=load_vendor_table().get("nvidia"),
        node="gpu-node-0",
        backend=backend,
        claims=claims,
        cdi_dir=tmp_path / "cdi",
        state_dir=tmp_path / "s",
        library=library,
        boot_id="b",
    ).open()
    out = state.prepare([ClaimRef("ns", "g", "uid-g")])["uid-g"]
    assert [d.device_name for d in out.devices] == ["gpu-1", "gpu-0"]
    spec = yaml.safe_load((tmp_path / "cdi" / "k8s.hami-core-gpu.project-hami.io-gpu_uid-g.yaml").read_text())
    assert spec["kind"] == "k8s.hami-core-gpu.project-hami.io/gpu"
    assert spec["devices"][0]["containerEdits"]["env"] == [
        "CUDA_DEVICE_MEMORY_LIMIT_0=3072m",
        "CUDA_DEVICE_MEMORY_LIMIT_1=5000m",
        "CUDA_DEVICE_SM_LIMIT_1=30",
        "CUDA_DEVICE_MEMORY_SHARED_CACHE=/usr/local/vgpu/uid-g.cache",
    ]
    paths = [n["path"] for n in spec["devices"][0]["containerEdits"]["deviceNodes"]]
    assert paths == ["/dev/nvidia1", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia0"]
    targets = {m["containerPath"] for m in spec["devices"][0]["containerEdits"]["mounts"]}
    assert {"/usr/local/vgpu", "/etc/ld.so.preload", "/usr/local/dralab/lib"} == targets  # hami-core shares nothing


def test_mknod_refused_falls_back_to_dev_null_and_says_so(tmp_path: Path, make_state, claims, monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "mknod", refuse)
    state = make_state(tmp_path, claims)
    state.prepare([REF_A])
    spec = yaml.safe_load((tmp_path / "cdi" / SPEC_NAME).read_text())
    nodes = spec["devices"][0]["containerEdits"]["deviceNodes"]
    assert {n["hostPath"] for n in nodes} == {"/dev/null"}
    assert "mknod" in spec["annotations"]["dralab.io/notes"]
    assert "not permitted" in spec["annotations"]["dralab.io/notes"]


def test_missing_library_refuses_the_claim_and_writes_nothing(tmp_path: Path, claims) -> None:
    from dralab.driver.devices import BackendOptions
    from dralab.driver.devices.fake import FakeBackend
    from dralab.driver.state import DriverState
    from dralab.model.vendors import load_vendor_table

    state = DriverState(
        vendor=load_vendor_table().get("ascend"),
        node=NODE,
        backend=FakeBackend.from_options(BackendOptions(node=NODE, state_dir=tmp_path / "s")),
        claims=claims,
        cdi_dir=tmp_path / "cdi",
        state_dir=tmp_path / "s",
        library=tmp_path / "absent" / "libvcore.so",
        boot_id="b",
    ).open()
    result = state.prepare([REF_A])[CLAIM_A_UID]
    # fail closed: no spec without the library (it used to be written with a note, quotas not enforced)
    assert result.error.startswith(f"enforcement library {tmp_path / 'absent' / 'libvcore.so'} is missing")
    assert "driver.enforcement: none" in result.error
    assert result.devices == ()
    assert not (tmp_path / "cdi" / SPEC_NAME).exists()
    assert not (tmp_path / "s" / "ascend.project-hami.io" / "claims" / CLAIM_A_UID).exists()
    assert CLAIM_A_UID not in state.prepared_claims()


def test_compute_units_become_percent() -> None:
    from dralab.driver.devices import Device
    from dralab.driver.state import shares_of

    dev = Device("hygon", "hcu-0", "u", "K100", "K100", 64 * 2**30, 120, 0, 0)
    [share] = shares_of([{"device": "hcu-0", "consumedCapacity": {"cores": "30", "memory": "8Gi"}}], {"hcu-0": dev})
    assert share.cores == 25 and share.memory_bytes == 8 * 2**30
    [whole] = shares_of([{"device": "hcu-0"}], {"hcu-0": dev})
    assert whole.cores is None and whole.memory_bytes is None


def test_claim_group_owns_claim_dirs_and_shared_files(tmp_path: Path, claims, library: Path) -> None:
    from dralab.driver.devices import BackendOptions
    from dralab.driver.devices.fake import FakeBackend
    from dralab.driver.state import DriverState
    from dralab.model.vendors import load_vendor_table

    gid = 4242
    state = DriverState(
        vendor=load_vendor_table().get("ascend"),
        node=NODE,
        backend=FakeBackend.from_options(BackendOptions(node=NODE, state_dir=tmp_path / "s")),
        claims=claims,
        cdi_dir=tmp_path / "cdi",
        state_dir=tmp_path / "s",
        library=library,
        boot_id="b",
        claim_gid=gid,
    ).open()
    assert state.prepare([REF_A])[CLAIM_A_UID].error == ""
    claim_dir = state.claim_dir(CLAIM_A_UID)
    registry = state.shared_dir / "0_global_registry"
    assert (claim_dir.stat().st_gid, stat.S_IMODE(claim_dir.stat().st_mode)) == (gid, 0o770)
    assert (registry.stat().st_gid, stat.S_IMODE(registry.stat().st_mode)) == (gid, 0o660)


def test_claim_dirs_come_from_spares_made_ahead(state) -> None:
    from dralab.driver.state import SPARE_DIRS

    spare_root = state.root / ".spare"
    spares = {p.stat().st_ino for p in spare_root.iterdir()}
    assert len(spares) == SPARE_DIRS
    assert stat.S_IMODE(spare_root.stat().st_mode) == 0o700
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o770 for p in spare_root.iterdir())
    assert state.prepare([REF_A])[CLAIM_A_UID].error == ""
    assert state.claim_dir(CLAIM_A_UID).stat().st_ino in spares, "renamed into place, not made on the call"
    assert len(list(spare_root.iterdir())) == SPARE_DIRS - 1
    assert state.unprepare([REF_A]) == {CLAIM_A_UID: ""}
    assert len(list(spare_root.iterdir())) == SPARE_DIRS
