"""What every fault scenario works with: the cluster's apiserver, the struck node, sizes, the grace period.

Reads only; the judging is :mod:`.audit`'s. :meth:`Ctx.audit` gathers pods, claims, slices and the
node's CDI folder and hands them to the pure audits; :meth:`Ctx.settle` polls that audit until it is
clean or the webhook's claim grace period (plus a margin) has passed, since the janitor, the garbage
collector and the kubelet converge in their own time.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from dralab_kit.faults.audit import (
    Audit,
    capacity_leaks,
    leaked_claims,
    node_audit,
    overcommitted,
)
from dralab_kit.faults.target import Target

CLAIMS = "/apis/resource.k8s.io/v1/resourceclaims"
SLICES = "/apis/resource.k8s.io/v1/resourceslices"


def meta(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("metadata") or {}


class Ctx:
    def __init__(self, handle: Any, quick: bool, grace: float, target: Target | None = None) -> None:
        self.handle = handle
        self.target = target or Target.of(handle)
        self.kube = handle.kube()
        self.quick = quick
        self.grace = grace
        self.namespaces: list[str] = []
        self.readiness_repairs = 0  # pods re-marked Ready after a node NotReady episode (``workloads.reready``)

    @property
    def node(self) -> str:
        return self.target.node

    def reconnect(self) -> None:
        """A fresh client (after the apiserver restarted, or a scenario broke mid-request)."""
        with contextlib.suppress(Exception):
            self.kube.close()
        self.kube = self.handle.kube()

    # -- objects

    def namespace(self, prefix: str) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:5]}"
        self.kube.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        self.namespaces.append(name)
        return name

    def delete_namespace(self, ns: str, timeout: float = 180) -> None:
        """Delete a namespace and wait until it is gone (its pods, claims and their node state with it)."""
        from dralab.util import wait_for

        self.kube.delete(f"/api/v1/namespaces/{ns}", missing_ok=True)
        wait_for(lambda: self.kube.get(f"/api/v1/namespaces/{ns}", missing_ok=True) is None, timeout,
                 f"namespace {ns} gone", interval=0.2)

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
        return self._create_each(ns, [[("pods", pod)] for pod in pods], workers)

    def create_sharing(self, ns: str, names: list[str], labels: dict[str, str] | None = None,
                       workers: int = 16, strict: bool = False) -> list[str]:  # fmt: skip
        """One sharing pod per name, and its claim where the profile needs one (:meth:`Target.sharing_objects`),
        created concurrently; returns the error messages of those refused (``strict``: raises on the first)."""
        errors = self._create_each(ns, [self.target.sharing_objects(n, labels) for n in names], workers)
        if strict and errors:
            raise RuntimeError(f"{len(errors)} of {len(names)} sharing pods refused in {ns}: {errors[0]}")
        return errors

    def _create_each(self, ns: str, groups: list[list[tuple[str, dict[str, Any]]]], workers: int) -> list[str]:
        from dralab.kube import KubeError

        def one(group: list[tuple[str, dict[str, Any]]]) -> str:
            try:
                for kind, obj in group:
                    prefix = "/api/v1" if kind == "pods" else "/apis/resource.k8s.io/v1"
                    self.kube.create(f"{prefix}/namespaces/{ns}/{kind}", obj)
                return ""
            except KubeError as exc:
                return f"{exc.status}: {exc.message}"

        with ThreadPoolExecutor(max_workers=workers) as pool:
            return [e for e in pool.map(one, groups) if e]

    def running(self, ns: str, count: int, timeout: float = 180.0, what: str = "") -> list[dict[str, Any]]:
        """Wait until ``count`` live pods of the namespace run (claims prepared on the node)."""
        from dralab.util import wait_for

        def ready() -> list[dict[str, Any]] | None:
            pods = [p for p in self.pods(ns) if not meta(p).get("deletionTimestamp")]
            up = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
            return up if len(up) >= count and len(pods) == count else None

        return wait_for(ready, timeout, what or f"{count} running pods in {ns}", interval=0.2)

    def gone(self, ns: str, timeout: float = 120.0) -> None:
        from dralab.util import wait_for

        wait_for(lambda: not self.pods(ns), timeout, f"the pods of {ns} to be gone", interval=0.2)

    def claim_uids(self, ns: str) -> dict[str, str]:
        """Claim name -> uid in a namespace (on ``node`` the bench names each claim after its pod)."""
        return {meta(c)["name"]: meta(c)["uid"] for c in self.claims(ns)}

    def container_ids(self, ns: str) -> dict[str, str]:
        return {
            meta(p)["name"]: (((p.get("status") or {}).get("containerStatuses") or [{}])[0].get("containerID", ""))
            for p in self.pods(ns)
        }

    def restarted(self, ns: str, name: str, old_container: str) -> bool:
        """Running and ready in a container other than ``old_container`` (the one before the reboot)."""
        obj = self.kube.get(f"/api/v1/namespaces/{ns}/pods/{name}", missing_ok=True) or {}
        status = obj.get("status") or {}
        ctr = (status.get("containerStatuses") or [{}])[0]
        return (status.get("phase") == "Running" and bool(ctr.get("ready"))
                and ctr.get("containerID", old_container) != old_container)

    def node_ready(self) -> bool:
        obj = self.kube.get(f"/api/v1/nodes/{self.node}", missing_ok=True) or {}
        return any(c.get("type") == "Ready" and c.get("status") == "True"
                   for c in (obj.get("status") or {}).get("conditions") or [])

    @staticmethod
    def settles(check: Callable[[], Any], timeout: float, what: str) -> bool:
        """Whether ``check`` holds within ``timeout`` (a wait whose timeout is a finding, not an error)."""
        from dralab.util import WaitTimeout, wait_for

        try:
            wait_for(check, timeout, what, interval=0.05)
        except WaitTimeout:
            return False
        return True

    # -- audit

    def audit(self) -> Audit:
        claims, pods = self.claims(), self.pods()
        slices = (self.kube.get(SLICES, missing_ok=True) or {}).get("items") or []
        return Audit(
            leaked_claims=leaked_claims(claims, pods),
            leaked_capacity=capacity_leaks(claims, pods, slices),
            overcommitted=overcommitted(slices, claims),
            node=node_audit(self.target.spec_files(), claims, pods),
        )

    def settle(self, margin: float = 60.0) -> Audit:
        """Poll the audit until it is clean or the grace period plus ``margin`` has passed."""
        deadline = time.monotonic() + self.grace + margin
        while True:
            result = self.audit()
            if result.clean or time.monotonic() >= deadline:
                return result
            time.sleep(0.5)  # polling interval while the janitor, GC and kubelet converge

    def close(self) -> None:
        self.kube.close()
