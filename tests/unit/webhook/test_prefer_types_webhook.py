"""``dralab.io/prefer-types`` at admission: the claim the webhook creates, refusals, and budgets."""

from __future__ import annotations

from typing import Any

from dralab.config import default_config
from dralab.kube.paths import claims_path
from dralab.model import jsonpatch
from dralab.model.convert import ANN_PREFER_TYPES
from dralab.webhook.server import build
from dralab_kit.fixtures.fakeapi import FakeKube

from .test_budgets import GPU, NS, admit, gpu_pod, with_budget
from .test_handlers import patch_of, review, run

GI = 2**30


def preferring(name: str, memory: str, types: str = "a100,h100", **annotations: str) -> dict[str, Any]:
    pod = gpu_pod(name, memory)
    pod["metadata"]["annotations"] = {ANN_PREFER_TYPES: types, **annotations}
    return pod


def test_the_claim_has_one_subrequest_per_type(fake_api) -> None:
    wh = build(default_config(), fake_api, janitor=False)
    out = run(wh.handler.mutate, review(preferring("p", "4096"), namespace=NS))
    assert out["response"]["allowed"] is True
    (name,) = fake_api.names(claims_path(NS))
    (request,) = fake_api.objects[f"{claims_path(NS)}/{name}"]["spec"]["devices"]["requests"]
    assert request["name"] == "gpu" and "exactly" not in request
    assert [s["name"] for s in request["firstAvailable"]] == ["a100", "h100"]
    assert all(s["capacity"]["requests"] == {"memory": str(4 * GI), "cores": "10"} for s in request["firstAvailable"])
    mutated = jsonpatch.apply(preferring("p", "4096"), patch_of(out))
    assert mutated["spec"]["containers"][0]["resources"]["claims"] == [{"name": name}]  # the whole claim


def test_prefer_types_beside_use_gputype_is_denied_and_creates_nothing(fake_api) -> None:
    pod = preferring("p", "4096", **{"nvidia.com/use-gputype": "a100"})
    wh = build(default_config(), fake_api, janitor=False)
    out = run(wh.handler.mutate, review(pod, namespace=NS))
    assert out["response"]["allowed"] is False
    message = out["response"]["status"]["message"]
    assert message.startswith(
        f"metadata.annotations[{ANN_PREFER_TYPES}]: cannot be combined with nvidia.com/use-gputype"
    )
    assert "Drop nvidia.com/use-gputype" in message
    assert fake_api.calls == []


def test_too_many_types_are_denied(fake_api) -> None:
    pod = preferring("p", "4096", types=",".join(f"t{i}" for i in range(9)))
    out = run(build(default_config(), fake_api, janitor=False).handler.mutate, review(pod, namespace=NS))
    assert out["response"]["allowed"] is False
    assert "lists 9 device types; a request holds at most 8 alternatives" in out["response"]["status"]["message"]


def test_prefer_types_claims_count_once_against_a_budget() -> None:
    api = FakeKube()
    with_budget(api, memory="12Gi")
    wh = build(default_config(), api, janitor=False)
    assert admit(wh, preferring("a", "4096"), "u1")["allowed"]
    assert admit(wh, preferring("b", "8192"), "u2")["allowed"]  # 4 + 8: each counted once, not per alternative
    denied = admit(wh, preferring("c", "1024"), "u3")
    assert not denied["allowed"]
    assert "memory budget 12Gi, in use 12Gi, this pod requests 1Gi (would be 13Gi)" in denied["status"]["message"]


def test_an_unallocated_claim_holds_its_largest_alternative_and_an_allocated_one_what_it_got() -> None:
    api = FakeKube()
    with_budget(api, memory="12Gi")
    alternatives = [
        {"name": "big", "deviceClassName": GPU, "count": 1, "capacity": {"requests": {"memory": str(8 * GI)}}},
        {"name": "small", "deviceClassName": GPU, "count": 1, "capacity": {"requests": {"memory": str(2 * GI)}}},
    ]
    path = f"{claims_path(NS)}/by-hand"
    api.objects[path] = {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "by-hand", "namespace": NS},
        "spec": {"devices": {"requests": [{"name": "gpu", "firstAvailable": alternatives}]}},
    }  # fmt: skip
    wh = build(default_config(), api, janitor=False)
    denied = admit(wh, gpu_pod("p", "6144"), "u1")
    assert not denied["allowed"] and "in use 8Gi, this pod requests 6Gi" in denied["status"]["message"]
    result = {"request": "gpu/small", "driver": GPU, "pool": "node", "device": "gpu-1"}
    api.objects[path]["status"] = {"allocation": {"devices": {"results": [result]}}}
    assert admit(wh, gpu_pod("p", "6144"), "u2")["allowed"]  # 2 + 6 of 12
