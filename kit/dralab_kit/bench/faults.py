"""``dralab bench faults``: outages and churn through the cluster's fault hooks, then a leak audit.

Each scenario drives sharing pods through a fault on a throw-away cluster of its own (never the
developer's ``dralab`` cluster) and ends with two audits, computed by the pure functions below
from what the apiserver says:

- leaked claims: ResourceClaims that no live pod references, once the webhook's grace period is
  over (the audit is polled until it is clean or the grace period plus a margin has passed);
- leaked capacity: on every device, the capacity consumed by all allocated claims (their
  ``status.allocation.devices.results[].consumedCapacity``; the whole device for an exclusive
  result, as ``dralab.model.accounting`` counts it) against what the claims of live pods hold. Any
  difference is capacity no pod can use again.

The node side is audited too: CDI specs of claims no live pod holds (the driver was never told to
unprepare), and live claims whose spec is missing (what a reboot does without an idempotent Prepare).
"""

from __future__ import annotations

import contextlib
import http.server
import json
import signal
import ssl
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from fractions import Fraction
from functools import partial
from typing import Any

import click
from rich.console import Console

from dralab.model import accounting
from dralab.model.podclaims import claim_names
from dralab_kit.bench import DEFAULT_OUT
from dralab_kit.bench.common import write_result
from dralab_kit.bench.concurrency import NODE, own_cluster, sharing_pod

console = Console(stderr=True)
CLAIMS = "/apis/resource.k8s.io/v1/resourceclaims"
SLICES = "/apis/resource.k8s.io/v1/resourceslices"
TERMINAL = ("Succeeded", "Failed")
DENY_LABEL = "bench.dralab.io/deny"
DENIER_NAME = "bench-denier"
CDI_CLASS_PREFIX = "k8s."


# ---------------------------------------------------------------- pure: the audits


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("metadata") or {}


def is_live(pod: dict[str, Any]) -> bool:
    """A pod that still exists and is not terminal holds its claims (also while it is being deleted)."""
    return (pod.get("status") or {}).get("phase") not in TERMINAL


def held_claims(pods: Iterable[dict[str, Any]]) -> set[tuple[str, str]]:
    """(namespace, claim name) of every claim a live pod uses."""
    out = set()
    for pod in pods:
        if is_live(pod):
            ns = _meta(pod).get("namespace", "")
            out |= {(ns, name) for name in claim_names(pod)}
    return out


def leaked_claims(claims: Iterable[dict[str, Any]], pods: Iterable[dict[str, Any]]) -> list[str]:
    """``namespace/name`` of claims no live pod uses (the caller polls past the grace period)."""
    held = held_claims(pods)
    return sorted(
        f"{_meta(c).get('namespace')}/{_meta(c).get('name')}"
        for c in claims
        if (_meta(c).get("namespace"), _meta(c).get("name")) not in held
    )


def capacity_leaks(claims: list[dict[str, Any]], pods: list[dict[str, Any]],
                   slices: list[dict[str, Any]]) -> list[dict[str, Any]]:  # fmt: skip
    """Devices where the consumed capacity differs from what the claims of live pods hold."""
    held = held_claims(pods)
    live = [c for c in claims if (_meta(c).get("namespace"), _meta(c).get("name")) in held]
    consumed, holding = accounting.consumed(claims, slices), accounting.consumed(live, slices)
    leaks = []
    for key in sorted(consumed):
        have, want = consumed[key], holding.get(key, {})
        caps = set(have) | set(want)
        if any(have.get(c, 0) != want.get(c, 0) for c in caps):
            leaks.append({
                "device": "/".join(key),
                "consumed": {c: accounting.plain(v) for c, v in have.items()},
                "held_by_live_pods": {c: accounting.plain(v) for c, v in want.items()},
                "leaked": {
                    c: accounting.plain(have.get(c, Fraction(0)) - want.get(c, Fraction(0))) for c in sorted(caps)
                },
            })
    return leaks


def overcommitted(slices: list[dict[str, Any]], claims: list[dict[str, Any]]) -> list[str]:
    """Devices whose consumed capacity exceeds what the slice publishes (must never happen)."""
    keys = accounting.overcommitted(accounting.device_capacities(slices), accounting.consumed(claims, slices))
    return ["/".join(key) for key in keys]


def spec_uids(file_names: Iterable[str]) -> set[str]:
    """Claim UIDs of the per-claim CDI specs in a directory listing (``k8s.<driver>-<class>_<uid>.yaml``)."""
    out = set()
    for name in file_names:
        if name.startswith(CDI_CLASS_PREFIX) and name.endswith(".yaml") and "_" in name:
            uid = name.rsplit("_", 1)[1].removesuffix(".yaml")
            if uid != "common":
                out.add(uid)
    return out


def node_audit(spec_files: Iterable[str], claims: list[dict[str, Any]], pods: list[dict[str, Any]]) -> dict[str, int]:
    """Stale specs (no live pod holds the claim) and live, allocated claims without a spec."""
    held = held_claims(pods)
    live_uids = {
        _meta(c).get("uid")
        for c in claims
        if (_meta(c).get("namespace"), _meta(c).get("name")) in held
        and (c.get("status") or {}).get("allocation")
        and (c.get("status") or {}).get("reservedFor")
    }
    on_disk = spec_uids(spec_files)
    return {"stale_cdi_specs": len(on_disk - live_uids), "missing_cdi_specs": len(live_uids - on_disk)}


@dataclass
class Audit:
    """The end state of a scenario."""

    leaked_claims: list[str] = field(default_factory=list)
    leaked_capacity: list[dict[str, Any]] = field(default_factory=list)
    overcommitted: list[str] = field(default_factory=list)
    node: dict[str, int] = field(default_factory=dict)

    @property
    def clean(self) -> bool:
        return not (self.leaked_claims or self.leaked_capacity or self.overcommitted) and not any(
            self.node.values()
        )


# ---------------------------------------------------------------- the cluster side


class Ctx:
    """What every scenario works with: the cluster, a client, sizes, the grace period."""

    def __init__(self, handle: Any, quick: bool, grace: float) -> None:
        self.handle = handle
        self.kube = handle.kube()
        self.quick = quick
        self.grace = grace
        self.namespaces: list[str] = []
        self.readiness_repairs = 0  # pods re-marked Ready after a node NotReady episode (see ``reready``)

    # -- objects

    def namespace(self, prefix: str) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:5]}"
        self.kube.create("/api/v1/namespaces", {"metadata": {"name": name}})
        self.namespaces.append(name)
        return name

    def discard(self, namespaces: list[str]) -> None:
        """Delete what a failed scenario left behind, so the next scenario starts from a clean node."""
        from dralab.kube import KubeError
        from dralab.util import WaitTimeout

        for ns in namespaces:
            with contextlib.suppress(KubeError):
                self.kube.delete(f"/api/v1/namespaces/{ns}", missing_ok=True)
        for ns in namespaces:
            with contextlib.suppress(KubeError, WaitTimeout):
                self.gone(ns, 180)

    def pods(self, ns: str | None = None) -> list[dict[str, Any]]:
        path = f"/api/v1/namespaces/{ns}/pods" if ns else "/api/v1/pods"
        return (self.kube.get(path, missing_ok=True) or {}).get("items") or []

    def claims(self, ns: str | None = None) -> list[dict[str, Any]]:
        path = f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims" if ns else CLAIMS
        return (self.kube.get(path, missing_ok=True) or {}).get("items") or []

    def create_pods(self, ns: str, pods: list[dict[str, Any]], workers: int = 16) -> list[str]:
        """Create pods concurrently; returns the error messages of those refused."""
        from dralab.kube import KubeError

        def one(pod: dict[str, Any]) -> str:
            try:
                self.kube.create(f"/api/v1/namespaces/{ns}/pods", pod)
                return ""
            except KubeError as exc:
                return f"{exc.status}: {exc.message}"

        with ThreadPoolExecutor(max_workers=workers) as pool:
            return [e for e in pool.map(one, pods) if e]

    def running(self, ns: str, count: int, timeout: float = 180.0, what: str = "") -> list[dict[str, Any]]:
        """Wait until ``count`` live pods of the namespace run (claims prepared on the node)."""
        from dralab.util import wait_for

        def ready() -> list[dict[str, Any]] | None:
            pods = [p for p in self.pods(ns) if not _meta(p).get("deletionTimestamp")]
            up = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
            return up if len(up) >= count and len(pods) == count else None

        return wait_for(ready, timeout, what or f"{count} running pods in {ns}", interval=0.2)

    def gone(self, ns: str, timeout: float = 120.0) -> None:
        from dralab.util import wait_for

        wait_for(lambda: not self.pods(ns), timeout, f"the pods of {ns} to be gone", interval=0.2)

    def spec_files(self) -> list[str]:
        folder = self.handle.cdi_dir(NODE)
        return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []

    # -- audit

    def audit(self) -> Audit:
        claims, pods = self.claims(), self.pods()
        slices = (self.kube.get(SLICES, missing_ok=True) or {}).get("items") or []
        return Audit(
            leaked_claims=leaked_claims(claims, pods),
            leaked_capacity=capacity_leaks(claims, pods, slices),
            overcommitted=overcommitted(slices, claims),
            node=node_audit(self.spec_files(), claims, pods),
        )

    def settle(self, margin: float = 60.0) -> Audit:
        """Poll the audit until it is clean or the grace period plus ``margin`` has passed."""
        deadline = time.monotonic() + self.grace + margin
        while True:
            result = self.audit()
            if result.clean or time.monotonic() >= deadline:
                return result
            time.sleep(0.5)  # polling interval while the janitor, GC and stand-in converge

    # -- faults

    def kill(self, component: str) -> None:
        """SIGKILL a component (no graceful shutdown), then mark it stopped in the cluster's state."""
        from dralab_kit.cluster import api
        from dralab_kit.cluster.supervisor import ProcRecord, signal_process

        handle = api.get_cluster(self.handle.name)
        raw = (handle.state.get("components") or {}).get(component) if handle else None
        if raw:
            signal_process(ProcRecord.from_json(raw), signal.SIGKILL)
        api.stop(self.handle.name, component)

    def start(self, component: str) -> None:
        from dralab_kit.cluster import api

        api.start(self.handle.name, component)

    def close(self) -> None:
        self.kube.close()


# ---------------------------------------------------------------- a later admission webhook that says no


class Denier:
    """A validating webhook served here that refuses pods labelled ``DENY_LABEL=true``.

    Validating webhooks run after every mutating one, so each refused pod was already mutated by
    dralab (and its claims created) when it is refused.
    """

    def __init__(self, handle: Any) -> None:
        from dralab.util import free_port
        from dralab_kit.cluster.pki import Pki

        self.handle = handle
        self.pki = Pki(handle.layout.pki_dir)
        self.port = free_port()
        self.calls = 0
        denier = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                review = json.loads(body)
                denier.calls += 1
                answer = {
                    "apiVersion": "admission.k8s.io/v1",
                    "kind": "AdmissionReview",
                    "response": {
                        "uid": review["request"]["uid"],
                        "allowed": False,
                        "status": {"code": 403, "message": "refused by a later admission webhook (bench)"},
                    },
                }
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                return

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(self.pki.cert("webhook")), str(self.pki.key("webhook")))
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, name="denier", daemon=True)

    def registration(self) -> dict[str, Any]:
        import base64

        return {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": DENIER_NAME},
            "webhooks": [{
                "name": "deny.bench.dralab.io",
                "clientConfig": {
                    "url": f"https://127.0.0.1:{self.port}/deny",
                    "caBundle": base64.b64encode(self.pki.ca_cert.read_bytes()).decode(),
                },
                "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                           "resources": ["pods"], "scope": "Namespaced"}],
                "objectSelector": {"matchLabels": {DENY_LABEL: "true"}},
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 10,
            }],
        }

    def __enter__(self) -> Denier:
        self.thread.start()
        path = f"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{DENIER_NAME}"
        kube = self.handle.kube()
        try:
            kube.apply(path, self.registration())
        finally:
            kube.close()
        return self

    def __exit__(self, *exc: object) -> None:
        kube = self.handle.kube()
        try:
            kube.delete(
                f"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{DENIER_NAME}", missing_ok=True
            )
        finally:
            kube.close()
        self.server.shutdown()
        self.server.server_close()


# ---------------------------------------------------------------- workloads


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
        st.get("observedGeneration", 0) >= _meta(dep).get("generation", 1)
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
    node = ctx.kube.get(f"/api/v1/nodes/{NODE}", missing_ok=True) or {}
    ready = [c.get("status") for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"]
    return f"{unready} of {len(pods)} pods Running but not Ready; node Ready={ready[0] if ready else '?'}"


def reready(ctx: Ctx, ns: str) -> int:
    """Mark Running pods Ready again once their node is Ready; returns how many were repaired.

    What a kubelet does after a node NotReady episode and KWOK's stages do not: the node lifecycle
    controller sets every pod of a NotReady node to Ready=False, and on the local cluster the node
    goes NotReady for a few seconds about once a minute, so without this a rollout stalls for good.
    """
    node = ctx.kube.get(f"/api/v1/nodes/{NODE}", missing_ok=True) or {}
    if not any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or []):
        return 0
    repaired = 0
    for pod in ctx.pods(ns):
        st = pod.get("status") or {}
        if st.get("phase") != "Running" or _meta(pod).get("deletionTimestamp"):
            continue
        conds = st.get("conditions") or []
        if not any(c.get("type") == "Ready" and c.get("status") == "False" for c in conds):
            continue
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        fixed = [dict(c, status="True", lastTransitionTime=now) if c.get("type") in ("Ready", "ContainersReady")
                 else c for c in conds]
        with contextlib.suppress(Exception):
            ctx.kube.patch(f"/api/v1/namespaces/{ns}/pods/{_meta(pod)['name']}/status",
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


# ---------------------------------------------------------------- scenarios


Scenario = Callable[[Ctx], tuple[bool, dict[str, Any]]]


def webhook_killed_during_deletions(ctx: Ctx) -> tuple[bool, dict[str, Any]]:
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
                ctx.kill("webhook")
                killed_at.append(time.monotonic())

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(delete, names))
    while_down = sum(1 for t in deleted if killed_at and t >= killed_at[0])
    ctx.gone(ns)
    ctx.start("webhook")
    return not errors, {"pods": n, "create_errors": len(errors), "deleted_while_webhook_down": while_down}


def rejected_by_later_webhook(ctx: Ctx) -> tuple[bool, dict[str, Any]]:
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


def deployment_churn(ctx: Ctx) -> tuple[bool, dict[str, Any]]:
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


def statefulset_same_names(ctx: Ctx) -> tuple[bool, dict[str, Any]]:
    """StatefulSet pods deleted and recreated under the same names, round after round."""
    replicas, rounds = (3, 2) if ctx.quick else (5, 5)
    ns = ctx.namespace("f-sts")
    base = f"/apis/apps/v1/namespaces/{ns}/statefulsets"
    ctx.kube.create(base, statefulset("db", replicas))
    pods = ctx.running(ns, replicas, timeout=180)
    uids = {_meta(p)["uid"] for p in pods}
    variants = 0
    from dralab.util import wait_for

    def renewed(seen: frozenset[str]) -> list[dict[str, Any]] | None:
        live = [p for p in ctx.pods(ns) if not _meta(p).get("deletionTimestamp")]
        up = [p for p in live if (p.get("status") or {}).get("phase") == "Running"]
        fresh = [p for p in up if _meta(p)["uid"] not in seen]
        return fresh if len(fresh) == replicas else None

    for _ in range(rounds):
        ctx.kube.request("DELETE", f"/api/v1/namespaces/{ns}/pods", params={"gracePeriodSeconds": "0"})
        seen = frozenset(uids)
        pods = wait_for(partial(renewed, seen), 300, "the StatefulSet's pods to come back", interval=0.2)
        uids |= {_meta(p)["uid"] for p in pods}
        for pod in pods:
            claim = next(iter(claim_names(pod)), "")
            variants += int(not claim.startswith(f"{ns}-{_meta(pod)['name']}-app"))
    steady = ctx.settle()
    ctx.kube.delete(f"{base}/db", missing_ok=True)
    ctx.kube.request("DELETE", f"/api/v1/namespaces/{ns}/pods", params={"gracePeriodSeconds": "0"})
    ctx.gone(ns)
    names_kept = all(_meta(p)["name"].startswith("db-") for p in pods)
    detail = {"replicas": replicas, "rounds": rounds, "claims_renamed_after_collision": variants,
              "leaks_while_running": len(steady.leaked_claims) + len(steady.leaked_capacity)}
    return steady.clean and names_kept, detail


def driver_killed_during_prepare(ctx: Ctx) -> tuple[bool, dict[str, Any]]:
    """The node driver SIGKILLed while the kubelet prepares a burst of pods, restarted 2 s later."""
    from dralab.util import wait_for

    n = 10 if ctx.quick else 30
    ns = ctx.namespace("f-drv")
    records = ctx.handle.records_path(NODE)
    before = records.read_text().count("NodePrepareResources") if records.exists() else 0
    component = f"driver/{NODE}"
    errors: list[str] = []
    creator = threading.Thread(target=lambda: errors.extend(ctx.create_pods(ns, [sharing_pod(f"d{i}")
                                                                                   for i in range(n)])))
    creator.start()
    wait_for(lambda: records.exists() and records.read_text().count("NodePrepareResources") > before, 120,
             "the first prepare call", interval=0.05)
    ctx.kill(component)
    killed = time.monotonic()
    prepared_before = sum(
        1 for p in ctx.pods(ns) if (p.get("status") or {}).get("phase") == "Running"
    )
    wait_for(lambda: time.monotonic() - killed >= 2.0, 5, "a 2 s outage", interval=0.1)
    ctx.start(component)
    creator.join()
    ctx.running(ns, n - len(errors), timeout=180)
    mid = ctx.audit()
    ctx.kube.request("DELETE", f"/api/v1/namespaces/{ns}/pods", params={"gracePeriodSeconds": "0"})
    ctx.gone(ns)
    detail = {"pods": n, "create_errors": len(errors), "running_when_killed": prepared_before,
              "missing_cdi_specs_after_restart": mid.node.get("missing_cdi_specs", 0)}
    return not errors and not mid.node.get("missing_cdi_specs"), detail


def cdi_wiped_reboot(ctx: Ctx) -> tuple[bool, dict[str, Any]]:
    """A reboot: node components stopped, the CDI dir emptied, restarted; claims prepared again; pods restarted."""
    from dralab_kit.cluster import api

    replicas = 5 if ctx.quick else 10
    ns = ctx.namespace("f-cdi")
    base = f"/apis/apps/v1/namespaces/{ns}/deployments"
    ctx.kube.create(base, deployment("svc", replicas))
    wait_rollout(ctx, ns, "svc", replicas, "the deployment")
    for comp in (f"kubelet/{NODE}", f"driver/{NODE}"):
        ctx.kill(comp)
    wiped = api.wipe_cdi(ctx.handle.name, NODE)
    for comp in (f"driver/{NODE}", f"kubelet/{NODE}"):
        ctx.start(comp)
    # After a reboot the kubelet prepares the claims of every pod it restarts on the node; the
    # stand-in does not replay that, so the calls are made here, exactly as the kubelet makes them.
    held = held_claims(p for p in ctx.pods() if (p.get("spec") or {}).get("nodeName") == NODE)
    claims = [c for c in ctx.claims() if (_meta(c)["namespace"], _meta(c)["name"]) in held
              and (c.get("status") or {}).get("allocation")]
    errors = reprepare(ctx, claims)
    after = node_audit(ctx.spec_files(), ctx.claims(), ctx.pods())
    common_back = any(n.endswith("_common.yaml") for n in ctx.spec_files())
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
    from dralab.util import wait_for

    drivers = {r.get("driver") for c in claims for r in
               (((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []}
    errors = []
    for drv in sorted(d for d in drivers if d):
        sock = ctx.handle.layout.plugins_dir(NODE) / drv / "dra.sock"
        wait_for(sock.exists, 60, f"the driver socket {sock}")
        req = dra_v1_pb2.NodePrepareResourcesRequest(
            claims=[dra_v1_pb2.Claim(namespace=_meta(c)["namespace"], name=_meta(c)["name"], uid=_meta(c)["uid"])
                    for c in claims]
        )
        with grpc.insecure_channel(f"unix://{sock}") as ch:
            resp = dra_v1_pb2_grpc.DRAPluginStub(ch).NodePrepareResources(req, timeout=45)
        errors += [f"{uid}: {r.error}" for uid, r in resp.claims.items() if r.error]
        errors += [f"{_meta(c)['uid']}: no answer" for c in claims if _meta(c)["uid"] not in resp.claims]
    return errors


def apiserver_restarted_mid_run(ctx: Ctx) -> tuple[bool, dict[str, Any]]:
    """The apiserver restarted while a Deployment scales up; then scaled further once it is back."""
    from dralab.util import wait_for
    from dralab_kit.cluster import api

    first, second = (8, 12) if ctx.quick else (30, 40)
    ns = ctx.namespace("f-api")
    base = f"/apis/apps/v1/namespaces/{ns}/deployments"
    ctx.kube.create(base, deployment("grow", first))
    wait_for(lambda: any(is_live(p) for p in ctx.pods(ns)), 60, "the first pods", interval=0.1)
    started = time.monotonic()
    api.restart(ctx.handle.name, "apiserver")
    outage = time.monotonic() - started
    ctx.kube.close()
    ctx.kube = ctx.handle.kube()
    wait_rollout(ctx, ns, "grow", first, "the deployment after the restart")
    ctx.kube.patch(f"{base}/grow", {"spec": {"replicas": second}})
    wait_rollout(ctx, ns, "grow", second, "the scale-up after the restart")
    steady = ctx.settle()
    ctx.kube.delete(f"{base}/grow", propagation="Foreground", missing_ok=True)
    ctx.gone(ns)
    detail = {"replicas": [first, second], "apiserver_restart_s": round(outage, 1),
              "leaks_while_running": len(steady.leaked_claims) + len(steady.leaked_capacity)}
    return steady.clean, detail


SCENARIOS: dict[str, Scenario] = {
    "webhook_killed_during_deletions": webhook_killed_during_deletions,
    "rejected_by_later_webhook": rejected_by_later_webhook,
    "deployment_churn": deployment_churn,
    "statefulset_same_names": statefulset_same_names,
    "driver_killed_during_prepare": driver_killed_during_prepare,
    "cdi_wiped_reboot": cdi_wiped_reboot,
    "apiserver_restarted_mid_run": apiserver_restarted_mid_run,
}


def run_scenario(ctx: Ctx, name: str) -> dict[str, Any]:
    """One scenario and its final audit, as a row of faults.json."""
    started = time.monotonic()
    detail: dict[str, Any] = {}
    ok = False
    first_ns = len(ctx.namespaces)
    repairs_before = ctx.readiness_repairs
    try:
        ok, detail = SCENARIOS[name](ctx)
    except Exception as exc:  # a scenario that breaks is a failed scenario, and the run goes on
        detail = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        with contextlib.suppress(Exception):
            ctx.kube.close()
        ctx.kube = ctx.handle.kube()
        ctx.discard(ctx.namespaces[first_ns:])
    final = ctx.settle()
    detail["final_audit"] = {
        "leaked_claims": final.leaked_claims[:10],
        "leaked_capacity": final.leaked_capacity[:5],
        "overcommitted_devices": final.overcommitted,
        **final.node,
    }
    detail["duration_s"] = round(time.monotonic() - started, 1)
    detail["pods_reready_after_node_notready"] = ctx.readiness_repairs - repairs_before
    row = {
        "name": name,
        "passed": bool(ok and final.clean),
        "leaked_claims": len(final.leaked_claims),
        "leaked_capacity": len(final.leaked_capacity),
        "detail": detail,
    }
    mark = "PASS" if row["passed"] else "FAIL"
    console.print(f"{mark} {name}: leaked claims {row['leaked_claims']}, leaked capacity {row['leaked_capacity']}, "
                  f"{json.dumps(detail)[:400]}", markup=False, highlight=False)
    return row


def run_all(
    handle: Any, quick: bool, grace: float, only: Iterable[str] | None = None
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every scenario in order; also the audit of the idle cluster before them (the baseline)."""
    ctx = Ctx(handle, quick, grace)
    try:
        idle = ctx.audit()
        baseline = {"what": "audit of the idle cluster before any scenario",
                    "leaked_claims": len(idle.leaked_claims), "leaked_capacity": len(idle.leaked_capacity),
                    **idle.node}
        return [run_scenario(ctx, name) for name in (list(only) if only else list(SCENARIOS))], baseline
    finally:
        ctx.close()


def grace_for(quick: bool) -> int:
    """The janitor's grace period on the benchmark's cluster: the shipped default, or 10 s for quick runs."""
    from dralab.config import default_config

    return 10 if quick else int(default_config().webhook.claim_grace_period_seconds)


@click.command()
@click.option("--out", default=DEFAULT_OUT, show_default=True, help="folder for faults.json")
@click.option("--quick", is_flag=True, help="smaller workloads and a 10 s claim grace period")
@click.option("--scenario", "only", multiple=True, type=click.Choice(sorted(SCENARIOS)), help="run only these")
def faults(out: str, quick: bool, only: tuple[str, ...]) -> None:
    """Fault scenarios (webhook/driver/apiserver outages, churn, reboots), each ending in a leak audit.

    Runs on a throw-away cluster of its own (one KWOK node, 8 fake 310P3), never on `dralab`.

    \b
    Example:
      dralab bench faults --quick --out /tmp/results
    """
    from dralab_kit.cluster import build

    build.require_binaries()
    grace = grace_for(quick)
    started = time.monotonic()
    with own_cluster("faults", config={"webhook": {"claimGracePeriodSeconds": grace}}) as handle:
        rows, baseline = run_all(handle, quick, grace, only)
    result = {
        "scenarios": rows,
        "passed": sum(r["passed"] for r in rows),
        "failed": sum(not r["passed"] for r in rows),
        "claim_grace_period_s": grace,
        "baseline": baseline,
        "duration_s": round(time.monotonic() - started, 1),
        "quick": quick,
    }
    path = write_result(out, "faults", result)
    click.echo(f"{result['passed']}/{len(rows)} scenarios passed -> {path}")


__all__ = [
    "SCENARIOS",
    "Audit",
    "capacity_leaks",
    "leaked_claims",
    "node_audit",
    "overcommitted",
]
