"""The controllers' workloads the scenarios drive (Deployments, StatefulSets) and waiting for their rollouts.

On the local profile KWOK plays the pods' containers and never re-readies a pod after a node
NotReady episode, which a kubelet does; :func:`reready` does that part so a rollout can finish.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from dralab_kit.faults.context import Ctx, meta
from dralab_kit.fixtures.pods import sharing_pod


def deployment(name: str, replicas: int, rev: str = "0") -> dict[str, Any]:
    template = sharing_pod(generate_name=f"{name}-", labels={"app": name})
    meta = {"labels": {"app": name}, "annotations": {"bench.dralab.io/rev": rev}}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
            "template": {"metadata": meta, "spec": template["spec"]},
        },
    }


def statefulset(name: str, replicas: int) -> dict[str, Any]:
    template = sharing_pod(generate_name=f"{name}-", labels={"app": name})
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": template["spec"]},
        },
    }


def rolled_out(dep: dict[str, Any] | None, replicas: int) -> bool:
    """A Deployment whose rollout is complete: every replica updated and available, no old ones left."""
    if not dep:
        return False
    st = dep.get("status") or {}
    return (
        st.get("observedGeneration", 0) >= meta(dep).get("generation", 1)
        and st.get("updatedReplicas", 0) == replicas
        and st.get("availableReplicas", 0) == replicas
        and st.get("replicas", 0) == replicas
    )


def stall_reason(ctx: Ctx, ns: str) -> str:
    """Why a rollout may hang: pods Running but not Ready (KWOK never re-readies them after a node
    NotReady episode), and the node's Ready condition now."""
    pods = ctx.pods(ns)
    unready = sum(
        1 for p in pods
        if (p.get("status") or {}).get("phase") == "Running"
        and any(c.get("type") == "Ready" and c.get("status") != "True" for c in (p.get("status") or {}).get(
            "conditions") or [])
    )
    node = ctx.kube.get(f"/api/v1/nodes/{ctx.node}", missing_ok=True) or {}
    ready = [c.get("status") for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"]
    return f"{unready} of {len(pods)} pods Running but not Ready; node Ready={ready[0] if ready else '?'}"


def reready(ctx: Ctx, ns: str) -> int:
    """Mark Running pods Ready again once their node is Ready; returns how many were repaired.

    What a kubelet does after a node NotReady episode and KWOK's stages do not: the node lifecycle
    controller sets every pod of a NotReady node to Ready=False, and on the local cluster the node
    goes NotReady for a few seconds about once a minute, so without this a rollout stalls for good.
    """
    node = ctx.kube.get(f"/api/v1/nodes/{ctx.node}", missing_ok=True) or {}
    if not any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or []):
        return 0
    repaired = 0
    for pod in ctx.pods(ns):
        st = pod.get("status") or {}
        if st.get("phase") != "Running" or meta(pod).get("deletionTimestamp"):
            continue
        conds = st.get("conditions") or []
        if not any(c.get("type") == "Ready" and c.get("status") == "False" for c in conds):
            continue
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        fixed = [dict(c, status="True", lastTransitionTime=now) if c.get("type") in ("Ready", "ContainersReady")
                 else c for c in conds]
        with contextlib.suppress(Exception):
            ctx.kube.patch(f"/api/v1/namespaces/{ns}/pods/{meta(pod)['name']}/status",
                           {"status": {"conditions": fixed}})
            repaired += 1
    return repaired


def wait_rollout(ctx: Ctx, ns: str, name: str, replicas: int, what: str, timeout: float = 300) -> None:
    from dralab.util import WaitTimeout, wait_for

    path = f"/apis/apps/v1/namespaces/{ns}/deployments/{name}"

    def done() -> bool:
        if rolled_out(ctx.kube.get(path, missing_ok=True), replicas):
            return True
        ctx.readiness_repairs += reready(ctx, ns)
        return False

    try:
        wait_for(done, timeout, what, interval=0.2)
    except WaitTimeout as exc:
        raise RuntimeError(f"{exc} ({stall_reason(ctx, ns)})") from None
