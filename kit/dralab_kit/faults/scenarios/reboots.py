"""Scenarios of what a reboot leaves: the CDI folder emptied (with the stand-in on ``local``, with the
real kubelet on ``node``) and a whole reboot of the real node with a pod deleted while it is off."""

from __future__ import annotations

import time
from typing import Any

from dralab.util import wait_for
from dralab_kit.cluster import api
from dralab_kit.faults.audit import held_claims, missing_specs, node_audit
from dralab_kit.faults.context import Ctx, meta
from dralab_kit.faults.engine import Outcome, scenario
from dralab_kit.faults.workloads import deployment, wait_rollout


@scenario("local")
def cdi_wiped_reboot(ctx: Ctx) -> Outcome:
    """A reboot: node components stopped, the CDI dir emptied, restarted; claims prepared again; pods restarted."""
    replicas = 5 if ctx.quick else 10
    ns = ctx.namespace("f-cdi")
    base = f"/apis/apps/v1/namespaces/{ns}/deployments"
    ctx.kube.create(base, deployment("svc", replicas))
    wait_rollout(ctx, ns, "svc", replicas, "the deployment")
    for role in ("kubelet", "driver"):
        ctx.target.kill(role)
    wiped = ctx.target.wipe_cdi()
    for role in ("driver", "kubelet"):
        ctx.target.start(role)
    # After a reboot the kubelet prepares the claims of every pod it restarts on the node; the
    # stand-in does not replay that, so the calls are made here, exactly as the kubelet makes them.
    held = held_claims(p for p in ctx.pods() if (p.get("spec") or {}).get("nodeName") == ctx.node)
    claims = [c for c in ctx.claims() if (meta(c)["namespace"], meta(c)["name"]) in held
              and (c.get("status") or {}).get("allocation")]
    errors = reprepare(ctx, claims)
    after = node_audit(ctx.target.spec_files(), ctx.claims(), ctx.pods())
    common_back = any(n.endswith("_common.yaml") for n in ctx.target.spec_files())
    patch = {"spec": {"template": {"metadata": {"annotations": {"bench.dralab.io/rev": "restarted"}}}}}
    ctx.kube.patch(f"{base}/svc", patch)
    wait_rollout(ctx, ns, "svc", replicas, "the restarted pods")
    steady = ctx.settle()
    ctx.kube.delete(f"{base}/svc", propagation="Foreground", missing_ok=True)
    ctx.gone(ns)
    detail = {"pods": replicas, "cdi_files_wiped": wiped, "reprepare_errors": errors[:3],
              "missing_cdi_specs_after_reprepare": after["missing_cdi_specs"], "common_spec_rewritten": common_back,
              "leaks_while_running": len(steady.leaked_claims) + len(steady.leaked_capacity)}
    ok = not errors and after["missing_cdi_specs"] == 0 and common_back and steady.clean
    return ok, detail


def reprepare(ctx: Ctx, claims: list[dict[str, Any]]) -> list[str]:
    """NodePrepareResources for ``claims`` on the node driver's v1 socket; the per-claim errors."""
    import grpc

    from dralab.driver.proto import dra_v1_pb2, dra_v1_pb2_grpc

    drivers = {r.get("driver") for c in claims for r in
               (((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []}
    errors = []
    for drv in sorted(d for d in drivers if d):
        sock = ctx.handle.layout.plugins_dir(ctx.node) / drv / "dra.sock"
        wait_for(sock.exists, 60, f"the driver socket {sock}")
        req = dra_v1_pb2.NodePrepareResourcesRequest(
            claims=[dra_v1_pb2.Claim(namespace=meta(c)["namespace"], name=meta(c)["name"], uid=meta(c)["uid"])
                    for c in claims]
        )
        with grpc.insecure_channel(f"unix://{sock}") as ch:
            resp = dra_v1_pb2_grpc.DRAPluginStub(ch).NodePrepareResources(req, timeout=45)
        errors += [f"{uid}: {r.error}" for uid, r in resp.claims.items() if r.error]
        errors += [f"{meta(c)['uid']}: no answer" for c in claims if meta(c)["uid"] not in resp.claims]
    return errors


@scenario("node")
def cdi_wiped_kubelet_restart(ctx: Ctx) -> Outcome:
    """The CDI folder wiped under running claim pods, then the real kubelet restarted (what a reboot leaves).

    A new claim pod must start; whether the old claims' specs come back is recorded, not required
    (the kubelet does not prepare claims of pods it still runs)."""
    ns = ctx.namespace("f-cdi")
    names = [f"p{i}" for i in range(3)]
    ctx.create_sharing(ns, names, strict=True)
    ctx.running(ns, len(names))
    uids = set(ctx.claim_uids(ns).values())
    wiped = ctx.target.wipe_cdi()
    before = len(ctx.target.records())
    ctx.target.restart("kubelet")
    wait_for(ctx.node_ready, 120, "node Ready", interval=0.05)
    ctx.create_sharing(ns, ["after"], strict=True)
    ctx.running(ns, len(names) + 1)
    calls = [r.get("call") for r in ctx.target.records()[before:]
             if any(c.get("uid") in uids for c in r.get("claims") or [])]
    restored = uids - set(missing_specs(uids, ctx.target.spec_files()))
    common_after_kubelet = any(f.endswith("_common.yaml") for f in ctx.target.spec_files())
    ctx.target.restart("driver")  # a reboot restarts the driver too: it rewrites its common spec at start
    common_after_driver = any(f.endswith("_common.yaml") for f in ctx.target.spec_files())
    ctx.delete_namespace(ns)
    detail = {"cdi_files_wiped": wiped, "old_claims": len(uids), "old_specs_restored": len(restored),
              "kubelet_calls_for_old_claims_after_restart": calls,
              "common_spec_back_after_kubelet_restart": common_after_kubelet,
              "common_spec_back_after_driver_restart": common_after_driver, "new_claim_pod_running": True}
    return common_after_driver, detail


@scenario("node")
def reboot(ctx: Ctx) -> Outcome:
    """A reboot of the real node (``dralab cluster reboot``) with one pod and its claim deleted while it is off.

    Met when the other pods run again in new containers with the same claims, each prepared again by
    the kubelet with its CDI spec back, the same NPU_* env and /etc/ld.so.preload inside, and nothing
    (claim folder, CDI spec, checkpoint entry) is left of the deleted claim or, after cleanup, of any.
    """
    ns = ctx.namespace("f-reboot")
    names = [f"p{i}" for i in range(3)]
    ctx.create_sharing(ns, [*names, "gone"], strict=True)
    ctx.running(ns, len(names) + 1)
    claims, containers = ctx.claim_uids(ns), ctx.container_ids(ns)
    seen = {n: ctx.target.enforcement_view(ns, n) for n in names}
    had_traces = bool(ctx.target.claim_traces(claims["gone"]))
    before = len(ctx.target.records())

    powered_off = time.monotonic()
    api.reboot(ctx.handle.name, ctx.node, start=False)
    # deleted while the node is off: no kubelet confirms it, so by force, and its claim with it
    ctx.kube.delete(f"/api/v1/namespaces/{ns}/pods/gone", grace_period_seconds=0)
    claim_path = f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/gone"
    ctx.kube.delete(claim_path, missing_ok=True)
    wait_for(lambda: ctx.kube.get(claim_path, missing_ok=True) is None, 60, "the deleted pod's claim gone",
             interval=0.05)
    powered_on = time.monotonic()
    api.ensure_cluster(ctx.handle.name, real_node=True)
    node_up = time.monotonic()
    wait_for(lambda: all(ctx.restarted(ns, n, containers[n]) for n in names), 300, "the pods Running again",
             interval=0.05)
    all_running = time.monotonic()

    now = ctx.claim_uids(ns)
    same_claims = {n: now.get(n) == claims[n] for n in names}
    views = {n: ctx.target.enforcement_view(ns, n) for n in names}
    live = {claims[n] for n in names}
    prepared = {c.get("uid") for r in ctx.target.records()[before:]
                if r.get("call") == "NodePrepareResources" and not r.get("error") for c in r.get("claims") or []}
    missing = missing_specs(live, ctx.target.spec_files())
    # the kubelet unprepares what no pod holds any more once it has synced: seconds, not at once
    cleaned = ctx.settles(lambda: not ctx.target.claim_traces(claims["gone"]), 180, "no trace of the deleted claim")
    cleaned_at = time.monotonic()
    ctx.delete_namespace(ns)

    def leftovers() -> list[str]:
        return [t for uid in sorted(live | {claims["gone"]}) for t in ctx.target.claim_traces(uid)]

    ctx.settles(lambda: not leftovers(), 60, "no trace of the fault's claims after cleanup")
    leaked = leftovers()
    quota = next((line for line in views[names[0]].splitlines() if "NPU_MEM_QUOTA" in line), None)
    ok = (had_traces and cleaned and all(same_claims.values()) and views == seen
          and quota == "NPU_MEM_QUOTA=1024" and live <= prepared and not missing and not leaked)
    detail: dict[str, Any] = {
        "pods": len(names), "deleted_while_off": 1,
        "power_off_to_all_pods_running_seconds": round(all_running - powered_off, 2),
        "node_off_seconds": round(powered_on - powered_off, 2),
        "power_on_to_node_healthy_seconds": round(node_up - powered_on, 2),
        "power_on_to_all_pods_running_seconds": round(all_running - powered_on, 2),
        "deleted_claim_traces_gone_seconds": round(cleaned_at - all_running, 2),
        "same_claims": sum(same_claims.values()), "same_env_and_preload": views == seen, "quota_inside": quota,
        "prepared_again": len(live & prepared), "missing_specs": missing, "leaked": leaked,
    }
    return ok, detail
