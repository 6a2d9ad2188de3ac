"""Attack 2: anyone who reaches the webhook forges AdmissionReviews.

A forged DELETE must not delete claims; forged CREATEs must not exceed a per-namespace rate and their
claims must not outlive the janitor's grace period; namespaces and names are DNS labels, so a
namespace such as ``x/../kube-system`` can neither escape the excluded-namespace check nor a URL path.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from dralab.config import parse_config
from dralab.kube.paths import claims_path, pods_path, templates_path
from dralab.model.convert import LIFECYCLE_LABEL
from dralab.model.objects import MANAGED_BY
from dralab.webhook.controllers.janitor import CLAIM_SELECTOR, parse_time, plan
from dralab.webhook.registration import webhook_configurations

from ._webhook import answer, gpu_pod, review, serve


def managed_claim(name: str, pod: str) -> dict:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": name,
            "labels": {**MANAGED_BY, LIFECYCLE_LABEL: "claim", "dralab.io/pod": pod},
            "annotations": {"dralab.io/pod-name": pod},
        },
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
    }


@pytest.mark.parametrize("namespace", ["x/../kube-system", "kube-system/..", "..", "a b", "UPPER", "x" * 64, "ns%2f.."])
def test_namespace_that_is_not_a_dns_label_is_denied(tmp_path: Path, namespace: str) -> None:
    with serve(tmp_path) as s, s.client(timeout=5) as c:
        got = answer(c.post(f"{s.url}/mutate", json=review(gpu_pod(), namespace=namespace)))
    assert got["allowed"] is False
    assert got["status"]["code"] == 400
    assert got["status"]["message"].startswith("request.namespace:"), got["status"]["message"]


@pytest.mark.parametrize("name", ["../x", "a/b", "A", "x" * 254, "a..b/"])
def test_pod_name_that_is_not_a_dns_name_is_denied(tmp_path: Path, name: str) -> None:
    with serve(tmp_path) as s, s.client(timeout=5) as c:
        got = answer(c.post(f"{s.url}/mutate", json=review(gpu_pod(name))))
    assert got["allowed"] is False
    assert got["status"]["message"].startswith("metadata.name:"), got["status"]["message"]


@pytest.mark.parametrize("build", [claims_path, templates_path, pods_path])
@pytest.mark.parametrize("segment", ["x/../kube-system", "..", ".", "a/b", "a?b", "a#b"])
def test_path_segments_cannot_escape(build, segment: str) -> None:
    """Either refused outright or escaped so that no segment is ``..`` and no ``/``, ``?``, ``#`` leaks."""
    try:
        path = build(segment, "n")
    except ValueError:
        return
    parts = path.split("/")
    assert ".." not in parts and "." not in parts and "?" not in path and "#" not in path
    assert path.count("/") == build("ns", "n").count("/")


def test_no_webhook_acts_on_pod_delete() -> None:
    """Claims are freed by owner references, the garbage collector and the janitor, never by a review."""
    cfg = parse_config({})
    for configuration in webhook_configurations(cfg, url="https://127.0.0.1:9443", service=None, ca_bundle=b"x",
                                                own_namespace="dralab"):
        for hook in configuration["webhooks"]:
            for rule in hook["rules"]:
                assert "DELETE" not in rule["operations"], hook["name"]
                assert "*" not in rule["operations"], hook["name"]


@pytest.mark.integration
def test_forged_delete_review_deletes_nothing(tmp_path: Path, kube, namespace: str) -> None:
    made = kube.create(claims_path(namespace), managed_claim("victim-c0-gpu", "victim"))
    victim = gpu_pod("victim")
    victim["metadata"].update(namespace=namespace, uid="forged-uid", labels={"hami.io/dra": "true"})
    victim["spec"]["resourceClaims"] = [{"name": "victim-c0-gpu", "resourceClaimName": "victim-c0-gpu"}]
    with serve(tmp_path, api=kube) as s, s.client(timeout=10) as c:
        got = answer(c.post(f"{s.url}/validate", json=review({}, namespace=namespace, operation="DELETE", old=victim)))
    assert got["allowed"] is True
    still = kube.get(claims_path(namespace, "victim-c0-gpu"))
    assert still["metadata"]["uid"] == made["metadata"]["uid"] and not still["metadata"].get("deletionTimestamp")


@pytest.mark.integration
def test_forged_creates_are_rate_limited_per_namespace(tmp_path: Path, kube, namespace: str) -> None:
    cfg = parse_config({"webhook": {"claimCreateBurst": 3, "claimCreateRatePerSecond": 0.01, "maxClaimsPerPod": 3}})
    with serve(tmp_path, config=cfg, api=kube) as s, s.client(timeout=10) as c:
        answers = [
            answer(c.post(f"{s.url}/mutate", json=review(gpu_pod(f"forged-{i}"), namespace=namespace, uid=f"u{i}")))
            for i in range(6)
        ]
    assert [a["allowed"] for a in answers] == [True, True, True, False, False, False]
    assert answers[3]["status"]["code"] == 429
    assert "claimCreateRatePerSecond" in answers[3]["status"]["message"]
    made = kube.list(claims_path(namespace), label_selector=CLAIM_SELECTOR)["items"]
    assert len(made) == 3


@pytest.mark.integration
def test_claims_of_a_forged_create_do_not_outlive_the_grace_period(tmp_path: Path, kube, namespace: str) -> None:
    """No pod ever appears for a forged CREATE: the janitor's plan reaps its claims once the grace passes."""
    cfg = parse_config({"webhook": {"claimGracePeriodSeconds": 30}})
    with serve(tmp_path, config=cfg, api=kube) as s, s.client(timeout=10) as c:
        assert answer(c.post(f"{s.url}/mutate", json=review(gpu_pod("ghost"), namespace=namespace)))["allowed"]
    claims = kube.list(claims_path(namespace), label_selector=CLAIM_SELECTOR)["items"]
    pods = kube.list(pods_path(namespace))["items"]
    assert len(claims) == 1 and not pods
    created = parse_time(claims[0]["metadata"]["creationTimestamp"])
    assert created is not None and created <= time.time() + 5
    assert plan(claims, pods, now=created + 29, grace=30).reap == []
    assert [c["metadata"]["name"] for c in plan(claims, pods, now=created + 30, grace=30).reap] == [
        claims[0]["metadata"]["name"]
    ]
