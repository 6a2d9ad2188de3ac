"""Fixtures of the security tier: every test here replays one attack against a real component.

Shared by the SECURITY (webhook, vcore, chart, Pulumi) and DRIVER test files. The cluster fixtures
below serve the tests marked ``integration``: the shared local cluster, brought up as
``tests/integration/conftest.py`` does, an admin API client and a throwaway namespace.
"""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The checkout's root (charts, infra, vcore live under it)."""
    return REPO_ROOT


@pytest.fixture(scope="session")
def cluster():
    """The shared local cluster (integration tests only): built and brought up or reused, as in tests/integration."""
    import os

    import filelock

    from dralab_kit.cluster import build
    from dralab_kit.cluster.api import ensure_cluster
    from dralab_kit.gobuild import cache_root

    if build.missing_binaries():
        cache_root().mkdir(parents=True, exist_ok=True)
        with filelock.FileLock(str(cache_root() / ".cluster-build.lock")):
            if build.missing_binaries():
                build.build(progress=False)
    return ensure_cluster(os.environ.get("DRALAB_TEST_CLUSTER", "dralab"))


@pytest.fixture(scope="session")
def kube(cluster):
    """The webhook's own API client with the cluster's admin identity."""
    from dralab.kube import Kube

    api = Kube.from_kubeconfig(cluster.kubeconfig)
    yield api
    api.close()


@pytest.fixture
def namespace(request: pytest.FixtureRequest, kube):
    """A fresh namespace for one test, deleted afterwards."""
    import uuid

    from dralab.kube.paths import namespace_path

    name = f"sec-{uuid.uuid4().hex[:8]}"
    kube.create(namespace_path(), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    kube.delete(namespace_path(name), missing_ok=True)
