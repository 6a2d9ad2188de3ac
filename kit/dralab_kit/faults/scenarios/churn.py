"""Scenarios of admission and controller churn: refused pods, rolling Deployments, reused StatefulSet names."""

from __future__ import annotations

from functools import partial
from typing import Any

from dralab.model.podclaims import claim_names
from dralab_kit.faults.context import Ctx, meta
from dralab_kit.faults.denier import DENY_LABEL, Denier
from dralab_kit.faults.engine import Outcome, scenario
from dralab_kit.faults.workloads import deployment, statefulset, wait_rollout
from dralab_kit.fixtures.pods import sharing_pod


@scenario("local")
def rejected_by_later_webhook(ctx: Ctx) -> Outcome:
    """Pods refused by a validating webhook after dralab mutated them (their claims already exist)."""
    n = 5 if ctx.quick else 20
    ns = ctx.namespace("f-rej")
    with Denier(ctx.handle) as denier:
        refused = ctx.create_pods(ns, [sharing_pod(f"r{i}", labels={DENY_LABEL: "true"}) for i in range(n)], 4)
        orphans = len(ctx.claims(ns))
        ok_errors = ctx.create_pods(ns, [sharing_pod(f"ok{i}") for i in range(2)])
    ctx.running(ns, 2 - len(ok_errors))
    ctx.kube.request("DELETE", f"/api/v1/namespaces/{ns}/pods", params={"gracePeriodSeconds": "0"})
    ctx.gone(ns)
    by_denier = sum(1 for e in refused if "later admission webhook" in e)
    detail = {
        "pods": n,
        "refused_by_later_webhook": by_denier,
        "claims_left_by_refused_pods": orphans,
        "denier_calls": denier.calls,
        "accepted_pods_unaffected": not ok_errors,
    }
    return by_denier == n and not ok_errors, detail


@scenario("local")
def deployment_churn(ctx: Ctx) -> Outcome:
    """A Deployment rolled over and over until 300 pods have been created (10 replicas x 30, quick 40)."""
    replicas, total = (10, 40) if ctx.quick else (30, 300)

    ns = ctx.namespace("f-dep")
    base = f"/apis/apps/v1/namespaces/{ns}/deployments"
    ctx.kube.create(base, deployment("churn", replicas))
    created = replicas
    rollouts = 0
    wait_rollout(ctx, ns, "churn", replicas, "the first rollout")
    while created < total:
        rollouts += 1
        patch = {"spec": {"template": {"metadata": {"annotations": {"bench.dralab.io/rev": str(rollouts)}}}}}
        ctx.kube.patch(f"{base}/churn", patch)
        wait_rollout(ctx, ns, "churn", replicas, f"rollout {rollouts}")
        created += replicas
    steady = ctx.settle()
    ctx.kube.delete(f"{base}/churn", propagation="Foreground", missing_ok=True)
    ctx.gone(ns, 300)
    detail = {"replicas": replicas, "pods_created": created, "rollouts": rollouts,
              "leaks_while_running": len(steady.leaked_claims) + len(steady.leaked_capacity)}
    return steady.clean, detail


@scenario("local")
def statefulset_same_names(ctx: Ctx) -> Outcome:
    """StatefulSet pods deleted and recreated under the same names, round after round."""
    replicas, rounds = (3, 2) if ctx.quick else (5, 5)
    ns = ctx.namespace("f-sts")
    base = f"/apis/apps/v1/namespaces/{ns}/statefulsets"
    ctx.kube.create(base, statefulset("db", replicas))
    pods = ctx.running(ns, replicas, timeout=180)
    uids = {meta(p)["uid"] for p in pods}
    variants = 0
    from dralab.util import wait_for

    def renewed(seen: frozenset[str]) -> list[dict[str, Any]] | None:
        live = [p for p in ctx.pods(ns) if not meta(p).get("deletionTimestamp")]
        up = [p for p in live if (p.get("status") or {}).get("phase") == "Running"]
        fresh = [p for p in up if meta(p)["uid"] not in seen]
        return fresh if len(fresh) == replicas else None

    for _ in range(rounds):
        ctx.kube.request("DELETE", f"/api/v1/namespaces/{ns}/pods", params={"gracePeriodSeconds": "0"})
        seen = frozenset(uids)
        pods = wait_for(partial(renewed, seen), 300, "the StatefulSet's pods to come back", interval=0.2)
        uids |= {meta(p)["uid"] for p in pods}
        for pod in pods:
            claim = next(iter(claim_names(pod)), "")
            variants += int(not claim.startswith(f"{ns}-{meta(pod)['name']}-app"))
    steady = ctx.settle()
    ctx.kube.delete(f"{base}/db", missing_ok=True)
    ctx.kube.request("DELETE", f"/api/v1/namespaces/{ns}/pods", params={"gracePeriodSeconds": "0"})
    ctx.gone(ns)
    names_kept = all(meta(p)["name"].startswith("db-") for p in pods)
    detail = {"replicas": replicas, "rounds": rounds, "claims_renamed_after_collision": variants,
              "leaks_while_running": len(steady.leaked_claims) + len(steady.leaked_capacity)}
    return steady.clean and names_kept, detail
