"""Fixtures of the integration tier: one local cluster shared by every test and every xdist worker.

``cluster`` builds the binaries if they are missing (once per machine, under a lock) and brings
the cluster up or reuses it (``ensure_cluster`` is file-locked, so workers share one cluster).
A cluster this run started is brought down at the run's end (the root ``conftest.py``); one that
was up before it is reused and left running. Set DRALAB_TEST_CLUSTER to use another cluster name.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator

import filelock
import pytest

from dralab_kit.cluster import build
from dralab_kit.cluster.api import ClusterHandle, ensure_cluster
from dralab_kit.gobuild import cache_root


def _cluster_name() -> str:
    return os.environ.get("DRALAB_TEST_CLUSTER", "dralab")


@pytest.fixture(scope="session")
def cluster() -> ClusterHandle:
    """The shared local cluster (brought up or reused)."""
    if build.missing_binaries():
        cache_root().mkdir(parents=True, exist_ok=True)
        with filelock.FileLock(str(cache_root() / ".cluster-build.lock")):
            if build.missing_binaries():
                build.build(progress=False)
    return ensure_cluster(_cluster_name())


@pytest.fixture(scope="session")
def k8s_client(cluster: ClusterHandle):
    """A typed ``kubernetes.client.ApiClient`` with the cluster's admin identity.

    Loaded by dralab.kube: the official loader would write the kubeconfig's embedded admin key into
    the temp dir, where a killed test session leaves it behind.
    """
    from kubernetes.client import ApiClient

    from dralab.kube import load_kubeconfig

    client = ApiClient(load_kubeconfig(cluster.kubeconfig).configuration)
    yield client
    client.close()


def _namespace_name(node_name: str) -> str:
    base = re.sub(r"[^a-z0-9-]+", "-", node_name.lower()).strip("-")[:40].strip("-") or "test"
    return f"it-{base}-{uuid.uuid4().hex[:5]}"


@pytest.fixture
def namespace(request: pytest.FixtureRequest, k8s_client) -> Iterator[str]:
    """A fresh namespace for one test, deleted afterwards (pods, claims and events go with it)."""
    from kubernetes import client

    core = client.CoreV1Api(k8s_client)
    name = _namespace_name(request.node.name)
    core.create_namespace({"metadata": {"name": name, "labels": {"dralab.io/test": "integration"}}})
    yield name
    try:
        core.delete_namespace(name, propagation_policy="Background")
    except client.ApiException as exc:
        if exc.status != 404:
            raise


@pytest.fixture
def shared_device(cluster: ClusterHandle, k8s_client) -> Iterator[str]:
    """A test driver's DeviceClass and slice: one shareable device (21525Mi, 100 cores) on the first node.

    The driver name is the test's own, so no node driver is involved; yields that name.
    """
    from kubernetes import client

    from .helpers import GROUP, VERSION, device_class, shareable_slice

    custom = client.CustomObjectsApi(k8s_client)
    driver = f"share-{uuid.uuid4().hex[:6]}.test.dralab.io"
    custom.create_cluster_custom_object(GROUP, VERSION, "deviceclasses", device_class(driver))
    custom.create_cluster_custom_object(GROUP, VERSION, "resourceslices", shareable_slice(driver, cluster.nodes[0]))
    yield driver
    custom.delete_cluster_custom_object(GROUP, VERSION, "resourceslices", f"{driver}-slice")
    custom.delete_cluster_custom_object(GROUP, VERSION, "deviceclasses", driver)
