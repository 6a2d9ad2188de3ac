"""/mutate and /validate decisions, claim creation, rollback, collisions and cleanup (no HTTP, fake API)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from dralab.config import default_config, parse_config
from dralab.kube.paths import claims_path, templates_path
from dralab.model import jsonpatch
from dralab.webhook.handlers import BadReview, parse_review
from dralab.webhook.server import build

from .conftest import delete_uids

FIXTURE = Path(__file__).parent / "fixtures" / "lab20-pod.yaml"
NS = "dra-ascend-e2e"
CLAIMS = claims_path(NS)
LAB20_CLAIM = "dra-ascend-e2e-ascend-share-a-app-ascend310p"


def lab20_pod() -> dict[str, Any]:
    return yaml.safe_load(FIXTURE.read_text())


def review(
    pod: dict[str, Any],
    *,
    operation: str = "CREATE",
    uid: str = "uid-1",
    dry_run: bool = False,
    namespace: str = NS,
    old: dict[str, Any] | None = None,
) -> dict[str, Any]:
    request = {
        "uid": uid,
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": namespace,
        "operation": operation,
        "object": pod if operation != "DELETE" else None,
        "oldObject": old,
        "dryRun": dry_run,
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def run(coro_fn, *args, **kwargs):
    return anyio.run(lambda: coro_fn(*args, **kwargs))


def patch_of(response: dict[str, Any]) -> list[dict[str, Any]]:
    return json.loads(base64.b64decode(response["response"]["patch"]))


def test_mutate_lab20_creates_the_claim_and_patches_the_pod(fake_api) -> None:
    wh = build(default_config(), fake_api, janitor=False)
    out = run(wh.handler.mutate, review(lab20_pod()))
    assert out["response"]["allowed"] is True and out["response"]["uid"] == "uid-1"
    mutated = jsonpatch.apply(lab20_pod(), patch_of(out))
    assert mutated["spec"]["resourceClaims"] == [{"name": LAB20_CLAIM, "resourceClaimName": LAB20_CLAIM}]
    assert mutated["metadata"]["labels"]["hami.io/dra"] == "true"
    assert fake_api.names(CLAIMS) == [LAB20_CLAIM]
    claim = fake_api.objects[f"{CLAIMS}/{LAB20_CLAIM}"]
    assert claim["metadata"]["annotations"]["dralab.io/admission-uid"] == "uid-1"
    assert b'dralab_webhook_conversions_total{vendor="ascend"} 1.0' in wh.metrics.render()


def test_dry_run_creates_nothing(fake_api) -> None:
    wh = build(default_config(), fake_api, janitor=False)
    out = run(wh.handler.mutate, review(lab20_pod(), dry_run=True))
    assert out["response"]["allowed"] and patch_of(out)
    assert fake_api.calls == []


def test_partial_failure_rolls_back_the_claims_already_created(fake_api) -> None:
    pod = lab20_pod()
    pod["spec"]["containers"].append(
        {"name": "second", "image": "x", "resources": {"limits": {"huawei.com/Ascend310P": 1}}}
    )
    fake_api.fail("create", nth=1)
    wh = build(default_config(), fake_api, janitor=False)
    out = run(wh.handler.mutate, review(pod))
    assert out["response"]["allowed"] is False
    assert out["response"]["status"]["code"] == 500
    assert (
        "could not create ResourceClaim dra-ascend-e2e/dra-ascend-e2e-ascend-share-a-second-ascend310p"
        in (out["response"]["status"]["message"])
    )
    assert fake_api.names(CLAIMS) == []  # the first claim was deleted again
    assert f"{CLAIMS}/{LAB20_CLAIM}" in fake_api.paths("delete")
    assert delete_uids(fake_api) == ["uid-1"]  # only the claim this request made (a uid precondition)
    assert b"dralab_webhook_claims_rolled_back_total 1.0" in wh.metrics.render()


def test_name_taken_by_another_pods_claim_uses_a_variant(fake_api) -> None:
    wh = build(default_config(), fake_api, janitor=False)
    run(wh.handler.mutate, review(lab20_pod(), uid="old-pod"))  # e.g. a StatefulSet pod's terminating claim
    out = run(wh.handler.mutate, review(lab20_pod(), uid="new-pod"))
    assert out["response"]["allowed"]
    names = fake_api.names(CLAIMS)
    assert len(names) == 2 and LAB20_CLAIM in names
    (variant,) = [n for n in names if n != LAB20_CLAIM]
    mutated = jsonpatch.apply(lab20_pod(), patch_of(out))
    assert mutated["spec"]["resourceClaims"] == [{"name": variant, "resourceClaimName": variant}]
    assert mutated["spec"]["containers"][0]["resources"]["claims"] == [{"name": variant}]


def test_same_admission_retried_reuses_its_claim(fake_api) -> None:
    wh = build(default_config(), fake_api, janitor=False)
    run(wh.handler.mutate, review(lab20_pod(), uid="same"))
    out = run(wh.handler.mutate, review(lab20_pod(), uid="same"))
    assert out["response"]["allowed"]
    assert fake_api.names(CLAIMS) == [LAB20_CLAIM]


def test_denial_names_the_field(fake_api) -> None:
    pod = lab20_pod()
    pod["spec"]["containers"][0]["resources"]["limits"]["huawei.com/Ascend310P-core"] = "150"
    wh = build(default_config(), fake_api, janitor=False)
    out = run(wh.handler.mutate, review(pod))
    assert out["response"]["allowed"] is False
    assert out["response"]["status"]["message"].startswith(
        "spec.containers[0].resources.limits[huawei.com/Ascend310P-core]: "
    )
    assert fake_api.calls == []


@pytest.mark.parametrize("namespace", ["kube-system", "dralab-system"])
def test_excluded_namespaces_pass(fake_api, namespace: str) -> None:
    wh = build(default_config(), fake_api, own_namespace="dralab-system", janitor=False)
    out = run(wh.handler.mutate, review(lab20_pod(), namespace=namespace))
    assert out["response"] == {"uid": "uid-1", "allowed": True}


def test_template_mode_creates_each_template_once(fake_api) -> None:
    cfg = parse_config({"webhook": {"lifecycle": "template"}})
    wh = build(cfg, fake_api, janitor=False)
    for i in range(3):
        pod = lab20_pod()
        pod["metadata"]["name"] = f"p{i}"
        out = run(wh.handler.mutate, review(pod, uid=f"u{i}"))
        assert out["response"]["allowed"]
        mutated = jsonpatch.apply(pod, patch_of(out))
        assert "resourceClaimTemplateName" in mutated["spec"]["resourceClaims"][0]
    assert len(fake_api.names(templates_path(NS))) == 1
    assert fake_api.paths("create") == [templates_path(NS)]


def test_validate_denies_leftover_hami_resources(fake_api) -> None:
    wh = build(default_config(), fake_api, janitor=False)
    out = run(wh.handler.validate, review(lab20_pod()))
    assert out["response"]["allowed"] is False
    assert "still carries HAMi resources" in out["response"]["status"]["message"]
    converted = jsonpatch.apply(lab20_pod(), patch_of(run(wh.handler.mutate, review(lab20_pod(), dry_run=True))))
    assert run(wh.handler.validate, review(converted))["response"]["allowed"] is True


def test_validate_update_only_denies_what_the_update_added(fake_api) -> None:
    wh = build(default_config(), fake_api, janitor=False)
    legacy = lab20_pod()  # admitted before dralab: keeps working (e.g. its finalizers can be removed)
    out = run(wh.handler.validate, review(legacy, operation="UPDATE", old=lab20_pod()))
    assert out["response"]["allowed"] is True


def test_delete_review_has_no_side_effects(fake_api) -> None:
    """A DELETE review may be forged: claims are freed by owner references, GC and the janitor instead."""
    wh = build(default_config(), fake_api, janitor=False)
    out = run(wh.handler.mutate, review(lab20_pod()))
    pod = jsonpatch.apply(lab20_pod(), patch_of(out))
    before = fake_api.names(CLAIMS)
    calls = len(fake_api.calls)
    out = run(wh.handler.validate, review({}, operation="DELETE", old=pod))
    assert out["response"]["allowed"] is True
    assert fake_api.names(CLAIMS) == before and len(fake_api.calls) == calls


def test_bad_reviews_are_rejected() -> None:
    with pytest.raises(BadReview):
        parse_review(b"not json")
    with pytest.raises(BadReview):
        parse_review(b'{"apiVersion": "admission.k8s.io/v1beta1", "request": {}}')
    with pytest.raises(BadReview):
        parse_review(b"{}")


def test_template_mode_sends_one_create_for_admissions_arriving_while_it_is_in_flight(fake_api) -> None:
    """At 500 nodes 4,000 pods created at once each sent their own template create; now the first
    sends it and the others wait for its answer."""
    import threading

    release = threading.Event()
    fake_api.on_call.append(lambda call: release.wait(10) if call.verb == "create" else None)
    wh = build(parse_config({"webhook": {"lifecycle": "template"}}), fake_api, janitor=False)
    answers: list[dict[str, Any]] = []

    async def admit(i: int) -> None:
        pod = lab20_pod()
        pod["metadata"]["name"] = f"p{i}"
        answers.append(await wh.handler.mutate(review(pod, uid=f"u{i}")))

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for i in range(5):
                tg.start_soon(admit, i)
            await anyio.wait_all_tasks_blocked()  # every admission is waiting: one on the create, four on it
            release.set()

    anyio.run(main)
    assert [a["response"]["allowed"] for a in answers] == [True] * 5
    assert fake_api.paths("create") == [templates_path(NS)]


def test_template_mode_rechecks_a_known_template_in_the_background_without_holding_admissions(fake_api) -> None:
    """Every admission of a worker used to wait on the periodic re-check (a create answered 409): at 500
    nodes each one held up admission for 2.8 s on average. Now the pod whose
    admission finds the check due is answered while the check is still in flight, and the check is not
    charged to the namespace's rate (a burst of 1 is spent by the first create)."""
    import threading

    now = [100.0]
    cfg = parse_config({"webhook": {"lifecycle": "template", "claimCreateBurst": 1,
                                    "claimCreateRatePerSecond": 0.001}})
    wh = build(cfg, fake_api, janitor=False)
    wh.handler.lifecycle.clock = lambda: now[0]
    wh.handler.lifecycle.rate.clock = lambda: now[0]

    def pod(i: int) -> dict[str, Any]:
        p = lab20_pod()
        p["metadata"]["name"] = f"p{i}"
        return p

    assert run(wh.handler.mutate, review(pod(0), uid="u0"))["response"]["allowed"]  # the first create: waited on
    assert fake_api.paths("create") == [templates_path(NS)]
    release = threading.Event()
    fake_api.on_call.append(lambda call: release.wait(10) if call.verb == "create" else None)
    now[0] += 61.0  # the re-check is due

    async def main() -> tuple[dict[str, Any], dict[str, Any], int]:
        first = await wh.handler.mutate(review(pod(1), uid="u1"))  # answered with the re-check blocked
        second = await wh.handler.mutate(review(pod(2), uid="u2"))  # joins the re-check in flight
        in_flight = len(wh.handler.lifecycle._template_creates)
        release.set()
        for pending in list(wh.handler.lifecycle._template_creates.values()):
            await pending
        return first, second, in_flight

    first, second, in_flight = anyio.run(main)
    assert first["response"]["allowed"] and second["response"]["allowed"]
    assert in_flight == 1  # one re-check for both
    assert fake_api.paths("create") == [templates_path(NS)] * 2  # the re-check was sent (409: still there)
    assert not wh.handler.lifecycle._template_creates
    assert run(wh.handler.mutate, review(pod(3), uid="u3"))["response"]["allowed"]  # fresh again: no create
    assert len(fake_api.paths("create")) == 2


def test_template_mode_charges_the_namespace_rate_per_template_created_not_per_pod(fake_api) -> None:
    cfg = parse_config({"webhook": {"lifecycle": "template", "claimCreateBurst": 1, "claimCreateRatePerSecond": 0.001,
                                    "maxClaimsPerPod": 1}})
    wh = build(cfg, fake_api, janitor=False)
    for i in range(3):  # one template, made once: the burst of 1 covers every pod of that shape
        pod = lab20_pod()
        pod["metadata"]["name"] = f"p{i}"
        assert run(wh.handler.mutate, review(pod, uid=f"u{i}"))["response"]["allowed"]
    other = lab20_pod()
    other["metadata"]["name"] = "bigger"
    limits = other["spec"]["containers"][0]["resources"]["limits"]
    memory_key = next(k for k in limits if k.endswith("memory") or "mem" in k)
    limits[memory_key] = "2048"
    refused = run(wh.handler.mutate, review(other, uid="u9"))["response"]
    assert refused["allowed"] is False and refused["status"]["code"] == 429
    assert "ResourceClaimTemplates" in refused["status"]["message"]
