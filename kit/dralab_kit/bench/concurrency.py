"""``dralab bench concurrency``: bursts of sharing pods through the webhook and the real scheduler.

The claim under test: with the device-plugin path pod creation slows down as more pods land on
one node at once (the extender's node lock), while the DRA path does not. A burst of N pods is
created at once against one KWOK node with 8 shareable fake devices; each pod's latency runs from
the moment its create was issued to the moment a watch sees it bound to the node. In a burst the
latency grows with N by queueing alone (Little's law), so "no degradation" means the per-pod
cost stays flat: pods/s at N=200 within 80% of pods/s at N=10.

The baseline of the same run is the same bursts of plain pods (no HAMi resources: the webhook
still sees them, no claim, no DRA allocation). A second baseline, "DRA without dralab", isolates
what DRA scheduling itself costs: pods that already name claims the benchmark created before the
burst (the same device request and class, none of dralab's labels), so neither the webhook's claim
create nor the janitor touches them; the stand-in still prepares them, as a kubelet would. Plain ->
DRA without dralab is the scheduler's (and the apiserver's) share of the gap, DRA without dralab ->
dralab's DRA pods is dralab's share. A second DRA series runs with the scheduler's client at the
upstream default QPS 50 / burst 100 instead of the local cluster's 500 / 1000.

The cluster helpers here (an 8-device inventory, the sharing pod, a throw-away cluster of its
own name) are shared with ``dralab bench faults``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

import click
import httpx
import yaml
from rich.console import Console

from dralab_kit.bench import DEFAULT_OUT
from dralab_kit.bench.common import parse_sizes, percentile, save_figure, write_result
from dralab_kit.bench.cpu import CpuMeter
from dralab_kit.bench.phases import Scraper, difference, per_pod
from dralab_kit.fixtures.pods import POD_CORES, POD_MEMORY_MIB, plain_pod, sharing_pod

NODE = "bench-node"
DEVICES = 8
DEVICE_MEMORY_MIB = 21525
SIZES_FULL = (1, 10, 50, 100, 200)
SIZES_QUICK = (1, 10, 50)
RATIO_TARGET = 0.8  # pods/s at the largest N >= this x pods/s at N=10
RATE_TARGET = 50.0  # pods/s end to end at the largest N
BASELINE_RATIO_TARGET = 0.8  # DRA pods/s >= this x plain pods/s of the same run ...
BASELINE_RATIO_N = 200  # ... at this burst size
DEFAULT_QPS = (50, 100)  # kube-scheduler's client default (qps, burst)
KINDS = ("dra", "direct", "plain")  # dralab's DRA pods, DRA pods without dralab, plain pods

console = Console(stderr=True)


# ---------------------------------------------------------------- pure: inventory and pods


def inventory_doc(node: str = NODE, devices: int = DEVICES) -> dict[str, Any]:
    """A device inventory (dralab/model inventory format): one node with ``devices`` 310P3 cards."""
    return {
        "nodes": [
            {
                "name": node,
                "devices": [
                    {
                        "vendor": "ascend",
                        "name": f"npu-{i}-0",
                        "uuid": f"BENCH-{i:04d}-{node.upper()}",
                        "productName": "310P3",
                        "model": "310P3",
                        "memory": f"{DEVICE_MEMORY_MIB}Mi",
                        "cores": 100,
                        "physicalID": i,
                        "index": i,
                    }
                    for i in range(devices)
                ],
            }
        ]
    }


def capacity_pods(devices: int = DEVICES, memory_mib: int = POD_MEMORY_MIB, cores: int = POD_CORES) -> int:
    """How many sharing pods of this size the node holds at once (memory or cores run out first)."""
    per_device = min(DEVICE_MEMORY_MIB // memory_mib, 100 // cores if cores else 10**9)
    return per_device * devices


def direct_pod(name: str, namespace: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A DRA pod without dralab and its claim: what the webhook would make of :func:`sharing_pod`, but as
    the user's own objects (no dralab labels or annotations), so only the scheduler and the kubelet act.

    The conversion is the webhook's own (same device request, class and claim name), run here once.
    """
    from dralab.model.convert import convert_pod
    from dralab.model.vendors import load_vendor_table

    conv = convert_pod(sharing_pod(name), load_vendor_table(), namespace=namespace)
    (claim,) = conv.objects
    pod = conv.pod
    pod["metadata"] = {"name": name}
    claim["metadata"] = {"name": claim["metadata"]["name"], "namespace": namespace}
    return pod, claim


@dataclass
class Burst:
    """One burst's raw figures (seconds; times relative to the burst's start)."""

    n: int
    latencies: list[float] = field(default_factory=list)  # create issued -> bound to the node
    running: list[float] = field(default_factory=list)  # create issued -> Running (claims prepared)
    admitted: list[float] = field(default_factory=list)  # create issued -> apiserver answered (admission)
    completion_s: float = math.nan  # start -> last pod bound
    failures: int = 0
    first_error: str = ""
    watch_restarts: int = 0
    retries: int = 0  # creates sent again after a refusal a controller would retry (RETRY_STATUSES)
    first_refusal: str = ""  # the first of those refusals' answers, which says whose it was (the webhook's own
    # "retry the pod", the apiserver's "failed calling webhook", a priority-and-fairness 429)
    not_running: int = 0  # bound, but not Running when the wait ended (a stall: see BurstRunner.stall_s)
    cpu_s: dict[str, float] = field(default_factory=dict)  # component -> CPU seconds during the burst


def summarize(bursts: list[Burst]) -> dict[str, Any]:
    """p50/p99 over every pod of the bursts of one size; pods/s = pods bound / time the bursts took."""
    lat = [x for b in bursts for x in b.latencies]
    run = [x for b in bursts for x in b.running]
    adm = [x for b in bursts for x in b.admitted]
    total_time = sum(b.completion_s for b in bursts if not math.isnan(b.completion_s))
    bound = sum(len(b.latencies) for b in bursts)
    return {
        "n": bursts[0].n,
        "bursts": len(bursts),
        "p50_s": _r(percentile(lat, 50)),
        "p99_s": _r(percentile(lat, 99)),
        "completion_s": _r(max((b.completion_s for b in bursts), default=math.nan)),
        "pods_per_s": _r(bound / total_time) if total_time > 0 else None,
        "admitted_p50_s": _r(percentile(adm, 50)),
        "admitted_p99_s": _r(percentile(adm, 99)),
        "running_p50_s": _r(percentile(run, 50)),
        "running_p99_s": _r(percentile(run, 99)),
        "failures": sum(b.failures for b in bursts),
        "watch_restarts": sum(b.watch_restarts for b in bursts),
        "retries": sum(b.retries for b in bursts),
        "first_error": next((b.first_error for b in bursts if b.first_error), ""),
    }


def _r(value: float) -> float | None:
    return None if value is None or math.isnan(value) else round(value, 4)


def series(rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """Rows per N -> the issue's column format ``{"n": [...], "p50_s": [...], ...}``."""
    keys = ("n", "p50_s", "p99_s", "pods_per_s", "completion_s", "admitted_p50_s", "admitted_p99_s",
            "running_p50_s", "running_p99_s", "failures", "watch_restarts")
    return {k: [row[k] for row in rows] for k in keys}


def verdict(cols: dict[str, list[Any]], baseline: dict[str, list[Any]] | None = None,
            judged: dict[str, Any] | None = None) -> dict[str, Any]:
    """Targets: DRA pods/s against plain pods/s of the same run at each N (>= 0.8 at N=200), flat
    per-pod cost (largest N vs N=10) and the absolute rate at the largest N.

    The baseline ratio is the main verdict: it divides out what the machine and the control plane
    cost any pod, leaving what claims, the webhook's conversion and DRA scheduling add. With
    ``judged`` (alternating repeats), the ratios are the medians over its rounds, spreads beside them.
    """
    rates = dict(zip(cols["n"], cols["pods_per_s"], strict=True))
    largest = max(rates)
    at10, at_max = rates.get(10), rates.get(largest)
    ratio = (at_max / at10) if at10 and at_max else None
    if judged is not None and judged["large_n"] == largest and judged["flatness"]["median"] is not None:
        ratio = judged["flatness"]["median"]
    out: dict[str, Any] = {
        "largest_n": largest,
        "ratio_largest_to_10": round(ratio, 3) if ratio is not None else None,
        "ratio_target": RATIO_TARGET,
        "flat": ratio is not None and ratio >= RATIO_TARGET,
        "rate_target_pods_per_s": RATE_TARGET,
        "meets_rate": bool(at_max and at_max >= RATE_TARGET),
    }
    if baseline is not None:
        plain = dict(zip(baseline["n"], baseline["pods_per_s"], strict=True))
        per_n = {n: (round(rates[n] / plain[n], 3) if rates.get(n) and plain.get(n) else None) for n in rates}
        at_n = per_n.get(BASELINE_RATIO_N)
        if judged is not None and judged["large_n"] == BASELINE_RATIO_N:
            at_n = judged["dra_to_plain"]["median"]
            out["dra_to_plain_spread"] = [judged["dra_to_plain"]["min"], judged["dra_to_plain"]["max"]]
            out["flatness_spread"] = [judged["flatness"]["min"], judged["flatness"]["max"]]
            out["judged_repeats"] = judged["repeats"]
            if "direct_to_plain" in judged:
                for key in ("direct_to_plain", "dra_to_direct"):
                    out[key] = judged[key]["median"]
                    out[f"{key}_spread"] = [judged[key]["min"], judged[key]["max"]]
                out["gap_split_ms_per_pod"] = {k: v["median"] for k, v in judged["split"].items()}
        out.update(
            {
                "dra_to_plain_by_n": {str(n): r for n, r in per_n.items()},
                "dra_to_plain_target": BASELINE_RATIO_TARGET,
                "dra_to_plain_judged_at_n": BASELINE_RATIO_N,
                "dra_to_plain_at_judged_n": at_n,
                # None: the run did not reach N=200 (a --quick run), so the target was not judged
                "meets_dra_to_plain": None if at_n is None else at_n >= BASELINE_RATIO_TARGET,
            }
        )
    return out


# ---------------------------------------------------------------- a throw-away cluster


@contextlib.contextmanager
def own_cluster(prefix: str, config: dict[str, Any] | None = None, keep: bool = False,
                inventory: dict[str, Any] | None = None, kubernetes: str | None = None) -> Iterator[Any]:
    """A cluster named ``<prefix><pid>`` with one node of 8 fake devices (or ``inventory``'s), of Kubernetes
    ``kubernetes`` (default: the cluster default); taken down afterwards.

    Never the developer's cluster: everything destructive in the benchmarks happens here.
    """
    from dralab_kit.cluster.api import down, ensure_cluster

    name = f"{prefix}{os.getpid() % 100000}"
    folder = Path(tempfile.mkdtemp(prefix=f"dralab-{prefix}-"))
    inv = folder / "inventory.yaml"
    doc = inventory if inventory is not None else inventory_doc()
    inv.write_text(yaml.safe_dump(doc))
    cfg_path = None
    if config is not None:
        cfg_path = folder / "config.yaml"
        cfg_path.write_text(yaml.safe_dump(config))
    try:
        handle = ensure_cluster(name, devices=str(inv), config=str(cfg_path) if cfg_path else None,
                                kubernetes=kubernetes)
        wait_slices(handle, sum(len(node["devices"]) for node in doc["nodes"]))
        yield handle
    finally:
        if not keep:
            down(name, keep_logs=False)
        for path in folder.iterdir():
            path.unlink()
        folder.rmdir()


def wait_slices(handle: Any, devices: int = DEVICES, timeout: float = 90.0) -> None:
    """Wait until the node driver has published every device (pods cannot be scheduled before)."""
    from dralab.util import wait_for

    kube = handle.kube()

    def published() -> bool:
        items = (kube.get("/apis/resource.k8s.io/v1/resourceslices", missing_ok=True) or {}).get("items") or []
        return sum(len((s.get("spec") or {}).get("devices") or []) for s in items) >= devices

    try:
        wait_for(published, timeout, "the driver's ResourceSlices", interval=0.2)
    finally:
        kube.close()


def async_client(handle: Any, limit: int = 256) -> httpx.AsyncClient:
    """An HTTP/1.1 client with the admin identity (many connections: the creates of a burst overlap).

    httpx, not :class:`dralab.kube.AsyncKube`: a burst streams a watch while it creates, which the product's
    asyncio client does not do. The TLS is the product's, from :meth:`ClusterHandle.admin_config`.
    """
    ctx = handle.admin_config().ssl_context()
    limits = httpx.Limits(max_connections=limit, max_keepalive_connections=limit)
    # No limit on the wait for a free connection: a batch of 4,000 creates queues on ``limit`` connections
    # for as long as the apiserver takes, and a pool timeout there is the client's own queue, not an
    # answer (at 500 nodes a 60 s one failed 1,238 of a fill's creates that never left the bench).
    timeout = httpx.Timeout(60.0, pool=None)
    return httpx.AsyncClient(base_url=handle.server, verify=ctx, limits=limits, timeout=timeout)


def set_scheduler_qps(handle: Any, qps: int, burst: int) -> None:
    """Rewrite this cluster's scheduler client QPS/burst and restart the scheduler.

    The cluster API has no parameter for scheduler flags, so this edits the scheduler config file
    the cluster wrote (``dralab_kit.cluster.components.scheduler_config_path``) of a throw-away cluster.
    """
    from dralab_kit.cluster import api, components

    path = Path(components.scheduler_config_path(handle.layout))
    doc = yaml.safe_load(path.read_text())
    doc.setdefault("clientConnection", {}).update({"qps": qps, "burst": burst})
    from dralab.util import atomic_write

    atomic_write(path, yaml.safe_dump(doc, sort_keys=False))
    api.restart(handle.name, "scheduler")


# ---------------------------------------------------------------- one burst


RETRY_STATUSES = frozenset({429, 500, 503, 504})  # overload answers: too many requests, webhook deadline, ...
RETRY_ATTEMPTS = 8


def retry_delay(attempt: int) -> float:
    """Seconds before the ``attempt``-th resend (1-based): 0.5 doubling to at most 8, as a controller backs off."""
    return float(min(0.5 * 2 ** (attempt - 1), 8.0))


STALL_CHECK_S = 5.0


class ApiStatusError(RuntimeError):
    """An apiserver answer of 400 or more (404 aside), with its status for callers that retry overload answers."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class BurstRunner:
    """Creates bursts in fresh namespaces and times them with a watch started before the creates.

    ``retry_refusals``: a create refused with an overload answer (``RETRY_STATUSES``, such as the
    webhook's "could not finish this admission within 8 s; retry the pod") is sent again after a
    backoff, up to ``RETRY_ATTEMPTS`` times, as the controllers that make pods in bulk (ReplicaSet,
    Job) do. The pod's latency still counts from its first create, and the resends are counted.

    ``stall_s``: once every pod is bound, stop waiting for the rest to run after ``stall_s`` seconds
    in which no pod started Running, and count them in ``not_running``. A pod whose claim the
    cluster will never prepare (kube-controller-manager's second claim for one pod, seen at 50 nodes
    on 1.35) would otherwise hold the run for the whole ``timeout``.
    """

    def __init__(self, client: httpx.AsyncClient, timeout: float = 300.0, retry_refusals: bool = False,
                 stall_s: float | None = None) -> None:
        self.client = client
        self.timeout = timeout
        self.retry_refusals = retry_refusals
        self.stall_s = stall_s

    async def _ok(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        resp = await self.client.request(method, path, **kw)
        if resp.status_code >= 400 and resp.status_code != 404:
            raise ApiStatusError(resp.status_code, f"{method} {path}: HTTP {resp.status_code}: {resp.text[:300]}")
        return resp.json() if resp.content else {}

    async def send_create(self, base: str, pod: dict[str, Any], burst: Burst) -> bool:
        """POST ``pod`` (resent after overload answers where ``retry_refusals``); False, with the failure
        counted in ``burst``, when it was not created."""
        attempt = 0
        while True:
            try:
                resp = await self.client.post(base, json=pod)
            except httpx.HTTPError as exc:
                burst.failures += 1
                burst.first_error = burst.first_error or f"{type(exc).__name__}: {exc}"
                return False
            if attempt > 0 and resp.status_code == 409:
                return True  # an earlier send was created after all (it was the answer that timed out)
            if resp.status_code < 300:
                return True
            if not (self.retry_refusals and resp.status_code in RETRY_STATUSES and attempt < RETRY_ATTEMPTS):
                burst.failures += 1
                burst.first_error = burst.first_error or f"HTTP {resp.status_code}: {resp.text[:200]}"
                return False
            attempt += 1
            burst.retries += 1
            burst.first_refusal = burst.first_refusal or f"HTTP {resp.status_code}: {resp.text[:200]}"
            await asyncio.sleep(retry_delay(attempt))  # the controller's backoff, not a wait for a state

    async def namespace(self, prefix: str) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:6]}"
        await self._ok("POST", "/api/v1/namespaces", json={"metadata": {"name": name}})
        return name

    async def run(self, ns: str, pods: list[dict[str, Any]], wait_running: bool, pace_s: float | None = None,
                  before: Callable[[int], Awaitable[None]] | None = None) -> Burst:
        """Create ``pods`` and time each to bound (and Running where ``wait_running``).

        All at once by default; with ``pace_s``, the i-th create is issued ``i * pace_s`` seconds after
        the first (a steady rate), each after ``before(i)`` (churn deletes a pod there). A create's
        clock starts when it is issued.
        """
        n = len(pods)
        burst = Burst(n=n)
        base = f"/api/v1/namespaces/{ns}/pods"
        listed = await self._ok("GET", base)
        rv = listed["metadata"]["resourceVersion"]
        bound: dict[str, float] = {}
        running: dict[str, float] = {}
        issued: dict[str, float] = {}
        done = asyncio.Event()
        expected: set[str] = set()
        created_all = False
        progress = [time.monotonic()]  # when a pod was last seen bound or Running for the first time

        def check_done() -> None:
            if created_all and expected <= bound.keys() and (not wait_running or expected <= running.keys()):
                done.set()

        def seen(obj: dict[str, Any]) -> None:
            name = (obj.get("metadata") or {}).get("name")
            now = time.monotonic()
            if name and (obj.get("spec") or {}).get("nodeName") and name not in bound:
                bound[name] = progress[0] = now
            if name and (obj.get("status") or {}).get("phase") == "Running" and name not in running:
                running[name] = progress[0] = now

        async def watch() -> None:
            # A watch the apiserver ends or breaks is resumed after a fresh list: a pod found bound by
            # the list counts from then (later than it was: the figures can only get worse, never better).
            version = rv
            while True:
                params = {"watch": "true", "resourceVersion": version, "allowWatchBookmarks": "true",
                          "timeoutSeconds": str(int(self.timeout) + 30)}
                try:
                    async with self.client.stream("GET", base, params=params, timeout=None) as resp:
                        if resp.status_code >= 400:
                            raise RuntimeError(f"watch answered HTTP {resp.status_code}")
                        async for line in resp.aiter_lines():
                            if not line.strip():
                                continue
                            event = json.loads(line)
                            obj = event.get("object") or {}
                            if event.get("type") == "ERROR":
                                raise RuntimeError(str(obj.get("message")))
                            version = (obj.get("metadata") or {}).get("resourceVersion") or version
                            if event.get("type") != "BOOKMARK":
                                seen(obj)
                            check_done()
                except (httpx.HTTPError, RuntimeError, ValueError):
                    pass
                burst.watch_restarts += 1
                try:
                    listed = await self._ok("GET", base)
                except (httpx.HTTPError, ApiStatusError):
                    # an overloaded apiserver refused or dropped the list: watch again from the last version
                    # after a backoff (a 410 there lists again), never give up while pods are awaited
                    await asyncio.sleep(retry_delay(min(burst.watch_restarts, RETRY_ATTEMPTS)))
                    continue
                version = listed["metadata"]["resourceVersion"]
                for obj in listed.get("items") or []:
                    seen(obj)
                check_done()

        async def create(pod: dict[str, Any]) -> None:
            name = pod["metadata"]["name"]
            issued[name] = time.monotonic()
            if await self.send_create(base, pod, burst):
                burst.admitted.append(time.monotonic() - issued[name])
                expected.add(name)

        async def scheduled(i: int, pod: dict[str, Any]) -> None:
            if pace_s:  # the offered rate being generated, not a wait for any state
                await asyncio.sleep(max(0.0, start + i * pace_s - time.monotonic()))
            if before is not None:
                await before(i)
            await create(pod)

        watcher = asyncio.create_task(watch())
        await asyncio.sleep(0)  # let the watch request go out before the creates (ordering, not timing)
        start = time.monotonic()
        await asyncio.gather(*(scheduled(i, p) for i, p in enumerate(pods)))
        created_all = True
        check_done()
        if expected:
            await self._wait(done, lambda: expected <= bound.keys() and time.monotonic() - progress[0] > (
                self.stall_s or math.inf), watcher)
        if watcher.done() and not watcher.cancelled() and (died := watcher.exception()) is not None:
            raise RuntimeError(f"the pod watch of {ns} stopped: {type(died).__name__}: {died}") from died
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError, httpx.HTTPError):
            await watcher
        missing = expected - bound.keys()
        if missing:
            burst.failures += len(missing)
            burst.first_error = burst.first_error or f"{len(missing)} pod(s) not bound within {self.timeout:.0f}s"
        if wait_running:
            burst.not_running = len(expected & bound.keys() - running.keys())
            if burst.not_running:
                burst.first_error = burst.first_error or (
                    f"{burst.not_running} pod(s) bound but not Running (no pod started for {self.stall_s}s)"
                    if self.stall_s else f"{burst.not_running} pod(s) bound but not Running within {self.timeout:.0f}s")
        burst.latencies = [bound[p] - issued[p] for p in expected if p in bound]
        burst.running = [running[p] - issued[p] for p in expected if p in running]
        if bound:
            burst.completion_s = max(bound[p] for p in expected if p in bound) - start
        return burst

    async def _wait(self, done: asyncio.Event, stalled: Callable[[], bool],
                    watcher: asyncio.Task[None] | None = None) -> None:
        """Until ``done``, ``timeout``, ``stalled()`` or the end of ``watcher`` (the watch that sets ``done``:
        once it has stopped nothing will); the stall is looked at every few seconds (it is a verdict on
        progress, so its resolution need not be finer)."""
        deadline = time.monotonic() + self.timeout
        while (not done.is_set() and time.monotonic() < deadline and not stalled()
               and not (watcher is not None and watcher.done())):
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), min(STALL_CHECK_S, max(0.0, deadline - time.monotonic())))

    async def clear(self, ns: str, kube_wait: float = 180.0, own_claims: bool = False) -> None:
        """Delete the namespace's pods, wait until their claims are gone, then the namespace.

        ``own_claims``: the claims are the benchmark's own (no janitor, no owner): delete them too.
        """
        # A delete of the whole collection answers only once every pod is deleted: thousands take longer
        # than the client's default timeout on a loaded machine, so it gets the whole wait.
        await self._ok("DELETE", f"/api/v1/namespaces/{ns}/pods", params={"gracePeriodSeconds": "0"},
                       timeout=kube_wait)
        if own_claims:
            await self._ok("DELETE", f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims", timeout=kube_wait)
        deadline = time.monotonic() + kube_wait
        while time.monotonic() < deadline:
            pods = await self._ok("GET", f"/api/v1/namespaces/{ns}/pods")
            claims = await self._ok("GET", f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims")
            if not pods.get("items") and not claims.get("items"):
                break
            await asyncio.sleep(0.5)  # polling interval while the garbage collector works
        await self._ok("DELETE", f"/api/v1/namespaces/{ns}")


def cpu_per_pod(before: dict[str, float], after: dict[str, float], n: int) -> dict[str, float]:
    """Milliseconds of CPU per pod of the burst, per component, and their total."""
    out = {k: round((after[k] - before.get(k, 0.0)) * 1000 / n, 3) for k in after if n}
    if out:
        out["total"] = round(sum(out.values()), 3)
    return out


async def one_burst(runner: BurstRunner, n: int, kind: str, label: str, scraper: Scraper | None,
                    phases: dict[str, list[Any]], meter: CpuMeter | None = None,
                    cpu: dict[str, list[Any]] | None = None) -> Burst:
    """One burst in a fresh namespace; the components' per-pod phase figures go to ``phases``, their CPU
    per pod to ``cpu`` (over the burst, and over the burst plus the clean-up that follows it)."""
    ns = await runner.namespace(f"{label}-{n}")
    stem = f"p-{uuid.uuid4().hex[:4]}"
    if kind == "direct":
        made = [direct_pod(f"{stem}-{i}", ns) for i in range(n)]
        pods = [pod for pod, _ in made]
        claims_base = f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims"
        await asyncio.gather(*(runner._ok("POST", claims_base, json=claim) for _, claim in made))
    else:
        pods = [sharing_pod(f"{stem}-{i}") if kind == "dra" else plain_pod(f"{stem}-{i}") for i in range(n)]
    before = await scraper.snapshot() if scraper else None
    cpu0 = meter.read() if meter else None
    burst = await runner.run(ns, pods, wait_running=kind != "plain")
    cpu1 = meter.read() if meter else None
    if scraper is not None and before is not None:
        phases.setdefault(str(n), []).append(per_pod(before, await scraper.snapshot(), n))
    await runner.clear(ns, own_claims=kind == "direct")
    if meter is not None and cpu0 is not None and cpu1 is not None and cpu is not None:
        burst.cpu_s = {k: cpu1[k] - cpu0[k] for k in cpu1}
        cpu.setdefault(str(n), []).append({"burst": cpu_per_pod(cpu0, cpu1, n),
                                           "with_cleanup": cpu_per_pod(cpu0, meter.read(), n)})
    return burst


async def measure(client: httpx.AsyncClient, sizes: tuple[int, ...], kind: str, label: str,
                  scraper: Scraper | None = None, phases: dict[str, list[Any]] | None = None,
                  done: dict[int, list[Burst]] | None = None) -> list[dict[str, Any]]:
    """Bursts of every size (small sizes repeated so their percentiles rest on several pods); sizes
    already in ``done`` (the judged, alternating repeats) are summarized from those bursts."""
    runner = BurstRunner(client)
    rows = []
    phases = phases if phases is not None else {}
    for n in sizes:
        repeats = 5 if n == 1 else 3 if n <= 10 else 1
        bursts = list((done or {}).get(n, []))
        for _ in range(0 if bursts else repeats):
            bursts.append(await one_burst(runner, n, kind, label, scraper, phases))
        row = summarize(bursts)
        rows.append(row)
        console.print(
            f"[{label}] N={n:<4d} p50 {row['p50_s']}s p99 {row['p99_s']}s admitted p50 {row['admitted_p50_s']}s "
            f"completion {row['completion_s']}s "
            f"{row['pods_per_s']} pods/s running p50 {row['running_p50_s']}s failures {row['failures']} "
            f"{row['first_error'][:160]}",
            markup=False,
            highlight=False,
        )
    return rows


def plot(result: dict[str, Any], path: Path) -> None:
    """Latency (p50/p99) and throughput against N, DRA and plain-pod baseline (and default QPS)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    lines = [("DRA sharing pods", result, "-o"), ("plain pods (baseline)", result["baseline"], "--s")]
    if result.get("direct"):
        lines.append(("DRA without dralab (baseline)", result["direct"], "-.d"))
    if result.get("default_qps"):
        lines.append(("DRA, scheduler QPS 50/100", result["default_qps"], ":^"))
    for label, cols, style in lines:
        ax1.plot(cols["n"], cols["p50_s"], style, label=f"{label} p50")
        ax1.plot(cols["n"], cols["p99_s"], style, alpha=0.5, label=f"{label} p99")
        ax2.plot(cols["n"], cols["pods_per_s"], style, label=label)
    for ax in (ax1, ax2):
        ax.set_xscale("log")
        ax.set_xlabel("pods created at once (N)")
        ax.grid(True, alpha=0.3)
    ax1.set_ylabel("creation to scheduled (s)")
    ax2.set_ylabel("pods scheduled per second")
    ax2.axhline(RATE_TARGET, color="grey", lw=0.8, ls="--")
    ax1.legend(fontsize=7)
    ax2.legend(fontsize=7)
    fig.suptitle(f"Burst scheduling on one KWOK node with {DEVICES} shared devices ({os.cpu_count()} CPUs)")
    fig.tight_layout()
    save_figure(fig, path)


def _spread(values: list[float | None]) -> dict[str, Any]:
    got = sorted(v for v in values if v is not None)
    if not got:
        return {"median": None, "min": None, "max": None, "runs": values}
    return {"median": round(statistics.median(got), 3), "min": round(got[0], 3), "max": round(got[-1], 3),
            "runs": values}


def _rate(b: Burst) -> float | None:
    return round(len(b.latencies) / b.completion_s, 4) if b.latencies and b.completion_s > 0 else None


def _div(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a and b else None


def gap_split(dra: float | None, direct: float | None, plain: float | None) -> dict[str, float | None]:
    """The DRA pods' extra burst time per pod over plain pods (ms, 1/rate), split into the scheduler's
    share (DRA without dralab over plain) and dralab's (dralab's DRA pods over DRA without dralab).
    The shares add up to the whole; a negative share is noise (or dralab faster than the baseline)."""
    def ms(rate: float | None) -> float | None:
        return 1000.0 / rate if rate else None

    d, d0, p = ms(dra), ms(direct), ms(plain)
    return {"gap_ms_per_pod": round(d - p, 3) if d is not None and p is not None else None,
            "scheduler_ms_per_pod": round(d0 - p, 3) if d0 is not None and p is not None else None,
            "dralab_ms_per_pod": round(d - d0, 3) if d is not None and d0 is not None else None}


class JudgedRound(TypedDict):
    """One round of :func:`judged` (one burst of each kind and size) as written to the results."""

    load_average: list[float]
    pods_per_s: dict[str, dict[str, float | None]]  # kind -> burst size -> pods per second
    dra_to_plain: float | None
    direct_to_plain: float | None
    dra_to_direct: float | None
    split: dict[str, float | None]  # gap_split's shares
    flatness: float | None


async def judged(client: httpx.AsyncClient, small: int, large: int, repeats: int, scraper: Scraper | None,
                 phases: dict[str, dict[str, list[Any]]], meter: CpuMeter | None = None,
                 cpu: dict[str, dict[str, list[Any]]] | None = None,
                 ) -> tuple[dict[str, Any], dict[str, dict[int, list[Burst]]]]:
    """The judged figures, each from ``repeats`` rounds: bursts of ``small`` and ``large`` pods of each
    kind (dralab's DRA pods, DRA pods without dralab, plain pods) taking turns (so a shared machine's
    drifting load hits all alike); the ratios are taken inside each round, then their median and spread."""
    runner = BurstRunner(client)
    bursts: dict[str, dict[int, list[Burst]]] = {kind: {small: [], large: []} for kind in KINDS}
    cpu = cpu if cpu is not None else {}
    rounds: list[JudgedRound] = []
    for r in range(repeats):
        load = [round(x, 2) for x in os.getloadavg()]
        for n in (small, large):
            for kind in KINDS:
                bursts[kind][n].append(await one_burst(runner, n, kind, f"j{kind}", scraper,
                                                       phases.setdefault(kind, {}), meter, cpu.setdefault(kind, {})))
        rates = {kind: {n: _rate(bursts[kind][n][r]) for n in (small, large)} for kind in bursts}
        dra_l, plain_l, dra_s = rates["dra"][large], rates["plain"][large], rates["dra"][small]
        direct_l = rates["direct"][large]
        rounds.append({"load_average": load, "pods_per_s": {k: {str(n): v for n, v in r_.items()}
                                                            for k, r_ in rates.items()},
                       "dra_to_plain": _div(dra_l, plain_l),
                       "direct_to_plain": _div(direct_l, plain_l),
                       "dra_to_direct": _div(dra_l, direct_l),
                       "split": gap_split(dra_l, direct_l, plain_l),
                       "flatness": _div(dra_l, dra_s)})
    out: dict[str, Any] = {"small_n": small, "large_n": large, "repeats": repeats, "rounds": rounds,
                           "dra_to_plain": _spread([x["dra_to_plain"] for x in rounds]),
                           "direct_to_plain": _spread([x["direct_to_plain"] for x in rounds]),
                           "dra_to_direct": _spread([x["dra_to_direct"] for x in rounds]),
                           "split": {k: _spread([x["split"][k] for x in rounds])
                                     for k in ("gap_ms_per_pod", "scheduler_ms_per_pod", "dralab_ms_per_pod")},
                           "flatness": _spread([x["flatness"] for x in rounds]),
                           "dra_pods_per_s": _spread([x["pods_per_s"]["dra"][str(large)] for x in rounds]),
                           "direct_pods_per_s": _spread([x["pods_per_s"]["direct"][str(large)] for x in rounds]),
                           "plain_pods_per_s": _spread([x["pods_per_s"]["plain"][str(large)] for x in rounds])}
    return out, bursts


def cpu_summary(cpu: dict[str, dict[str, list[Any]]], n: int) -> dict[str, Any]:
    """Per kind, the median over the bursts of size ``n`` of each component's CPU ms per pod."""
    out: dict[str, Any] = {}
    for kind, by_n in cpu.items():
        runs = by_n.get(str(n), [])
        if not runs:
            continue
        out[kind] = {window: {comp: round(statistics.median(r[window].get(comp, 0.0) for r in runs), 3)
                              for comp in sorted({c for r in runs for c in r[window]})}
                     for window in ("burst", "with_cleanup")}
    return out


def breakdown(phases: dict[str, dict[str, list[Any]]], n: int) -> dict[str, Any]:
    """Per phase, the median over the bursts of size ``n`` of ms per pod, DRA and plain, and the extra."""
    def med(kind: str) -> dict[str, dict[str, float]]:
        runs = phases.get(kind, {}).get(str(n), [])
        names = {p for run in runs for p in run}
        return {p: {k: round(statistics.median(run.get(p, {}).get(k, 0.0) for run in runs), 3)
                    for k in ("ms_per_pod", "calls_per_pod", "ms_per_call")} for p in sorted(names)}

    dra, plain = med("dra"), med("plain")
    out = {"n": n, "dra": dra, "plain": plain, "extra_ms_per_dra_pod": difference(dra, plain)}
    if phases.get("direct", {}).get(str(n)):
        direct = med("direct")
        out["direct"] = direct
        out["extra_ms_per_direct_pod"] = difference(direct, plain)
        out["dralab_ms_per_dra_pod"] = difference(dra, direct)
    return out


async def _bench(handle: Any, sizes: tuple[int, ...], default_qps_sizes: tuple[int, ...],
                 repeats: int = 3) -> dict[str, Any]:
    scraper = Scraper.for_cluster(handle)
    meter = CpuMeter.for_cluster(handle)
    phases: dict[str, dict[str, list[Any]]] = {}
    cpu: dict[str, dict[str, list[Any]]] = {}
    small, large = (10 if 10 in sizes else min(sizes)), min(max(sizes), BASELINE_RATIO_N)
    async with async_client(handle) as client:
        # one warm-up burst: first requests pay for connections, the webhook's first conversion, caches
        warm = BurstRunner(client)
        ns = await warm.namespace("warm")
        await warm.run(ns, [sharing_pod(f"w-{i}") for i in range(5)], wait_running=True)
        await warm.clear(ns)
        judged_figures, done = await judged(client, small, large, repeats, scraper, phases, meter, cpu)
        dra = await measure(client, sizes, "dra", "dra", scraper, phases.setdefault("dra", {}), done["dra"])
        plain = await measure(client, sizes, "plain", "plain", scraper, phases.setdefault("plain", {}), done["plain"])
        # DRA without dralab at the judged sizes only (its bursts come from the judged rounds)
        direct = await measure(client, (small, large), "direct", "direct", scraper, phases.setdefault("direct", {}),
                               done["direct"])
    default_rows: list[dict[str, Any]] = []
    if default_qps_sizes:
        set_scheduler_qps(handle, *DEFAULT_QPS)
        async with async_client(handle) as client:
            default_rows = await measure(client, default_qps_sizes, "dra", "qps50")
    result: dict[str, Any] = series(dra)
    result["baseline"] = {"what": "plain pods, same bursts, same run (webhook called, no claim)", **series(plain)}
    result["direct"] = {"what": "DRA pods without dralab: claims created by the benchmark before the burst, "
                                "same device request and class; no webhook conversion, no janitor",
                        **series(direct)}
    if default_rows:
        result["default_qps"] = {
            "what": f"DRA pods with the scheduler client at QPS {DEFAULT_QPS[0]} / burst {DEFAULT_QPS[1]}",
            **series(default_rows),
        }
        result["default_qps"]["verdict"] = verdict(series(default_rows))
    result["verdict"] = verdict(series(dra), series(plain), judged_figures)
    result["judged"] = judged_figures
    result["phases"] = {"what": "per-pod means from the components' /metrics (deltas over each burst), median "
                                "over the bursts of that size; extra = DRA pod minus plain pod",
                        "breakdown": breakdown(phases, large), "by_n": phases}
    result["cpu"] = {"what": "CPU ms per pod of each component's processes (/proc, children included), median over "
                             "the judged bursts of the large N; 'burst': create to bound (and Running), "
                             "'with_cleanup': until the pods, their claims and the namespace are gone",
                     "n": large, "by_kind": cpu_summary(cpu, large), "by_n": cpu}
    result["first_errors"] = [r["first_error"] for r in dra + plain + direct + default_rows if r["first_error"]][:5]
    return result



@click.command()
@click.option("--out", default=DEFAULT_OUT, show_default=True, help="folder for concurrency.json and the plot")
@click.option("--quick", is_flag=True, help="N = 1, 10, 50 only")
@click.option("--no-default-qps", is_flag=True, help="skip the series at the scheduler's default client QPS")
@click.option("--keep", is_flag=True, help="leave the benchmark's cluster running (for debugging)")
@click.option("--repeats", type=click.IntRange(min=1), default=None,
              help="rounds of the judged bursts (N=10 and N=200, each kind taking turns); default 3, quick 1")
@click.option("--sizes", default=None, metavar="N,N,...",
              help="burst sizes instead of the full or quick set (e.g. 10,200: the judged rounds only)")
def concurrency(out: str, quick: bool, no_default_qps: bool, keep: bool, repeats: int | None,
                sizes: str | None) -> None:
    """Bursts of N sharing pods through the webhook and the real scheduler; p50/p99 and pods/s.

    Runs on a throw-away cluster of its own (one KWOK node, 8 fake 310P3), never on `dralab`.

    \b
    Example:
      dralab bench concurrency --quick --out /tmp/results
    """
    from dralab_kit.cluster import build

    build.require_binaries()
    chosen = parse_sizes(sizes, "burst sizes") if sizes else (SIZES_QUICK if quick else SIZES_FULL)
    if max(chosen) > capacity_pods():
        raise click.ClickException(f"N={max(chosen)} does not fit the node ({capacity_pods()} pods)")
    default_sizes: tuple[int, ...] = () if no_default_qps else ((10, 50) if quick else (10, 200))
    load_before = os.getloadavg()
    started = time.monotonic()
    with own_cluster("bench", keep=keep) as handle:
        result = asyncio.run(_bench(handle, chosen, default_sizes, repeats or (1 if quick else 3)))
    result.update(
        {
            "node": {"devices": DEVICES, "pod_memory_mib": POD_MEMORY_MIB, "pod_cores": POD_CORES,
                     "capacity_pods": capacity_pods()},
            "scheduler_qps": {"local": [500, 1000], "default": list(DEFAULT_QPS)},
            "load_average": {"before": [round(x, 2) for x in load_before],
                             "after": [round(x, 2) for x in os.getloadavg()]},
            "duration_s": round(time.monotonic() - started, 1),
            "quick": quick,
            "sizes": list(chosen),
        }
    )
    path = write_result(out, "concurrency", result)
    plot(result, Path(out) / "concurrency.png")
    v = result["verdict"]
    judged = v.get("meets_dra_to_plain")
    click.echo(
        f"pods/s {dict(zip(result['n'], result['pods_per_s'], strict=True))}; DRA / plain by N "
        f"{v.get('dra_to_plain_by_n')} (target >= {BASELINE_RATIO_TARGET} at N={BASELINE_RATIO_N}: "
        f"{'not judged' if judged is None else 'met' if judged else 'NOT met'}); N={v['largest_n']} vs N=10: "
        f"{v['ratio_largest_to_10']} (target >= {RATIO_TARGET}); rate target {RATE_TARGET}: "
        f"{'met' if v['meets_rate'] else 'NOT met'} -> {path}"
    )
