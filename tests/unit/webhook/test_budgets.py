"""ShareBudgets at admission: denials with budget/use/request, release, the namespace lock, status."""

from __future__ import annotations

import copy
from typing import Any

import anyio

from dralab.config import default_config
from dralab.kube import KubeError
from dralab.kube.paths import claims_path
from dralab.model import budget as model
from dralab.webhook.controllers.budget_lock import LOCK_ANNOTATION, BudgetLock, lock_free
from dralab.webhook.controllers.budgets import BudgetReconciler, budgets_path
from dralab.webhook.server import build
from dralab_kit.fixtures.fakeapi import FakeKube, not_found

from .test_handlers import review

NS = "team-a"
GPU = "hami-core-gpu.project-hami.io"


COLLECTIONS = {claims_path(NS), budgets_path(NS)}


def reads(api: FakeKube, collections: set[str] = COLLECTIONS) -> list[tuple[str, str | None]]:
    """(path, resourceVersion asked for) of every read of a claim or budget collection."""
    return [(c.path, c.params.get("resourceVersion")) for c in api.calls if c.verb == "list" and c.path in collections]


def gpu_pod(name: str, memory: str, cores: str = "10") -> dict[str, Any]:
    limits = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": memory, "nvidia.com/gpucores": cores}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"containers": [{"name": "cuda", "image": "busybox", "resources": {"limits": limits}}]},
    }


def with_budget(api: FakeKube, memory: str = "12Gi", cores: int = 100) -> None:
    api.objects[f"{budgets_path(NS)}/gpus"] = {
        "apiVersion": model.API_VERSION, "kind": model.KIND,
        "metadata": {"name": "gpus", "namespace": NS, "generation": 1, "resourceVersion": "1"},
        "spec": {"deviceClassName": GPU, "memory": memory, "cores": cores},
    }


def admit(wh, pod: dict[str, Any], uid: str, namespace: str = NS) -> dict[str, Any]:
    return anyio.run(lambda: wh.handler.mutate(review(pod, uid=uid, namespace=namespace)))["response"]


def test_pods_within_the_budget_pass_and_the_next_is_denied_with_figures() -> None:
    api = FakeKube()
    with_budget(api)
    wh = build(default_config(), api, janitor=False)
    assert admit(wh, gpu_pod("a", "4096"), "u1")["allowed"]
    assert admit(wh, gpu_pod("b", "8192"), "u2")["allowed"]
    denied = admit(wh, gpu_pod("c", "2048"), "u3")
    assert denied["allowed"] is False and denied["status"]["code"] == 400
    message = denied["status"]["message"]
    assert message.startswith(f"ShareBudget {NS}/gpus: over budget for DeviceClass {GPU}")
    assert "memory budget 12Gi, in use 12Gi, this pod requests 2Gi (would be 14Gi)" in message
    assert len(api.names(claims_path(NS))) == 2  # the denied pod left no claim
    assert b'dralab_budget_denials_total{device_class="hami-core-gpu.project-hami.io",namespace="team-a"} 1.0' in (
        wh.metrics.render()
    )


def test_released_claims_give_the_budget_back() -> None:
    api = FakeKube()
    with_budget(api, memory="8Gi")
    wh = build(default_config(), api, janitor=False)
    assert admit(wh, gpu_pod("a", "8192"), "u1")["allowed"]
    assert not admit(wh, gpu_pod("b", "1024"), "u2")["allowed"]
    (name,) = api.names(claims_path(NS))
    api.delete(f"{claims_path(NS)}/{name}")
    assert admit(wh, gpu_pod("b", "1024"), "u3")["allowed"]


def test_no_budget_or_no_crd_admits() -> None:
    api = FakeKube()
    wh = build(default_config(), api, janitor=False)
    assert admit(wh, gpu_pod("a", "100000"), "u1")["allowed"]
    plain = FakeKube()  # the CRD is not installed: the budget list answers 404
    plain.fail("list", path=budgets_path(NS), error=not_found("GET", "the server could not find the resource"))
    assert admit(build(default_config(), plain, janitor=False), gpu_pod("a", "100000"), "u1")["allowed"]


def test_concurrent_admissions_of_one_namespace_never_overshoot() -> None:
    """Twenty pods of 1 GiB admitted at once against 8 GiB: exactly eight pass."""
    api = FakeKube()
    with_budget(api, memory="8Gi")
    wh = build(default_config(), api, janitor=False)
    answers: list[bool] = []

    async def burst() -> None:
        async def one(i: int) -> None:
            out = await wh.handler.mutate(review(gpu_pod(f"p{i}", "1024"), uid=f"u{i}", namespace=NS))
            answers.append(out["response"]["allowed"])

        async with anyio.create_task_group() as tg:
            for i in range(20):
                tg.start_soon(one, i)

    anyio.run(burst)
    assert answers.count(True) == 8 and len(api.names(claims_path(NS))) == 8
    assert wh.handler.lifecycle.budgets._locks == {}  # no lock outlives the admissions that needed it


def test_budget_list_failure_denies_with_a_server_error() -> None:
    api = FakeKube()
    api.fail("list", path=budgets_path(NS), error=KubeError(500, "InternalError", {"message": "etcd down"}))
    out = admit(build(default_config(), api, janitor=False), gpu_pod("a", "1024"), "u1")
    assert out["allowed"] is False and out["status"]["code"] == 500


def test_budget_cache_reads_the_watch_cache_and_the_check_reads_quorum() -> None:
    """Which namespaces have budgets comes from the apiserver's watch cache (resourceVersion 0: no wait
    for etcd's progress notification); the check under the lock reads budgets and claims with a quorum
    LIST, so an admission that held the lock before is always seen."""
    api = FakeKube()
    with_budget(api, memory="8Gi")
    wh = build(default_config(), api, janitor=False)
    assert admit(wh, gpu_pod("a", "1024"), "u1")["allowed"]
    assert reads(api) == [(budgets_path(NS), "0"), (budgets_path(NS), None), (claims_path(NS), None)]

    api.calls.clear()
    other = gpu_pod("b", "1024")
    other["metadata"]["namespace"] = "no-budget"
    assert admit(wh, other, "u2", namespace="no-budget")["allowed"]
    assert reads(api, {budgets_path("no-budget")}) == [(budgets_path("no-budget"), "0")]


def test_reconciler_writes_use_and_flags_overshoot() -> None:
    api = FakeKube()
    with_budget(api, memory="8Gi")
    wh = build(default_config(), api, janitor=False)
    assert admit(wh, gpu_pod("a", "6144"), "u1")["allowed"]
    # A claim the webhook did not gate (another replica, or made by hand) takes the namespace past the budget.
    extra = copy.deepcopy(api.objects[f"{claims_path(NS)}/{api.names(claims_path(NS))[0]}"])
    extra["metadata"]["name"] = "by-hand"
    api.objects[f"{claims_path(NS)}/by-hand"] = extra
    metrics = wh.handler.lifecycle.budgets.metrics
    rec = BudgetReconciler(api, metrics)
    rec.claims.items = {(NS, p.rsplit("/", 1)[1]): o for p, o in api.objects.items() if "/resourceclaims/" in p}
    rec.budgets.items = {(NS, "gpus"): api.objects[f"{budgets_path(NS)}/gpus"]}
    assert rec.reconcile_once() == 1
    status = api.objects[f"{budgets_path(NS)}/gpus"]["status"]
    assert status["used"]["memory"] == "12Gi" and status["overshoot"]["memory"] == "4Gi"
    assert status["conditions"][0] == {**status["conditions"][0], "type": "Overshoot", "status": "True"}
    text = wh.metrics.render().decode()
    assert 'dralab_budget_overshoot{budget="gpus",device_class="hami-core-gpu.project-hami.io",' in text
    rec.budgets.items = {(NS, "gpus"): api.objects[f"{budgets_path(NS)}/gpus"]}  # what its watch delivers
    assert rec.reconcile_once() == 0  # unchanged: nothing written
    rec.budgets.items = {}
    rec.reconcile_once()
    assert 'dralab_budget_used{budget="gpus"' not in wh.metrics.render().decode()


def test_namespaces_without_a_budget_cost_no_list_per_pod() -> None:
    """Which namespaces have budgets is cached briefly: pods there neither LIST claims nor queue on the lock."""
    api = FakeKube()
    wh = build(default_config(), api, janitor=False)
    for i in range(5):
        assert admit(wh, gpu_pod(f"p{i}", "1024"), f"u{i}")["allowed"]
    lists = [p for p, _ in reads(api)]
    assert lists == [budgets_path(NS)]  # one budget LIST for five pods, no claim LIST at all
    assert not wh.handler.lifecycle.budgets._locks


def test_two_workers_share_the_budget_lock_through_the_apiserver() -> None:
    """Two webhook processes (workers or replicas) admitting one namespace at once: exactly the budget."""
    api = FakeKube()
    with_budget(api, memory="8Gi")
    workers = [build(default_config(), api, janitor=False) for _ in range(2)]
    answers: list[bool] = []

    async def burst() -> None:
        async def one(i: int) -> None:
            out = await workers[i % 2].handler.mutate(review(gpu_pod(f"p{i}", "1024"), uid=f"u{i}", namespace=NS))
            answers.append(out["response"]["allowed"])

        async with anyio.create_task_group() as tg:
            for i in range(20):
                tg.start_soon(one, i)

    anyio.run(burst)
    assert answers.count(True) == 8 and len(api.names(claims_path(NS))) == 8
    budget = api.objects[f"{budgets_path(NS)}/gpus"]
    assert LOCK_ANNOTATION not in budget["metadata"].get("annotations", {})  # every lock given back


def test_an_expired_lock_is_taken_over_and_a_live_one_is_not_free() -> None:
    assert lock_free(None, 100.0) and lock_free("w-1/ab 99.5", 100.0) and lock_free("garbage", 100.0)
    assert not lock_free("w-1/ab 100.5", 100.0)
    api = FakeKube()
    with_budget(api, memory="8Gi")
    api.objects[f"{budgets_path(NS)}/gpus"]["metadata"]["annotations"] = {LOCK_ANNOTATION: "dead-worker/x 1.0"}
    assert admit(build(default_config(), api, janitor=False), gpu_pod("a", "1024"), "u1")["allowed"]


def test_a_live_lock_of_another_process_holds_the_acquirer_until_it_is_released() -> None:
    api = FakeKube()
    with_budget(api)
    path = f"{budgets_path(NS)}/gpus"
    api.objects[path]["metadata"]["annotations"] = {LOCK_ANNOTATION: "other-worker/x 9999999999.0"}
    taken: dict[str, str] = {}

    async def scenario() -> None:
        done = anyio.Event()

        async def take() -> None:
            taken["token"] = await BudgetLock(api, identity="me").acquire(path)
            done.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(take)
            with anyio.fail_after(30):
                while api.paths("get").count(path) < 3 and not done.is_set():  # it looked at the lock three times
                    await anyio.sleep(0.01)
            assert not done.is_set(), "the lock of another process was taken while it was live"
            api.request("PATCH", path, body={"metadata": {"annotations": {LOCK_ANNOTATION: None}}},
                        content_type="application/merge-patch+json")  # the other worker gives it back
            await done.wait()

    anyio.run(scenario)
    assert taken["token"].startswith("me/")
    assert api.objects[path]["metadata"]["annotations"][LOCK_ANNOTATION] == taken["token"]


def test_concurrent_pods_share_one_budget_list() -> None:
    api = FakeKube()
    wh = build(default_config(), api, janitor=False)

    async def burst() -> None:
        async with anyio.create_task_group() as tg:
            for i in range(10):
                tg.start_soon(wh.handler.mutate, review(gpu_pod(f"p{i}", "1024"), uid=f"u{i}", namespace=NS))

    anyio.run(burst)
    assert [p for p, _ in reads(api)] == [budgets_path(NS)]
    assert len(api.names(claims_path(NS))) == 10


def test_a_pod_of_one_class_does_not_hide_the_budget_of_another() -> None:
    """Budgets on two classes: admitting a GPU pod must not make the cache forget the NPU budget."""
    api = FakeKube()
    with_budget(api, memory="12Gi")
    npu = "hami-vnpu-core.project-hami.io"
    api.objects[f"{budgets_path(NS)}/npus"] = {
        "apiVersion": model.API_VERSION, "kind": model.KIND,
        "metadata": {"name": "npus", "namespace": NS, "generation": 1, "resourceVersion": "1"},
        "spec": {"deviceClassName": npu, "memory": "2Gi"},
    }
    wh = build(default_config(), api, janitor=False)
    assert admit(wh, gpu_pod("a", "1024"), "u1")["allowed"]
    limits = {"huawei.com/Ascend310P": 1, "huawei.com/Ascend310P-memory": "4096", "huawei.com/Ascend310P-core": "10"}
    npu_pod = gpu_pod("b", "0")
    npu_pod["spec"]["containers"][0]["resources"]["limits"] = limits
    denied = admit(wh, npu_pod, "u2")
    assert denied["allowed"] is False and f"ShareBudget {NS}/npus" in denied["status"]["message"]


def test_a_budgeted_namespace_refuses_template_lifecycle_pods_naming_the_fix() -> None:
    """Templates' claims are made after admission, past the gate: a budget that could not hold fails closed."""
    from dralab.config import parse_config
    from dralab.kube.paths import templates_path

    api = FakeKube()
    wh = build(parse_config({"webhook": {"lifecycle": "template"}}), api, janitor=False)
    assert admit(wh, gpu_pod("a", "4096"), "u1", namespace="team-b")["allowed"]  # no budget there
    with_budget(api)
    denied = admit(wh, gpu_pod("b", "4096"), "u2")
    assert denied["allowed"] is False and denied["status"]["code"] == 400
    assert denied["status"]["message"].startswith(f"ShareBudget of namespace {NS} for {GPU}: this pod's claims")
    assert "set webhook.lifecycle: claim" in denied["status"]["message"]
    assert api.names(templates_path(NS)) == []  # refused before anything was made
    assert b'dralab_budget_denials_total{device_class="hami-core-gpu.project-hami.io",namespace="team-a"} 1.0' in (
        wh.metrics.render()
    )
