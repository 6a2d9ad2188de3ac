"""The kubelet stand-in of one KWOK node: prepare claims before pods run, unprepare after they are gone.

A pod with claims is started by the stand-in itself once its claims are prepared: one ``pods/status``
write, as a kubelet does (:mod:`dralab_kit.cluster.standin.status`); KWOK starts only pods without claims.

Threads: a pod watcher (pods bound to this node -> work queue), a plugin loop (registry scan,
reachability, ResourceSlice cleanup) and one worker that syncs pods from the queue, with a
per-pod exponential backoff after failures. A periodic full resync catches anything a watch missed.
"""

from __future__ import annotations

import heapq
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc

from dralab.kube import Kube, KubeError, ListWatch
from dralab.kube.paths import SLICES_PATH, claim_path, node_path, pods_path, segment
from dralab.util import get_logger, spread_start
from dralab_kit.cluster.standin import logic, status
from dralab_kit.cluster.standin.checkpoint import Checkpoint, PreparedClaim
from dralab_kit.cluster.standin.plugins import PluginManager

log = get_logger("dralab.standin")

FAILED_PREPARE = "FailedPrepareDynamicResources"
RESYNC_SECONDS = 10.0


def _now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class Records:
    """Append-only JSON lines of every DRA call."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def append(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, sort_keys=False) + "\n"
        with self._lock, self.path.open("a") as fh:
            fh.write(line)
            fh.flush()


class StandIn:
    """One node's DRA kubelet duties."""

    def __init__(
        self,
        node: str,
        kube: Kube,
        node_dir: Path,
        slice_cleanup_seconds: float = 30.0,
        metrics: Any = None,
        plugin_seconds: float = 0.25,
        resync_seconds: float = RESYNC_SECONDS,
    ) -> None:
        """``plugin_seconds``: how often the registry is scanned and plugins probed; ``resync_seconds``:
        how often the node's pods are listed again besides the watch (a fleet process of hundreds of
        nodes does both less often: 500 nodes' 10 s pod LISTs were half the reads that stalled its
        apiserver)."""
        self.node = node
        self.plugin_seconds = plugin_seconds
        self.resync_seconds = resync_seconds
        self.kube = kube
        self.node_dir = node_dir
        self.plugins = PluginManager(node_dir / "registry")
        self.checkpoint = Checkpoint.load(node_dir / "kubelet-checkpoint.json")
        self.records = Records(node_dir / "kubelet-records.jsonl")
        self.slice_cleanup_seconds = slice_cleanup_seconds
        self.metrics = metrics
        self.pods: dict[str, dict[str, Any]] = {}
        self.failures: dict[str, int] = {}
        self.waits: dict[str, int] = {}  # pod uid -> looks in a row that found its claims not ready
        self.events: dict[tuple[str, str], tuple[str, int]] = {}
        self.started = time.time()
        self.ready = threading.Event()
        self.stopping = threading.Event()
        self._queue: list[tuple[float, str]] = []
        self._queued: dict[str, float] = {}
        self._cond = threading.Condition()
        self._orphan_drivers: set[str] = set()
        self._wipe_retries: dict[str, tuple[int, float]] = {}  # driver -> (failed wipes, next attempt)
        self.ips = status.PodIPs()
        self._started: set[str] = set()  # pods this process wrote Running for (the watch may lag behind)
        self._host_ip: str | None = None
        self.pod_watch = ListWatch(
            kube,
            pods_path(),
            field_selector=f"spec.nodeName={node}",
            on_list=self._listed,
            on_event=self._pod_event,
            watch_seconds=120,
            backoff=(1.0, 5.0),
            name=f"pods of {node}",
        )

    # ------------------------------------------------------------ queue

    def enqueue(self, uid: str, delay: float = 0.0) -> None:
        due = time.monotonic() + delay
        with self._cond:
            if uid in self._queued and self._queued[uid] <= due:
                return
            self._queued[uid] = due
            heapq.heappush(self._queue, (due, uid))
            self._cond.notify()

    def _next(self) -> str | None:
        with self._cond:
            while not self.stopping.is_set():
                if self._queue:
                    due, uid = self._queue[0]
                    wait = due - time.monotonic()
                    if wait <= 0:
                        heapq.heappop(self._queue)
                        if self._queued.get(uid) == due:
                            del self._queued[uid]
                            return uid
                        continue
                    self._cond.wait(wait)
                else:
                    self._cond.wait()  # enqueue() and stop() notify: no polling (hundreds of idle nodes)
            return None

    # ------------------------------------------------------------ loops

    def run(self) -> None:
        """Run until ``stop``."""
        failures = 0
        while not self.stopping.is_set():
            try:
                self._list_pods()
                break
            except Exception as exc:  # the API server may be down (fault tests): keep trying
                failures += 1
                log.info("initial pod list failed", extra={"fields": {"error": str(exc)[:200]}})
                self.stopping.wait(logic.backoff(failures, cap=5.0))
        for known in self.checkpoint.pod_uids() | {c.uid for c in self.checkpoint.unused()}:
            self.enqueue(known)
        self._note_existing_slices()
        threads = [
            threading.Thread(target=self._watch_loop, name="watch", daemon=True),
            threading.Thread(target=self._plugin_loop, name="plugins", daemon=True),
            threading.Thread(target=self._resync_loop, name="resync", daemon=True),
        ]
        for thread in threads:
            thread.start()
        self.ready.set()
        while not self.stopping.is_set():
            uid = self._next()
            if uid is None:
                break
            try:
                self.sync(uid)
            except Exception:  # a bug must not stop the node: log, back off, retry
                log.exception("sync failed", extra={"fields": {"uid": uid}})
                self.enqueue(uid, logic.BACKOFF_MAX)

    def stop(self) -> None:
        self.stopping.set()
        with self._cond:
            self._cond.notify_all()

    def _list_pods(self) -> None:
        """List this node's pods (through the watch, whose version then moves to the list's)."""
        self.pod_watch.relist()

    def _listed(self, items: list[dict[str, Any]], version: str) -> None:
        seen = {pod["metadata"]["uid"]: pod for pod in items}
        for uid, pod in seen.items():
            self.ips.adopt(uid, (pod.get("status") or {}).get("podIP"))
        gone = set(self.pods) - set(seen)
        self.pods = seen
        for uid in list(seen) + list(gone):
            self.enqueue(uid)
        for uid in self.checkpoint.pod_uids() - set(seen):
            self.enqueue(uid)

    def _pod_event(self, kind: str, pod: dict[str, Any]) -> None:
        uid = pod["metadata"]["uid"]
        if kind == "DELETED":
            self.pods.pop(uid, None)
        else:
            self.pods[uid] = pod
        self.enqueue(uid)

    def _watch_loop(self) -> None:
        """Watch from the last version; :class:`ListWatch` relists on 410 and backs off on failures."""
        self.pod_watch.run(self.stopping)

    def _resync_loop(self) -> None:
        # The first wait a random part of the period: a fleet's stand-ins start together, and each listing its
        # node's pods every period from the same start sent 500 LISTs at once every 2 minutes at 500 nodes,
        # which the loaded apiserver answered with its 60 s handler timeout (1,835 in one fill).
        wait = spread_start(self.resync_seconds)
        while not self.stopping.wait(wait):
            wait = self.resync_seconds
            try:
                self._list_pods()
            except Exception as exc:
                log.info("resync failed", extra={"fields": {"error": str(exc)[:200]}})

    def _plugin_loop(self) -> None:
        while not self.stopping.wait(self.plugin_seconds):
            try:
                registered = self.plugins.scan()
                if registered:
                    # pods waiting for a driver may proceed now
                    for uid in list(self.pods):
                        self.enqueue(uid)
                now = time.time()
                self.plugins.check_reachability(now)
                self._cleanup_slices(now)
            except Exception:  # never let discovery die silently
                log.exception("plugin loop iteration failed")

    # ------------------------------------------------------------ ResourceSlice cleanup

    def _note_existing_slices(self) -> None:
        """At start, remove every ResourceSlice of this node, as the real kubelet does (seen on the node
        profile: a restarted kubelet deletes them and the registered drivers republish through their
        watch); drivers whose slices come back but that never register get them removed later too."""
        try:
            selector = {"fieldSelector": f"spec.nodeName={self.node}"}
            self.kube.delete(SLICES_PATH, params=selector)
        except Exception as exc:
            log.info("removing the node's slices at start failed", extra={"fields": {"error": str(exc)[:200]}})
        try:
            listing = self.kube.list(SLICES_PATH, field_selector=f"spec.nodeName={self.node}")
        except Exception as exc:
            log.info("listing slices failed", extra={"fields": {"error": str(exc)[:200]}})
            return
        self._orphan_drivers = {s["spec"]["driver"] for s in listing.get("items", [])}

    def _cleanup_slices(self, now: float) -> None:
        """Remove the slices of drivers unreachable for ``slice_cleanup_seconds`` and of drivers that never
        registered since start. A removal that failed is tried again (backing off) until it succeeds:
        marking it done on a failed DELETE left a gone driver's slices published for good (seen in CI)."""
        for plugin in self.plugins.snapshot():
            since = plugin.unreachable_since
            if since is None:
                self._wipe_retries.pop(plugin.name, None)
            elif not plugin.slices_wiped and now - since >= self.slice_cleanup_seconds:
                if not self._wipe_slices(plugin.name, now):
                    continue
                plugin.slices_wiped = True
                if not Path(plugin.reg_socket).exists():
                    self.plugins.forget(plugin.name)
        for driver in list(self._orphan_drivers):
            registered = self.plugins.get(driver) is not None
            if registered or (now - self.started >= self.slice_cleanup_seconds and self._wipe_slices(driver, now)):
                self._orphan_drivers.discard(driver)

    def _wipe_slices(self, driver: str, now: float) -> bool:
        """Delete ``driver``'s slices on this node; False when it failed or a retry is not due yet."""
        failures, due = self._wipe_retries.get(driver, (0, 0.0))
        if now < due:
            return False
        selector = f"spec.nodeName={self.node},spec.driver={driver}"
        try:
            self.kube.delete(SLICES_PATH, params={"fieldSelector": selector})
        except Exception as exc:
            failures += 1
            delay = logic.backoff(failures)
            self._wipe_retries[driver] = (failures, now + delay)
            log.warning(
                "slice cleanup failed",
                extra={"fields": {"driver": driver, "error": str(exc)[:200], "retryIn": delay}},
            )
            return False
        self._wipe_retries.pop(driver, None)
        log.warning("removed ResourceSlices of unreachable driver", extra={"fields": {"driver": driver}})
        return True

    # ------------------------------------------------------------ pod sync

    def sync(self, uid: str) -> None:
        pod = self.pods.get(uid)
        if logic.is_gone_or_done(pod):
            self.waits.pop(uid, None)
            self._release(uid)
            return
        assert pod is not None
        if not (pod.get("spec") or {}).get("resourceClaims"):
            return
        if (pod["metadata"].get("deletionTimestamp")) is not None:
            return
        if uid in self._started or status.started(pod):
            return
        waits = self.waits.pop(uid, 0)
        try:
            self._prepare_pod(pod)
        except logic.NotReady as exc:
            self.waits[uid] = waits + 1
            delay = logic.not_ready_delay(waits + 1)
            log.info(
                "pod not ready for prepare",
                extra={"fields": {"pod": pod["metadata"]["name"], "why": str(exc), "retryIn": delay}},
            )
            self.enqueue(uid, delay)
        except KubeError as exc:  # API server restarting: retry soon, no event
            failures = self.failures.get(uid, 0) + 1
            self.failures[uid] = failures
            log.info(
                "API call failed during prepare",
                extra={"fields": {"pod": pod["metadata"]["name"], "error": str(exc)[:200]}},
            )
            self.enqueue(uid, logic.backoff(failures, cap=5.0))
        except logic.PrepareError as exc:
            failures = self.failures.get(uid, 0) + 1
            self.failures[uid] = failures
            self._event(pod, FAILED_PREPARE, str(exc))
            delay = logic.backoff(failures)
            log.warning(
                "prepare failed",
                extra={"fields": {"pod": pod["metadata"]["name"], "error": str(exc), "retryIn": delay}},
            )
            self.enqueue(uid, delay)
        else:
            self.failures.pop(uid, None)

    def _prepare_pod(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        refs = logic.pod_claims(pod)
        to_prepare: dict[str, list[dict[str, Any]]] = {}
        claims: dict[str, dict[str, Any]] = {}
        for ref in refs:
            claim = self.kube.get(claim_path(meta["namespace"], ref.claim_name), missing_ok=True)
            if claim is None:
                raise logic.PrepareError(f"resource claim {meta['namespace']}/{ref.claim_name} not found")
            logic.check_claim_for_pod(claim, pod)
            cuid = claim["metadata"]["uid"]
            claims[cuid] = claim
            known = self.checkpoint.claims.get(cuid)
            if known is not None and not known.unpreparing:
                continue  # prepared already for another pod: only the reference is added
            for driver in logic.claim_drivers(claim):
                to_prepare.setdefault(driver, []).append(claim)
        prepared_ids: dict[str, list[str]] = {}
        for driver, driver_claims in sorted(to_prepare.items()):
            prepared_ids.update(self._call_prepare(pod, driver, driver_claims))
        for cuid, claim in claims.items():
            entry = PreparedClaim(
                uid=cuid,
                namespace=claim["metadata"]["namespace"],
                name=claim["metadata"]["name"],
                drivers=logic.claim_drivers(claim),
                cdi_device_ids=prepared_ids.get(cuid, []),
            )
            self.checkpoint.add(entry, meta["uid"], meta["name"])
        self.checkpoint.save()
        body = status.running_status(pod, _now_iso(), self.ips.get(meta["uid"]), self._node_ip())
        self.kube.patch(pods_path(meta["namespace"], meta["name"]) + "/status", {"status": body}, kind="strategic")
        self._started.add(meta["uid"])
        self._count("prepared_pods")

    def _node_ip(self) -> str | None:
        """The node's InternalIP (KWOK sets the node's addresses), read once; None until it has one."""
        if self._host_ip is None:
            try:
                node = self.kube.get(node_path(self.node), missing_ok=True) or {}
            except KubeError:
                return None
            addresses = (node.get("status") or {}).get("addresses") or []
            self._host_ip = next((a.get("address") for a in addresses if a.get("type") == "InternalIP"), None)
        return self._host_ip

    def _claim_args(self, claims: list[dict[str, Any]]) -> list[dict[str, str]]:
        return [
            {"namespace": c["metadata"]["namespace"], "uid": c["metadata"]["uid"], "name": c["metadata"]["name"]}
            for c in claims
        ]

    def _call(
        self, pod_ref: dict[str, str], driver: str, method: str, claims: list[dict[str, str]]
    ) -> tuple[dict[str, Any], str | None]:
        """One DRA call, recorded; returns (response, transport error)."""
        request: dict[str, Any] = {"claims": claims}
        response: dict[str, Any] = {}
        error: str | None = None
        try:
            request, response = self.plugins.call(driver, method, claims)
        except LookupError as exc:
            error = str(exc)
        except grpc.RpcError as exc:
            error = f"{driver} {method}: {exc.code().name}: {exc.details()}"
        per_claim = response.get("claims") or {}
        if error is None:
            errors = [
                f"{c['name']}: {per_claim[c['uid']]['error']}"
                for c in claims
                if (per_claim.get(c["uid"]) or {}).get("error")
            ]
            missing = [c["name"] for c in claims if c["uid"] not in per_claim]
            if missing:
                errors.append(f"no result for claim(s) {', '.join(missing)}")
            call_error = "; ".join(errors) or None
        else:
            call_error = error
        ids = [i for c in claims for i in logic.cdi_ids(per_claim.get(c["uid"]) or {})]
        self.records.append(
            logic.make_record(
                node=self.node,
                pod=pod_ref["name"],
                namespace=pod_ref["namespace"],
                pod_uid=pod_ref["uid"],
                claims=[{"name": c["name"], "uid": c["uid"]} for c in claims],
                driver=driver,
                call=method,
                request=request,
                response=response,
                cdi_device_ids=ids,
                error=call_error,
            )
        )
        self._count(f"{method}_{'error' if call_error else 'ok'}")
        return response, call_error

    def _call_prepare(self, pod: dict[str, Any], driver: str, claims: list[dict[str, Any]]) -> dict[str, list[str]]:
        meta = pod["metadata"]
        args = self._claim_args(claims)
        pod_ref = {"name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"]}
        response, error = self._call(pod_ref, driver, "NodePrepareResources", args)
        if error:
            raise logic.PrepareError(f"prepare dynamic resources: {driver}: {error}")
        per_claim = response.get("claims") or {}
        return {c["uid"]: logic.cdi_ids(per_claim.get(c["uid"]) or {}) for c in args}

    def _release(self, pod_uid: str) -> None:
        """The pod is gone: unprepare the claims no other pod on this node uses (and earlier failures)."""
        self._started.discard(pod_uid)
        self.ips.release(pod_uid)
        if self.checkpoint.claims_of_pod(pod_uid):
            self.checkpoint.release_pod(pod_uid)
            self.checkpoint.save()
        pending = self.checkpoint.unused()
        if not pending:
            self.failures.pop(pod_uid, None)
            return
        by_driver: dict[str, list[PreparedClaim]] = {}
        for claim in pending:
            for driver in claim.drivers:
                by_driver.setdefault(driver, []).append(claim)
            if not claim.drivers:
                self.checkpoint.remove(claim.uid)
        failed = False
        for driver, driver_claims in sorted(by_driver.items()):
            args = [{"namespace": c.namespace, "uid": c.uid, "name": c.name} for c in driver_claims]
            last = driver_claims[0].last_pod
            ref = {"name": last.get("name", ""), "namespace": driver_claims[0].namespace, "uid": last.get("uid", "")}
            _, error = self._call(ref, driver, "NodeUnprepareResources", args)
            if error:
                failed = True
                log.warning("unprepare failed", extra={"fields": {"driver": driver, "error": error}})
                continue
            for claim in driver_claims:
                claim.drivers = [d for d in claim.drivers if d != driver]
                if not claim.drivers:
                    self.checkpoint.remove(claim.uid)
        self.checkpoint.save()
        if failed:
            failures = self.failures.get(pod_uid, 0) + 1
            self.failures[pod_uid] = failures
            self.enqueue(pod_uid, logic.backoff(failures))
        else:
            self.failures.pop(pod_uid, None)

    # ------------------------------------------------------------ events and metrics

    def _event(self, pod: dict[str, Any], reason: str, message: str) -> None:
        meta = pod["metadata"]
        key = (meta["uid"], message)
        try:
            if key in self.events:
                name, count = self.events[key]
                count += 1
                self.kube.patch(
                    f"/api/v1/namespaces/{segment(meta['namespace'])}/events/{segment(name)}",
                    {"count": count, "lastTimestamp": _now_iso()},
                )
                self.events[key] = (name, count)
            else:
                body = logic.event_body(pod, self.node, reason, message, _now_iso())
                created = self.kube.create(f"/api/v1/namespaces/{segment(meta['namespace'])}/events", body)
                self.events[key] = (created["metadata"]["name"], 1)
        except KubeError as exc:
            self.events.pop(key, None)
            log.info("event not recorded", extra={"fields": {"error": str(exc)[:200]}})

    def _count(self, what: str) -> None:
        if self.metrics is not None:
            self.metrics(what)


MetricsHook = Callable[[str], None]
