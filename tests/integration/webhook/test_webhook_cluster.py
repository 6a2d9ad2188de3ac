"""The webhook inside the local cluster: real kube-apiserver admission, claims, janitor, rollback.

Pods here ask for little (cores 0, small memory, no uuid pin) unless a test needs more, so they
fit next to whatever else the shared cluster runs.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from dralab.config import parse_config
from dralab.kube import Kube, KubeError
from dralab.kube.paths import claims_path, pods_path, templates_path
from dralab.model import naming
from dralab.model.convert import Converter
from dralab.model.quantity import parse_quantity
from dralab.util import wait_for
from dralab.webhook.lifecycle import ClaimLifecycle
from dralab.webhook.metrics import Metrics

from ..helpers import resource_claim

pytestmark = pytest.mark.integration

LAB20_POD = Path(__file__).parents[2] / "unit" / "webhook" / "fixtures" / "lab20-pod.yaml"
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def api(cluster) -> Any:
    kube = Kube.from_kubeconfig(cluster.kubeconfig)
    yield kube
    kube.close()


def small_pod(name: str, memory: Any = "256", cores: Any = "0", **extra: Any) -> dict[str, Any]:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "runtimeClassName": "ascend",
            "containers": [
                {
                    "name": "app",
                    "image": "busybox",
                    "resources": {
                        "limits": {
                            "huawei.com/Ascend310P": 1,
                            "huawei.com/Ascend310P-memory": memory,
                            "huawei.com/Ascend310P-core": cores,
                        }
                    },
                }
            ],
        },
    }
    pod["spec"].update(extra)
    return pod


def claim_names(api: Kube, ns: str) -> list[str]:
    return sorted(c["metadata"]["name"] for c in api.list(claims_path(ns)).get("items") or [])


def gone(api: Kube, path: str) -> bool:
    return api.get(path, missing_ok=True) is None


def test_lab20_pod_is_admitted_as_lab20_step5(api: Kube, namespace: str) -> None:
    pod = yaml.safe_load(LAB20_POD.read_text())
    pod["metadata"]["namespace"] = namespace
    # Step 5 compares the claim spec; keep the pod from competing for npu-0-0's cores with other tests.
    created = api.create(pods_path(namespace), pod, dry_run=False)
    name = naming.claim_name(namespace, "ascend-share-a", "app", "ascend310p")
    assert created["spec"]["resourceClaims"] == [{"name": name, "resourceClaimName": name}]
    assert created["spec"]["containers"][0]["resources"] == {"claims": [{"name": name}]}
    assert created["metadata"]["labels"]["hami.io/dra"] == "true"
    claim = api.get(claims_path(namespace, name))
    exactly = claim["spec"]["devices"]["requests"][0]["exactly"]
    assert exactly["count"] == 1 and exactly["deviceClassName"] == "hami-vnpu-core.project-hami.io"
    assert exactly["capacity"]["requests"] == {"cores": "50", "memory": "8589934592"}
    assert [s["cel"]["expression"] for s in exactly["selectors"]][1] == (
        'device.attributes["ascend.project-hami.io"].uuid in ["68496E64-20E05477-92C31323-6E78030A-BD003019"]'
    )
    api.delete(pods_path(namespace, "ascend-share-a"))
    wait_for(lambda: gone(api, claims_path(namespace, name)), 60, "the claim to go with its pod")


def test_claim_is_owned_by_its_pod_and_freed_with_it(api: Kube, namespace: str) -> None:
    api.create(pods_path(namespace), small_pod("owned"))
    name = naming.claim_name(namespace, "owned", "app", "ascend310p")

    def owner() -> str | None:
        refs = api.get(claims_path(namespace, name))["metadata"].get("ownerReferences") or []
        return next((r["uid"] for r in refs if r["kind"] == "Pod"), None)

    pod_uid = api.get(pods_path(namespace, "owned"))["metadata"]["uid"]
    assert wait_for(owner, 30, "the janitor to make the pod the claim's owner") == pod_uid
    wait_for(
        lambda: api.get(claims_path(namespace, name)).get("status", {}).get("allocation"),
        60,
        "the scheduler to allocate the claim",
    )
    labels = api.get(claims_path(namespace, name))["metadata"]["labels"]
    assert labels["dralab.io/pod"] == "owned" and labels["app.kubernetes.io/managed-by"] == "dralab"
    api.delete(pods_path(namespace, "owned"))
    wait_for(lambda: gone(api, claims_path(namespace, name)), 60, "the claim to be deleted with its pod")


def test_generate_name_pod_gets_a_claim_relabelled_with_its_real_name(api: Kube, namespace: str) -> None:
    pod = small_pod("")
    del pod["metadata"]["name"]
    pod["metadata"]["generateName"] = "web-"
    created = api.create(pods_path(namespace), pod)
    real = created["metadata"]["name"]
    (ref,) = created["spec"]["resourceClaims"]
    claim_path = claims_path(namespace, ref["resourceClaimName"])

    def relabelled() -> bool:
        meta = api.get(claim_path)["metadata"]
        return meta["labels"].get("dralab.io/pod") == real and bool(meta.get("ownerReferences"))

    wait_for(relabelled, 30, "the janitor to adopt the claim and record the pod's real name")
    api.delete(pods_path(namespace, real))
    wait_for(lambda: gone(api, claim_path), 60, "the claim to go with its generateName pod")


def test_apiserver_canonicalizes_14000_and_the_claim_still_gets_14000_mib(api: Kube, namespace: str) -> None:
    # The premise: a plain extended resource of 14000 comes back as 14k.
    plain = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "plain", "labels": {"dralab.io/convert": "false"}},
        "spec": {
            "containers": [{"name": "c", "image": "busybox", "resources": {"limits": {"example.com/widget": 14000}}}]
        },
    }
    echoed = api.create(pods_path(namespace), plain, dry_run=True)
    assert echoed["spec"]["containers"][0]["resources"]["limits"]["example.com/widget"] == "14k"
    # Lab 20 Step 9's ctrl-b: 14000 MiB.
    api.create(pods_path(namespace), small_pod("ctrl-b", memory=14000))
    claim = api.get(claims_path(namespace, naming.claim_name(namespace, "ctrl-b", "app", "ascend310p")))
    memory = claim["spec"]["devices"]["requests"][0]["exactly"]["capacity"]["requests"]["memory"]
    assert parse_quantity(memory).value == 14000 * MIB


def test_dry_run_creates_no_claim(api: Kube, namespace: str) -> None:
    echoed = api.create(pods_path(namespace), small_pod("dry"), dry_run=True)
    assert echoed["spec"]["resourceClaims"]
    assert claim_names(api, namespace) == []


def test_invalid_request_is_denied_naming_the_field(api: Kube, namespace: str) -> None:
    with pytest.raises(KubeError) as info:
        api.create(pods_path(namespace), small_pod("bad", cores="150"))
    assert info.value.status == 400
    assert "spec.containers[0].resources.limits[huawei.com/Ascend310P-core]" in info.value.message
    assert claim_names(api, namespace) == []


def test_pod_rejected_after_mutation_leaves_no_claim(api: Kube, namespace: str, cluster) -> None:
    # activeDeadlineSeconds 0 fails pod validation, which runs after mutating admission created the claim.
    with pytest.raises(KubeError) as info:
        api.create(pods_path(namespace), small_pod("rejected", activeDeadlineSeconds=0))
    assert info.value.status == 422
    name = naming.claim_name(namespace, "rejected", "app", "ascend310p")
    assert name in claim_names(api, namespace)  # created at admission...
    grace = float(parse_config(None).webhook.claim_grace_period_seconds)
    wait_for(lambda: gone(api, claims_path(namespace, name)), grace + 60, "the janitor to reap the orphan")


def test_partial_failure_rolls_back(api: Kube, namespace: str) -> None:
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "one-claim"},
        "spec": {"hard": {"count/resourceclaims.resource.k8s.io": "1"}},
    }
    api.create(f"/api/v1/namespaces/{namespace}/resourcequotas", quota)
    wait_for(
        lambda: api.get(f"/api/v1/namespaces/{namespace}/resourcequotas/one-claim").get("status", {}).get("hard"),
        60,
        "the quota controller to initialise the quota",
    )
    pod = small_pod("two")
    second = copy.deepcopy(pod["spec"]["containers"][0])
    second["name"] = "second"
    pod["spec"]["containers"].append(second)
    with pytest.raises(KubeError) as info:
        api.create(pods_path(namespace), pod)
    assert "could not create ResourceClaim" in info.value.message
    assert claim_names(api, namespace) == []


def test_name_held_by_another_claim_gets_a_variant(api: Kube, namespace: str) -> None:
    name = naming.claim_name(namespace, "stateful-0", "app", "ascend310p")
    squatter = resource_claim(name, "hami-vnpu-core.project-hami.io", count=1)
    api.create(claims_path(namespace), squatter)
    created = api.create(pods_path(namespace), small_pod("stateful-0"))
    (ref,) = created["spec"]["resourceClaims"]
    assert ref["resourceClaimName"] != name
    assert set(claim_names(api, namespace)) == {name, ref["resourceClaimName"]}
    wait_for(
        lambda: api.get(pods_path(namespace, "stateful-0")).get("spec", {}).get("nodeName"),
        60,
        "the pod with the variant claim to be scheduled",
    )


def test_template_lifecycle_against_the_apiserver(api: Kube, namespace: str) -> None:
    cfg = parse_config({"webhook": {"lifecycle": "template"}})
    lifecycle = ClaimLifecycle(Converter(cfg.vendors, "template"), api, Metrics())
    pods = []
    for name in ("t-a", "t-b"):
        conv = anyio.run(lambda n=name: lifecycle.admit(small_pod(n), namespace, f"uid-{n}"))
        pods.append(conv.pod)
    templates = api.list(templates_path(namespace))["items"]
    assert len(templates) == 1  # one shape, one shared template
    for pod in pods:  # converted pods pass the cluster's webhook untouched
        api.create(pods_path(namespace), pod)

    def claims_owned_by_pods() -> bool:
        items = api.list(claims_path(namespace)).get("items") or []
        owned = [c for c in items if any(r["kind"] == "Pod" for r in c["metadata"].get("ownerReferences") or [])]
        return len(owned) == 2

    wait_for(claims_owned_by_pods, 60, "the resourceclaim controller to make pod-owned claims from the template")


def test_async_api_answers_like_the_sync_one(cluster, namespace: str) -> None:
    from dralab.kube import AsyncKube

    claim = Converter(parse_config(None).vendors).convert(small_pod("aio"), namespace=namespace).objects[0]
    path = claims_path(namespace, claim["metadata"]["name"])

    async def scenario() -> tuple[str, int, int]:
        aio = AsyncKube(cluster.kubeconfig)
        try:
            made = await aio.create(claims_path(namespace), claim)
            try:
                await aio.create(claims_path(namespace), claim)
                conflict = 0
            except KubeError as exc:
                conflict = exc.status
            got = await aio.get(path)
            assert got["metadata"]["uid"] == made["metadata"]["uid"]
            assert await aio.delete(path, uid=made["metadata"]["uid"])
            try:
                await aio.get(claims_path(namespace, "nope"))
                missing = 0
            except KubeError as exc:
                missing = exc.status
            return made["metadata"]["name"], conflict, missing
        finally:
            await aio.close()

    name, conflict, missing = anyio.run(scenario)
    assert name == claim["metadata"]["name"] and conflict == 409 and missing == 404
