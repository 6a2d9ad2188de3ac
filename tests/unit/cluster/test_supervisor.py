"""Process supervision: start detached, recognise the process by pid and start time, stop it."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from dralab_kit.cluster.supervisor import (
    ProcRecord,
    is_alive,
    log_tail,
    parse_stat,
    reap_exited,
    rss_bytes,
    start_process,
    stop_process,
)


def test_parse_stat_handles_odd_command_names():
    fields = " ".join(["S", *["0"] * 18, "123456", "0"])
    assert parse_stat(f"42 (weird ) name) {fields}") == ("S", 123456)


def test_start_stop_and_pid_identity(tmp_path):
    log = tmp_path / "logs" / "sleeper.log"
    rec = start_process([sys.executable, "-c", "import time; print('hello', flush=True); time.sleep(60)"], log)
    try:
        assert is_alive(rec)
        assert rss_bytes(rec) > 0
        assert ProcRecord.from_json(rec.to_json()) == rec
        impostor = dataclasses.replace(rec, ticks=rec.ticks + 1)
        assert not is_alive(impostor), "a recycled pid must not count as the component"
        assert stop_process(impostor) is False, "and must never be signalled"
        assert is_alive(rec)
    finally:
        assert stop_process(rec, timeout=5) is True
    assert not is_alive(rec)
    assert stop_process(rec) is False
    text = log.read_text()
    assert "starting:" in text
    assert "hello" in log_tail(log)


def test_a_process_ignoring_sigterm_is_killed(tmp_path):
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(60)"
    log = tmp_path / "stubborn.log"
    rec = start_process([sys.executable, "-c", code], log)
    from dralab.util import wait_for

    wait_for(lambda: "up" in log_tail(log), 10, "child to install its handler")
    assert stop_process(rec, timeout=0.3) is True
    assert not is_alive(rec)


def test_log_tail_of_missing_file(tmp_path):
    assert log_tail(tmp_path / "nope.log") == ""


def _state(pid: int) -> str | None:
    try:
        return parse_stat(Path(f"/proc/{pid}/stat").read_text())[0]
    except OSError:
        return None


def test_a_child_that_exited_unwatched_is_reaped_not_left_defunct(tmp_path):
    from dralab.util import wait_for

    rec = start_process([sys.executable, "-c", "pass"], tmp_path / "brief.log")
    wait_for(lambda: _state(rec.pid) == "Z", 10, "the child to exit")  # nothing of ours has polled it yet
    assert reap_exited() >= 1
    assert _state(rec.pid) is None, "reaped: gone from the process table"
    assert not is_alive(rec)


def test_is_alive_reaps_the_zombie_it_sees(tmp_path):
    from dralab.util import wait_for

    rec = start_process([sys.executable, "-c", "pass"], tmp_path / "brief.log")
    wait_for(lambda: _state(rec.pid) == "Z", 10, "the child to exit")
    assert not is_alive(rec)
    assert _state(rec.pid) is None
