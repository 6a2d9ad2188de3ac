"""``lifecycle.pinned_namespace``: a node's mount namespace keeps its number while pinned.

Why it matters: a CI run saw "processes in mnt:[N]" after a clean ``down``; the node's namespace
had died and a node of a parallel test got the same number. Each test here makes its own
namespaces with ``unshare --mount`` (a process whose command line names a temp "node folder"),
kills only the processes it started, and needs root like the real node.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from dralab.cluster.node import lifecycle
from dralab.cluster.node.paths import NodePaths
from dralab.util import wait_for

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="unshare --mount needs root"),
]

SLEEPER = "import sys, time; time.sleep(600)"


def _namespaced(*argv: str) -> subprocess.Popen[bytes]:
    """A process in a new mount namespace; waits until it is in it (its mnt link differs from ours)."""
    proc = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "--", *argv])
    own = os.readlink("/proc/self/ns/mnt")
    wait_for(lambda: _mntns(proc.pid) not in (None, own), 10, "the process in its own namespace", interval=0.01)
    return proc


def _mntns(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt")
    except OSError:
        return None


@pytest.fixture
def node(tmp_path: Path) -> Iterator[tuple[NodePaths, subprocess.Popen[bytes]]]:
    paths = NodePaths("pin", "n0", tmp_path / "node")
    paths.root.mkdir()
    proc = _namespaced(sys.executable, "-c", SLEEPER, str(paths.root))
    paths.ns_ready.write_text(f'{{"pid": {proc.pid}, "mntns": "{_mntns(proc.pid)}"}}')
    yield paths, proc
    proc.kill()
    proc.wait()


def test_the_number_stays_the_nodes_while_pinned(node: tuple[NodePaths, subprocess.Popen[bytes]]) -> None:
    paths, proc = node
    mntns = _mntns(proc.pid)
    with lifecycle.pinned_namespace(paths) as pinned:
        assert pinned == mntns
        proc.kill()
        proc.wait()
        assert lifecycle.namespace_pids(pinned) == []
        # the namespace is alive without a process: a namespace made now gets another number
        other = _namespaced(sys.executable, "-c", SLEEPER)
        try:
            assert _mntns(other.pid) != pinned
            assert lifecycle.namespace_pids(pinned) == []
        finally:
            other.kill()
            other.wait()


def test_a_process_that_does_not_name_the_node_pins_nothing(tmp_path: Path) -> None:
    paths = NodePaths("pin", "n0", tmp_path / "node")
    paths.root.mkdir()
    stranger = _namespaced(sys.executable, "-c", SLEEPER)  # same kind of namespace, not the node's
    try:
        paths.ns_ready.write_text(f'{{"pid": {stranger.pid}, "mntns": "{_mntns(stranger.pid)}"}}')
        with lifecycle.pinned_namespace(paths) as pinned:
            assert pinned is None  # so nothing is killed or counted by that number
    finally:
        stranger.kill()
        stranger.wait()


def test_without_a_ready_file_nothing_is_pinned(tmp_path: Path) -> None:
    paths = NodePaths("pin", "n0", tmp_path / "node")
    paths.root.mkdir()
    with lifecycle.pinned_namespace(paths) as pinned:
        assert pinned is None
