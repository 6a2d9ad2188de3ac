"""Fixtures of the real-node tests: the `node` profile's cluster (a real kubelet + containerd + runc).

The cluster is the one ``dralab lab run ... --profile node`` uses (``dralab-node``), brought up or
reused under its lock; the node binaries are built first if missing (once per machine). Tests
that stop or restart the kubelet or containerd, or take a node down, use clusters of their own.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import filelock
import pytest

from dralab.kube import Kube
from dralab_kit.cluster import build
from dralab_kit.cluster.api import ClusterHandle, ensure_cluster
from dralab_kit.gobuild import cache_root

NODE_CLUSTER = "dralab-node"


def ensure_node_binaries() -> None:
    if build.missing_binaries() or build.missing_node_binaries():
        cache_root().mkdir(parents=True, exist_ok=True)
        with filelock.FileLock(str(cache_root() / ".cluster-build.lock")):
            build.build(progress=False, real_node=True)


@pytest.fixture(scope="session")
def node_cluster() -> ClusterHandle:
    ensure_node_binaries()
    return ensure_cluster(NODE_CLUSTER, real_node=True)


@pytest.fixture
def kube(node_cluster: ClusterHandle) -> Iterator[Kube]:
    client = node_cluster.kube()
    yield client
    client.close()


@pytest.fixture
def ns(kube: Kube) -> Iterator[str]:
    name = f"node-it-{uuid.uuid4().hex[:6]}"
    kube.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    kube.delete(f"/api/v1/namespaces/{name}", missing_ok=True)
