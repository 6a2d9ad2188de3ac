"""The shared region across processes: racing processes never overshoot, a SIGKILLed process's
share comes back, a dead lock holder does not hang anyone, bad region files are refused clearly."""

from __future__ import annotations

import signal
import struct

LIMIT = {"CUDA_DEVICE_MEMORY_LIMIT_0": "1024m"}
MAGIC = b"vcoreRG1"


def test_eight_racing_processes_never_exceed_the_quota(vc, kv, tmp_path) -> None:
    proc = vc.run("t_race", "8", str(tmp_path / "race.state"), env={**LIMIT, "VCORE_LOG": "error"}, timeout=60)
    assert proc.returncode == 0, proc.stderr
    result = kv(proc.stdout)
    assert result["failed"] == "0"
    assert result["filled_mib"] == "1024"  # together they got exactly the quota
    assert float(result["max_outstanding_mib"]) <= 1024
    assert int(result["refused"]) > 0, "the churn phase should have contended for the quota"
    assert result["free_mib_after"] == "1024"  # every share given back


def test_normal_exit_gives_the_share_back_at_once(vc, kv) -> None:
    env = {**LIMIT, "VCORE_LOG": "info"}
    first = vc.run("t_cuda", "fill", "100", env=env)
    second = vc.run("t_cuda", "fill", "100", env=env)
    assert kv(first.stdout)["filled_mib"] == kv(second.stdout)["filled_mib"] == "1000"
    assert "reclaimed" not in second.stderr


def test_share_of_a_sigkilled_process_is_reclaimed(vc, kv) -> None:
    holder = vc.start("t_cuda", "hold", "700", env=LIMIT)
    try:
        assert holder.stdout.readline().strip() == "held"
        during = vc.run("t_cuda", "fill", "100", env={**LIMIT, "VCORE_LOG": "off"})
        assert kv(during.stdout)["filled_mib"] == "300"
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.communicate()
    after = vc.run("t_cuda", "fill", "100", env={**LIMIT, "VCORE_LOG": "info"})
    assert kv(after.stdout)["filled_mib"] == "1000"
    assert f"reclaimed {700 * 1024 * 1024} bytes held by dead process {holder.pid}" in after.stderr


def test_lock_held_by_a_dead_process_is_recovered(vc, kv) -> None:
    holder = vc.run("t_lockholder", str(vc.region), preload=False, timeout=10)
    assert holder.stdout.strip() == "locked"
    assert holder.returncode == -signal.SIGKILL
    after = vc.run("t_cuda", "fill", "100", env={**LIMIT, "VCORE_LOG": "info"}, timeout=10)
    assert after.returncode == 0, after.stderr
    assert kv(after.stdout)["filled_mib"] == "1000"
    assert "recovered the region lock" in after.stderr


def test_corrupt_region_refuses_allocations_and_says_how_to_fix_it(vc, kv) -> None:
    vc.region.write_bytes(b"not a region " * 1000)
    proc = vc.run("t_cuda", "fill", "100", env=LIMIT)
    assert kv(proc.stdout)["filled_mib"] == "0"
    assert "is corrupt (bad magic" in proc.stderr
    assert "remove the file" in proc.stderr
    assert vc.region.read_bytes().startswith(b"not a region"), "the file must be left as found"


def test_region_of_another_layout_version_is_refused(vc, kv) -> None:
    vc.run("t_cuda", "fill", "1000", env=LIMIT)  # creates a valid region
    data = bytearray(vc.region.read_bytes())
    assert data[:8] == MAGIC
    data[8:12] = struct.pack("<I", 99)
    vc.region.write_bytes(bytes(data))
    proc = vc.run("t_cuda", "fill", "100", env=LIMIT)
    assert kv(proc.stdout)["filled_mib"] == "0"
    assert "made by another vcore version (layout version 99" in proc.stderr


def test_truncated_region_is_refused(vc, kv) -> None:
    vc.region.write_bytes(MAGIC)
    proc = vc.run("t_cuda", "fill", "100", env=LIMIT)
    assert kv(proc.stdout)["filled_mib"] == "0"
    assert "is corrupt (too short)" in proc.stderr


def test_unwritable_region_directory_refuses_with_the_path(vc, kv, tmp_path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    proc = vc.run(
        "t_cuda", "fill", "100", env={**LIMIT, "CUDA_DEVICE_MEMORY_SHARED_CACHE": str(blocker / "sub" / "x.cache")}
    )
    assert kv(proc.stdout)["filled_mib"] == "0"
    assert f"shared region {blocker}/sub/x.cache: cannot open" in proc.stderr


def test_exec_starts_the_new_image_with_an_empty_share(vc, kv) -> None:
    # Same pid and start time after exec: the old image's slot must not keep its 500 MiB.
    proc = vc.run("t_cuda", "exec", "500", env={**LIMIT, "VCORE_LOG": "off"})
    assert proc.returncode == 0, proc.stderr
    assert kv(proc.stdout)["filled_mib"] == "1000"


def test_forked_child_has_its_own_share_and_leaves_the_parents_alone(vc) -> None:
    proc = vc.run("t_cuda", "fork", "600", env={**LIMIT, "VCORE_LOG": "off"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["child_filled_mib=400", "parent_free_mib=424"]
