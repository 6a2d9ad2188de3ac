"""Adoption of HAMi-DRA's claims against the real apiserver: owner set, GC frees the claim, orphans reaped."""

from __future__ import annotations

from typing import Any

import pytest

from dralab.kube import Kube
from dralab.kube.paths import claims_path, pods_path
from dralab.model.vendors import load_vendor_table
from dralab.util import wait_for
from dralab.webhook.controllers.adoption import Adopter, AdoptionSettings, hami_dra_claim_name

pytestmark = pytest.mark.integration

SELECTOR = (
    'device.driver == "ascend.project-hami.io" && device.attributes["ascend.project-hami.io"].type == "HAMivNPUCore"'
)


@pytest.fixture(scope="module")
def api(cluster) -> Any:
    kube = Kube.from_kubeconfig(cluster.kubeconfig)
    yield kube
    kube.close()


def hami_dra_claim(name: str, run: str) -> dict[str, Any]:
    """As HAMi-DRA creates it (no owner); the ``it-adopt`` label scopes this test's adopter to its own claims."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "labels": {"it-adopt": run}},
        "spec": {"devices": {"requests": [{"name": "npu", "exactly": {
            "deviceClassName": "hami-vnpu-core.project-hami.io", "allocationMode": "ExactCount", "count": 1,
            "capacity": {"requests": {"memory": str(256 * 2**20), "cores": "0"}},
            "selectors": [{"cel": {"expression": SELECTOR}}],
        }}]}},
    }


def hami_dra_pod(name: str, claim: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"hami.io/dra": "true"}},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "runtimeClassName": "ascend",
            "containers": [{"name": "app", "image": "busybox", "resources": {"claims": [{"name": claim}]}}],
            "resourceClaims": [{"name": claim, "resourceClaimName": claim}],
        },
    }


def _get(api: Kube, path: str) -> dict[str, Any] | None:
    return api.get(path, missing_ok=True)


def test_adopter_owns_live_claims_reaps_orphans_and_gc_frees_them(api: Kube, namespace: str) -> None:
    # named as HAMi-DRA names them (cut to 63 characters with its hash when the namespace is long)
    live = hami_dra_claim_name(namespace, "p", "app", "ascend310p")
    orphan = hami_dra_claim_name(namespace, "gone", "app", "ascend310p")
    api.create(claims_path(namespace), hami_dra_claim(live, namespace))
    api.create(claims_path(namespace), hami_dra_claim(orphan, namespace))
    api.create(pods_path(namespace), hami_dra_pod("p", live))
    pod = wait_for(lambda: (p := _get(api, pods_path(namespace, "p"))) and p["metadata"].get("uid") and p,
                   30, "the pod")

    settings = AdoptionSettings(match_labels={"it-adopt": namespace}, grace_seconds=0.0)
    adopter = Adopter(api, load_vendor_table(), settings)
    adopter.start()
    try:
        owned = wait_for(
            lambda: (c := _get(api, claims_path(namespace, live))) and c["metadata"].get("ownerReferences") and c,
            60, "the live claim adopted",
        )
        wait_for(lambda: _get(api, claims_path(namespace, orphan)) is None, 60, "the orphan reaped")
    finally:
        adopter.stop()
    owner = owned["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("Pod", "p", pod["metadata"]["uid"])
    assert owned["metadata"]["labels"]["dralab.io/adopted-from"] == "hami-dra"
    assert owned["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "dralab"
    assert (adopter.adopted, adopter.reaped) == (1, 1)
    # with the adopter stopped, deleting the pod still frees the claim: it is owned (GC) and managed (janitor)
    api.delete(pods_path(namespace, "p"))
    wait_for(lambda: _get(api, claims_path(namespace, live)) is None, 90, "the adopted claim gone with its pod")


def test_adopter_leaves_claims_of_other_shapes_alone(api: Kube, namespace: str) -> None:
    user = hami_dra_claim(f"{namespace}-shared", namespace)  # no vendor suffix: not HAMi-DRA's naming
    api.create(claims_path(namespace), user)
    settings = AdoptionSettings(match_labels={"it-adopt": namespace}, grace_seconds=0.0)
    adopter = Adopter(api, load_vendor_table(), settings)
    adopter.start()
    try:
        wait_for(adopter.ready, 30, "the adopter's caches")
        adopter.reconcile_once()
    finally:
        adopter.stop()
    assert _get(api, claims_path(namespace, f"{namespace}-shared")) is not None
    assert adopter.reaped == 0
