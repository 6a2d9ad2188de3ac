"""The driver's claim cache against the local cluster's real kube-apiserver: list, watch, expiry."""

from __future__ import annotations

import base64
import json
import threading
import urllib.request
import uuid
from collections.abc import Iterator

import pytest

from dralab.driver.informer import ClaimInformer, Expired
from dralab.kube import Kube
from dralab.kube.paths import claim_path
from dralab.util import wait_for
from dralab_kit.fixtures.driver_claims import DRIVER, lab20_claim

from ..helpers import resource_claim

pytestmark = pytest.mark.integration

DEVICE_CLASS = "hami-vnpu-core.project-hami.io"


@pytest.fixture
def kube(cluster) -> Iterator[Kube]:
    client = Kube.from_kubeconfig(cluster.kubeconfig)
    yield client
    client.close()


@pytest.fixture
def informer(kube: Kube) -> Iterator[ClaimInformer]:
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


def _allocate(kube: Kube, namespace: str, name: str, node: str) -> str:
    base = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims"
    made = kube.create(base, resource_claim(name, DEVICE_CLASS))
    made["status"] = lab20_claim(uid=made["metadata"]["uid"], name=name, namespace=namespace, node=node)["status"]
    kube.request("PUT", f"{base}/{name}/status", body=made)
    return made["metadata"]["uid"]


def test_allocated_claims_of_the_node_arrive_and_leave(informer: ClaimInformer, kube: Kube, namespace: str):
    wait_for(informer.synced.is_set, 60, "the first list of claims")
    uid = _allocate(kube, namespace, "mine", informer.node)
    _allocate(kube, namespace, "elsewhere", "some-other-node")
    claim = wait_for(lambda: informer.lookup(namespace, "mine", uid), 60, "the allocated claim in the cache")
    assert claim["status"]["allocation"]["devices"]["results"][0]["pool"] == informer.node
    assert informer.lookup(namespace, "elsewhere", "any") is None
    kube.delete(claim_path(namespace, "mine"), missing_ok=True)
    wait_for(lambda: informer.lookup(namespace, "mine", uid) is None, 60, "the deleted claim leaving the cache")


def _compact_etcd(cluster) -> None:
    """Compact etcd at its current revision, as the apiserver itself does every 5 minutes.

    A cluster younger than that still holds every revision, so a watch from resourceVersion 1 would
    be served instead of expiring: the test makes the history gone rather than hoping it is.
    """
    base = f"http://127.0.0.1:{cluster.ports['etcd']}/v3/kv"

    def post(path: str, body: dict) -> dict:
        request = urllib.request.Request(
            f"{base}/{path}", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            return json.load(answer)

    revision = post("range", {"key": base64.b64encode(b"/registry/namespaces/default").decode()})["header"]["revision"]
    post("compaction", {"revision": revision, "physical": True})


def test_a_watch_from_an_expired_version_asks_for_a_relist(kube: Kube, cluster, namespace: str) -> None:
    """A watch from a compacted version ends in Expired (then a relist), or is replayed in full.

    Which of the two the apiserver does depends on its watch cache's age: on a long-lived cluster
    (and after compaction) it answers 410, while a watch cache younger than its first trim may still
    serve every event since the list. Either way the informer must end up at a current version with
    the cache in sync; the 410 decoding itself is pinned by tests/unit/driver/test_informer.py.
    """
    informer = ClaimInformer(kube, "it-cache-expired", [DRIVER], watch_seconds=2)
    uid = _allocate(kube, namespace, "expired", informer.node)  # an event after version 1, whatever ran before
    informer.relist()
    assert informer.synced.is_set() and informer.resource_version
    _compact_etcd(cluster)
    informer.resource_version = "1"
    try:
        informer.watch_once(threading.Event())
    except Expired:
        informer.synced.clear()
        informer.relist()
        assert informer.synced.is_set()
    assert informer.resource_version not in ("", "1")
    assert informer.lookup(namespace, "expired", uid) is not None  # the node's claim is in the cache
