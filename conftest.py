"""Root pytest configuration: loads the lab harness plugin (profiles, cluster fixtures, lab items),
and brings down every cluster this test run started.

Tests bring clusters up on demand (``ensure_cluster``: the local ``dralab``, the real node's
``dralab-node``, and clusters of their own for restarts and teardown) and share them between
tests and xdist workers, so no single test can take them down. The run that started a cluster
does, once at its very end: in the controlling process, after every worker has finished, whether
the run passed, failed or was interrupted. A cluster that was already up when the run began (a
developer's, from ``make lab``) is left as it was. ``DRALAB_KEEP_CLUSTERS=1`` keeps them all for
a post-mortem.
"""

from __future__ import annotations

import os

import pytest

pytest_plugins = ["harness.plugin"]

_STASH = pytest.StashKey[set[str]]()  # the clusters that were up when the run began


def _clusters() -> set[str]:
    from dralab_kit.cluster.api import list_clusters

    return set(list_clusters())


def pytest_sessionstart(session: pytest.Session) -> None:
    if not hasattr(session.config, "workerinput"):
        session.config.stash[_STASH] = _clusters()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if hasattr(session.config, "workerinput") or os.environ.get("DRALAB_KEEP_CLUSTERS"):
        return
    before = session.config.stash.get(_STASH, None)
    if before is None:
        return
    from dralab_kit.cluster.api import down

    for name in sorted(_clusters() - before):
        try:
            down(name)
        except Exception as exc:  # a failed teardown must not hide the test results; say so instead
            print(f"\nwarning: could not bring down cluster {name} started by this run: {exc}")

