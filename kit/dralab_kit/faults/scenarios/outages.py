"""Scenarios where one component goes away under load: the webhook, the node driver, the apiserver,
the kubelet and containerd."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

from dralab.util import wait_for
from dralab_kit.faults.audit import is_live
from dralab_kit.faults.context import Ctx
from dralab_kit.faults.engine import Outcome, scenario
from dralab_kit.faults.workloads import deployment, wait_rollout
from dralab_kit.fixtures.pods import sharing_pod

OUTAGE_S = 2.0


@scenario("local")
def webhook_killed_during_deletions(ctx: Ctx) -> Outcome:
    """100 pods deleted at once; the webhook is SIGKILLed a third of the way through, restarted after."""
    n = 20 if ctx.quick else 100
    ns = ctx.namespace("f-wh")
    errors = ctx.create_pods(ns, [sharing_pod(f"p{i}") for i in range(n)])
    ctx.running(ns, n - len(errors), timeout=300)
    names = [f"p{i}" for i in range(n)]
    deleted: list[float] = []
    killed_at: list[float] = []
    lock = threading.Lock()

    def delete(name: str) -> None:
        ctx.kube.delete(f"/api/v1/namespaces/{ns}/pods/{name}", grace_period_seconds=0, missing_ok=True)
        with lock:
            deleted.append(time.monotonic())
            if len(deleted) == n // 3:
                ctx.target.kill("webhook")
                killed_at.append(time.monotonic())

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(delete, names))
    while_down = sum(1 for t in deleted if killed_at and t >= killed_at[0])
    ctx.gone(ns)
    ctx.target.start("webhook")
    return not errors, {"pods": n, "create_errors": len(errors), "deleted_while_webhook_down": while_down}


@scenario("local", "node")
def driver_killed_during_prepare(ctx: Ctx) -> Outcome:
    """The node driver SIGKILLed while the kubelet prepares a burst of pods, restarted 2 s later."""
    n = 5 if ctx.target.real else (10 if ctx.quick else 30)
    ns = ctx.namespace("f-drv")
    calls_before = len(ctx.target.records())
    errors: list[str] = []
    names = [f"d{i}" for i in range(n)]
    creator = threading.Thread(target=lambda: errors.extend(ctx.create_sharing(ns, names)))
    creator.start()
    wait_for(lambda: any(r.get("call") == "NodePrepareResources" for r in ctx.target.records()[calls_before:]),
             120, "the first prepare call", interval=0.05)
    ctx.target.kill("driver")
    killed = time.monotonic()
    running_when_killed = sum(1 for p in ctx.pods(ns) if (p.get("status") or {}).get("phase") == "Running")
    wait_for(lambda: time.monotonic() - killed >= OUTAGE_S, OUTAGE_S + 3, "the outage", interval=0.1)
    ctx.target.start("driver")
    creator.join()
    ctx.running(ns, n - len(errors), timeout=180)
    recovered = time.monotonic() - killed
    mid = ctx.audit()
    failed = [r for r in ctx.target.records()[calls_before:]
              if r.get("call") == "NodePrepareResources" and r.get("error")]
    ctx.delete_namespace(ns)
    detail = {"pods": n, "create_errors": len(errors), "running_when_killed": running_when_killed,
              "outage_s": OUTAGE_S, "kill_to_all_running_s": round(recovered, 2),
              "failed_prepare_calls": len(failed),
              "missing_cdi_specs_after_restart": mid.node.get("missing_cdi_specs", 0)}
    return not errors and not mid.node.get("missing_cdi_specs"), detail


@scenario("local")
def apiserver_restarted_mid_run(ctx: Ctx) -> Outcome:
    """The apiserver restarted while a Deployment scales up; then scaled further once it is back."""
    from dralab_kit.cluster import api

    first, second = (8, 12) if ctx.quick else (30, 40)
    ns = ctx.namespace("f-api")
    base = f"/apis/apps/v1/namespaces/{ns}/deployments"
    ctx.kube.create(base, deployment("grow", first))
    wait_for(lambda: any(is_live(p) for p in ctx.pods(ns)), 60, "the first pods", interval=0.1)
    started = time.monotonic()
    api.restart(ctx.handle.name, "apiserver")
    outage = time.monotonic() - started
    ctx.reconnect()
    wait_rollout(ctx, ns, "grow", first, "the deployment after the restart")
    ctx.kube.patch(f"{base}/grow", {"spec": {"replicas": second}})
    wait_rollout(ctx, ns, "grow", second, "the scale-up after the restart")
    steady = ctx.settle()
    ctx.kube.delete(f"{base}/grow", propagation="Foreground", missing_ok=True)
    ctx.gone(ns)
    detail = {"replicas": [first, second], "apiserver_restart_s": round(outage, 1),
              "leaks_while_running": len(steady.leaked_claims) + len(steady.leaked_capacity)}
    return steady.clean, detail


def _restart_under_pods(ctx: Ctx, role: str) -> Outcome:
    """Three claim pods running, ``role`` restarted: the same containers keep running and a new
    claim pod starts."""
    ns = ctx.namespace(f"f-{role}")
    names = [f"p{i}" for i in range(3)]
    ctx.create_sharing(ns, names, strict=True)
    ctx.running(ns, len(names))
    containers = ctx.container_ids(ns)
    started = time.monotonic()
    ctx.target.restart(role)
    wait_for(ctx.node_ready, 120, "node Ready", interval=0.05)
    ctx.create_sharing(ns, ["after"], strict=True)
    ctx.running(ns, len(names) + 1)
    new_pod_s = time.monotonic() - started
    now = ctx.container_ids(ns)
    kept = sum(now.get(n) == cid for n, cid in containers.items())
    mid = ctx.audit()
    ctx.delete_namespace(ns)
    detail = {"pods": len(names), "containers_kept": kept, "restart_to_new_claim_pod_running_s": round(new_pod_s, 2),
              "missing_cdi_specs_after_restart": mid.node.get("missing_cdi_specs", 0)}
    return kept == len(names) and not mid.node.get("missing_cdi_specs"), detail


@scenario("node")
def kubelet_restart(ctx: Ctx) -> Outcome:
    """The real kubelet restarted under running claim pods."""
    return _restart_under_pods(ctx, "kubelet")


@scenario("node")
def containerd_restart(ctx: Ctx) -> Outcome:
    """containerd restarted under running claim pods."""
    return _restart_under_pods(ctx, "containerd")
