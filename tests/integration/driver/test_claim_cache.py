"""The driver's claim cache against the local cluster's real kube-apiserver: list, watch, expiry."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pytest

from dralab.driver.informer import ClaimInformer, Expired
from dralab.driver.kube import KubeClient, claim_path
from dralab.driver.samples import DRIVER, lab20_claim
from dralab.util import wait_for

from ..helpers import resource_claim

pytestmark = pytest.mark.integration

DEVICE_CLASS = "hami-vnpu-core.project-hami.io"


@pytest.fixture
def kube(cluster) -> Iterator[KubeClient]:
    client = KubeClient(str(cluster.kubeconfig))
    yield client
    client.close()


@pytest.fixture
def informer(kube: KubeClient) -> Iterator[ClaimInformer]:
    node = f"it-cache-{uuid.uuid4().hex[:6]}"  # a pool no other test allocates from
    own = kube.clone()
    informer = ClaimInformer(own, node, [DRIVER], watch_seconds=3)
    stop = threading.Event()
    thread = threading.Thread(target=informer.run, args=(stop,), daemon=True)
    thread.start()
    yield informer
    stop.set()
    thread.join(30)  # the watch ends within watch_seconds; only then is its client closed
    own.close()


def _allocate(kube: KubeClient, namespace: str, name: str, node: str) -> str:
    base = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims"
    made = kube.create(base, resource_claim(name, DEVICE_CLASS))
    made["status"] = lab20_claim(uid=made["metadata"]["uid"], name=name, namespace=namespace, node=node)["status"]
    kube.request("PUT", f"{base}/{name}/status", body=made)
    return made["metadata"]["uid"]


def test_allocated_claims_of_the_node_arrive_and_leave(informer: ClaimInformer, kube: KubeClient, namespace: str):
    wait_for(informer.synced.is_set, 60, "the first list of claims")
    uid = _allocate(kube, namespace, "mine", informer.node)
    _allocate(kube, namespace, "elsewhere", "some-other-node")
    claim = wait_for(lambda: informer.lookup(namespace, "mine", uid), 60, "the allocated claim in the cache")
    assert claim["status"]["allocation"]["devices"]["results"][0]["pool"] == informer.node
    assert informer.lookup(namespace, "elsewhere", "any") is None
    kube.delete(claim_path(namespace, "mine"))
    wait_for(lambda: informer.lookup(namespace, "mine", uid) is None, 60, "the deleted claim leaving the cache")


def test_a_watch_from_an_expired_version_asks_for_a_relist(kube: KubeClient) -> None:
    informer = ClaimInformer(kube, "it-cache-expired", [DRIVER])
    informer.relist()
    assert informer.synced.is_set() and informer.resource_version
    informer.resource_version = "1"  # long gone from the apiserver's watch window
    with pytest.raises(Expired):
        informer.watch_once(threading.Event())
