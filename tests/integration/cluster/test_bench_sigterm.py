"""A SIGTERM to a benchmark takes its throw-away cluster down, as Ctrl-C does.

Before, ``kill`` (or ``timeout``, or a cancelled CI job) ended ``dralab bench fleet`` at once and left
its fleet's apiserver, etcd, KWOK, drivers and stand-ins running. Here a 4-node fleet bench is sent
SIGTERM once its fleet is up; afterwards no process of that fleet may be left, and the size it was
measuring is written as interrupted.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from dralab_kit.cluster import build
from dralab_kit.cluster.api import down
from dralab_kit.cluster.node.lifecycle import describe_pid

from .processes import processes_naming

pytestmark = pytest.mark.integration

NODES = 4
UP_TIMEOUT_S = 300.0  # bring-up of a 4-node fleet: about 15 s on 2 idle cores
EXIT_TIMEOUT_S = 180.0


def test_sigterm_to_the_fleet_bench_takes_its_fleet_down(tmp_path: Path) -> None:
    if build.missing_binaries():
        pytest.skip("cluster binaries not built (`dralab cluster build`)")
    proc = subprocess.Popen(
        [sys.executable, "-m", "dralab.cli", "bench", "fleet", "--quick", "--sizes", str(NODES),
         "--lifecycle", "template", "--out", str(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    name = f"fleet{NODES}-{proc.pid % 100000}"  # the bench's own naming (dralab_kit.bench.fleet.measure_size)
    lines: list[str] = []
    up = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if "fleet up in" in line:
                up.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert up.wait(UP_TIMEOUT_S), f"the fleet never came up:\n{''.join(lines)}"
        assert processes_naming(name), f"no process of {name} runs after 'fleet up'"
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(EXIT_TIMEOUT_S)
        # the bench's `down` returned only once its processes had ended
        left = [describe_pid(pid) for pid in processes_naming(name)]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        down(name, keep_logs=False)  # an interrupted size keeps its logs for reading; not here
    reader.join(10)
    output = "".join(lines)
    assert not left, f"processes of {name} left running after SIGTERM:\n" + "\n".join(left) + f"\n{output}"
    assert rc == 0, output
    assert "interrupted" in output, output
    (row,) = json.loads((tmp_path / "fleet.json").read_text())["sizes"]
    assert row["interrupted"] is True and row["nodes"] == NODES
