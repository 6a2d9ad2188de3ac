"""``lifecycle.pinned_namespace``: a node's mount namespace keeps its number while pinned.

Why it matters: a CI run saw "processes in mnt:[N]" after a clean ``down``; the node's namespace
had died and a node of a parallel test got the same number. Each test here makes its own
namespaces with ``unshare --mount`` (a process whose command line names a temp "node folder"),
kills only the processes it started, and needs root like the real node.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from dralab.util import wait_for
from dralab_kit.cluster.node import lifecycle
from dralab_kit.cluster.node.paths import NodePaths

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="unshare --mount needs root"),
]

SLEEPER = "import sys, time; time.sleep(600)"


@contextlib.contextmanager
def _namespaced(*argv: str) -> Iterator[subprocess.Popen[bytes]]:
    """A process in a new mount namespace, once it is in it (its mnt link differs from ours) and runs ``argv``
    (unshare enters the namespace before its exec, and mid-exec the process's command line reads empty);
    killed after."""
    proc = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "--", *argv])
    try:
        own = os.readlink("/proc/self/ns/mnt")
        wait_for(lambda: _mntns(proc.pid) not in (None, own) and _cmdline(proc.pid)[:1] == [argv[0]], 10,
                 "the process in its own namespace, running its command", interval=0.01)
        yield proc
    finally:
        proc.kill()
        proc.wait()


def _cmdline(pid: int) -> list[str]:
    try:
        return [a.decode() for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if a]
    except OSError:
        return []


def _mntns(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt")
    except OSError:
        return None


def _node_folder(tmp_path: Path) -> NodePaths:
    paths = NodePaths("pin", "n0", tmp_path / "node")
    paths.root.mkdir()
    return paths


def _ready(paths: NodePaths, pid: int) -> None:
    """The holder's ready file, as ``dralab_kit.cluster.node.holder`` writes it."""
    paths.ns_ready.write_text(json.dumps({"pid": pid, "mntns": _mntns(pid)}))


def test_the_number_stays_the_nodes_while_pinned(tmp_path: Path) -> None:
    paths = _node_folder(tmp_path)
    with _namespaced(sys.executable, "-c", SLEEPER, str(paths.root)) as holder:
        _ready(paths, holder.pid)
        mntns = _mntns(holder.pid)
        with lifecycle.pinned_namespace(paths) as pinned:
            assert pinned == mntns
            holder.kill()
            holder.wait()
            assert lifecycle.namespace_pids(pinned) == []
            # the namespace is alive without a process: a namespace made now gets another number
            with _namespaced(sys.executable, "-c", SLEEPER) as other:
                assert _mntns(other.pid) != pinned
                assert lifecycle.namespace_pids(pinned) == []


def test_a_process_that_does_not_name_the_node_pins_nothing(tmp_path: Path) -> None:
    paths = _node_folder(tmp_path)
    with _namespaced(sys.executable, "-c", SLEEPER) as stranger:  # same kind of namespace, not the node's
        _ready(paths, stranger.pid)
        with lifecycle.pinned_namespace(paths) as pinned:
            assert pinned is None  # so nothing is killed or counted by that number


def test_without_a_ready_file_nothing_is_pinned(tmp_path: Path) -> None:
    with lifecycle.pinned_namespace(_node_folder(tmp_path)) as pinned:
        assert pinned is None
