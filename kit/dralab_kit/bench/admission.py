"""``dralab bench admission``: webhook latency and throughput over TLS, three handlers, one server.

The server is the real ``dralab webhook serve`` in its own process; this process only generates
load, over the product's own small HTTP/1.1 transport (:mod:`dralab.kube.http1`, one kept-alive
connection per worker, see :class:`Wire`) so the generator costs little CPU. Three handlers
on the same server: ``noop`` (parse and allow: the baseline), ``convert`` (conversion, no API
calls) and ``create`` (conversion plus ResourceClaim creation against the local apiserver).

Open loop: requests start on a fixed schedule whatever the server does, and latency is counted
from the scheduled start (no coordinated omission). Closed loop: N workers send back to back;
the completed rate is the maximum throughput.
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
import httpx
import yaml
from rich.console import Console
from rich.progress import Progress

from dralab.kube.http1 import Connection, ConnectionLost, Endpoint, request_bytes
from dralab.util import free_port, wait_for
from dralab_kit.bench.common import parse_sizes, percentile, write_result
from dralab_kit.bench.cpu import CpuMeter, machine_cpu, process_cpu, settle_machine, settled_cpu, tree_cpu

RATES_FULL = (50, 100, 200)
RATES_QUICK = (100,)
HANDLERS = {"noop": "/bench/noop", "convert": "/bench/convert", "create": "/mutate"}
P99_TARGET_MS = 25.0
WEBHOOK_TIMEOUT = 10.0  # seconds: the registration's timeoutSeconds
THROUGHPUT_TARGET = 0.7  # conversion only vs the no-op handler, maximum throughput
DIRECT_TARGET = 0.8  # create through the webhook vs the same claims created directly, maximum throughput
CPU_TARGET_MS = 1.5  # server CPU (every process, janitor included) per admitted pod with its claim
REPEATS_FULL = 3
CLOSED_WORKERS = 16
SLICE_SECONDS = 1.0  # the handlers of a pair take turns this long in their closed loop
# Pods of one NVIDIA shape, admitted on the create handler's path (conversion's where no cluster is up):
# "prefer" lists 3 types (dralab.io/prefer-types: a firstAvailable request), "single" one (use-gputype).
# Their closed loops take turns; the figure is the webhook's CPU per admission of each (no open loops).
TYPED = ("single", "prefer")
# Handlers whose ratio is a target or a figure: their closed loops take turns (closed_loop_turns)
PAIRS = (("noop", "convert"), ("direct", "create"), TYPED)
# The bench sends thousands of pods from one namespace: the namespace claim rate (a limit against
# forged reviews, tested in tests/security) is lifted so it measures the server, not the limiter.
# the benchmark reads its own webhook's /metrics on loopback, without a token
BENCH_CONFIG = {"webhook": {"claimGracePeriodSeconds": 86400, "claimCreateRatePerSecond": 100000,
                            "claimCreateBurst": 1000000, "metricsAuthorization": False}}

console = Console(stderr=True)


def _pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": {
            "hami.io/use-Ascend310P-uuid": "68496E64-20E05477-92C31323-6E78030A-BD003019"}},
        "spec": {"containers": [{"name": "app", "image": "busybox", "resources": {
            "limits": {"huawei.com/Ascend310P": "1", "huawei.com/Ascend310P-memory": "8192",
                       "huawei.com/Ascend310P-core": "50"},
            "requests": {"huawei.com/Ascend310P": "1", "huawei.com/Ascend310P-memory": "8192",
                         "huawei.com/Ascend310P-core": "50"}}}]},
    }


def typed_pod(kind: str) -> Callable[[str], dict[str, Any]]:
    """The pod of a :data:`TYPED` handler: 3 GPU types in order of preference, or one."""
    from dralab_kit.bench.prefer import kind_pod

    return lambda name: kind_pod(kind, name)


class Bodies:
    """Pre-rendered AdmissionReview bodies with unique pod names and UIDs (claims must not collide)."""

    def __init__(self, namespace: str, pod: Callable[[str], dict[str, Any]] = _pod) -> None:
        self.namespace = namespace
        self.template = json.dumps({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "@UID@", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                        "resource": {"group": "", "version": "v1", "resource": "pods"},
                        "namespace": namespace, "operation": "CREATE", "object": pod("@NAME@")},
        })
        self.n = 0

    def next(self) -> bytes:
        self.n += 1
        uid = str(uuid.uuid4())
        return self.template.replace("@UID@", uid).replace("@NAME@", f"bench-{self.n}-{uid[:8]}").encode()


class ClaimBodies:
    """The ResourceClaims the create handler makes, pre-rendered for creating them directly (the baseline)."""

    def __init__(self, namespace: str) -> None:
        from dralab.config import default_config
        from dralab.model.convert import Converter

        claim = Converter(default_config().vendors).convert(_pod("@NAME@"), namespace=namespace,
                                                              request_uid="@UID@").objects[0]
        claim["metadata"]["name"] = "@NAME@"
        self.template = json.dumps(claim, separators=(",", ":"))
        self.n = 0

    def next(self) -> bytes:
        self.n += 1
        uid = str(uuid.uuid4())
        return self.template.replace("@UID@", uid).replace("@NAME@", f"direct-{self.n}-{uid[:8]}").encode()


@dataclass(frozen=True)
class Target:
    """Where the load goes: the webhook, or the apiserver itself (the direct baseline)."""

    endpoint: Endpoint
    ctx: ssl.SSLContext
    ok_status: int = 200
    ok_marker: bytes = b'"allowed":true'

    @property
    def port(self) -> int:
        return self.endpoint.port


POST_HEADERS = {"Content-Type": "application/json"}


class Wire:
    """One kept-alive TLS connection to a target: the bench's wire transport.

    It is the product's :class:`dralab.kube.http1.Connection` (the admission path's own client) with
    nothing around it: no pool, no resend of a call that met a closed connection, no credentials. A
    timed :meth:`post` is exactly one request written and its answer read on this connection, so what
    the loops measure is the server and the wire, not a client's queueing or retries.
    """

    def __init__(self, target: Target, conn: Connection) -> None:
        self.target = target
        self.conn = conn

    @classmethod
    async def open(cls, target: Target) -> Wire:
        return cls(target, await Connection.open(target.endpoint, target.ctx))

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        """POST ``body`` to ``path``; the answer's status and body (:class:`ConnectionLost` when cut off)."""
        status, _, answer, _ = await self.conn.call(request_bytes("POST", self.target.endpoint, path, POST_HEADERS,
                                                                  body))
        return status, answer

    def close(self) -> None:
        self.conn.close()


@dataclass
class Sample:
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    first_error: str = ""
    ok_status: int = 200
    ok_marker: bytes = b'"allowed":true'

    def record(self, latency: float, status: int, body: bytes) -> None:
        ok = status == self.ok_status and self.ok_marker in body
        if ok:
            self.latencies.append(latency)
        else:
            self.errors += 1
            if not self.first_error:
                self.first_error = f"HTTP {status}: {body[:300].decode(errors='replace')}"

    def summary(self) -> dict[str, Any]:
        ms = [x * 1000 for x in self.latencies]
        out: dict[str, Any] = {"completed": len(ms), "errors": self.errors,
                               "p50_ms": round(percentile(ms, 50), 3) if ms else None,
                               "p99_ms": round(percentile(ms, 99), 3) if ms else None,
                               "max_ms": round(max(ms), 3) if ms else None}
        if self.first_error:
            out["first_error"] = self.first_error
        return out


async def open_loop(target: Target, path: str, bodies: Bodies | ClaimBodies, rate: float,
                    duration: float, max_connections: int = 64) -> dict[str, Any]:
    """Start ``rate`` requests per second for ``duration`` seconds on a fixed schedule.

    Connections are reused; up to ``max_connections`` are opened when all are busy (as an apiserver
    would), beyond that requests wait, and the wait counts in their latency.
    """
    idle: asyncio.Queue[Wire] = asyncio.Queue()
    opened = 4

    def connect() -> Any:
        return Wire.open(target)

    for _ in range(opened):
        idle.put_nowait(await connect())
    sample = Sample(ok_status=target.ok_status, ok_marker=target.ok_marker)
    payloads = [bodies.next() for _ in range(int(rate * duration))]

    async def one(scheduled: float, body: bytes) -> None:
        nonlocal opened
        if idle.empty() and opened < max_connections:
            opened += 1
            conn = await connect()
        else:
            conn = await idle.get()
        try:
            status, answer = await conn.post(path, body)
        except (OSError, ConnectionLost) as exc:
            sample.errors += 1
            sample.first_error = sample.first_error or f"{type(exc).__name__}: {exc}"
            conn.close()
            idle.put_nowait(await connect())
            return
        sample.record(time.perf_counter() - scheduled, status, answer)
        idle.put_nowait(conn)

    start = time.perf_counter() + 0.05
    tasks = []
    lags: list[float] = []  # how late the generator itself started each request (its own saturation)
    for i, body in enumerate(payloads):
        scheduled = start + i / rate
        delay = scheduled - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        lags.append(time.perf_counter() - scheduled)
        tasks.append(asyncio.create_task(one(scheduled, body)))
    # What the apiserver would have given up on (its webhook timeout) counts as an error, not a wait.
    _, pending = await asyncio.wait(tasks, timeout=max(0.0, start + duration + WEBHOOK_TIMEOUT - time.perf_counter()))
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    sample.errors += len(pending)
    elapsed = time.perf_counter() - start
    while not idle.empty():
        idle.get_nowait().close()
    out = {"offered_rps": rate, "achieved_rps": round(len(sample.latencies) / elapsed, 1),
           "connections": opened, **sample.summary(), **schedule_lag(lags)}
    if pending:
        out["timed_out"] = len(pending)
    return out


def schedule_lag(lags: list[float]) -> dict[str, Any]:
    """The generator's own lateness in starting requests (p99 and max, ms): a measurement is only as
    good as its schedule, and a late start is charged to the server's latency."""
    ms = [x * 1000 for x in lags]
    if not ms:
        return {}
    return {"start_lag_p99_ms": round(percentile(ms, 99), 3), "start_lag_max_ms": round(max(ms), 3)}


async def closed_loop(target: Target, path: str, bodies: Bodies | ClaimBodies, workers: int,
                      duration: float) -> dict[str, Any]:
    """``workers`` clients sending back to back for ``duration`` seconds: the maximum throughput."""
    sample = Sample(ok_status=target.ok_status, ok_marker=target.ok_marker)
    conns = [await Wire.open(target) for _ in range(workers)]
    stop_at = time.perf_counter() + duration

    async def worker(conn: Wire) -> None:
        while time.perf_counter() < stop_at:
            body = bodies.next()
            t0 = time.perf_counter()
            status, answer = await conn.post(path, body)
            sample.record(time.perf_counter() - t0, status, answer)

    t0, g0 = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker(c) for c in conns))
    elapsed = time.perf_counter() - t0
    for conn in conns:
        conn.close()
    return {"workers": workers, "throughput_rps": round(len(sample.latencies) / elapsed, 1), **sample.summary(),
            "generator_cpu_share": round((time.process_time() - g0) / elapsed, 3)}


async def closed_loop_turns(loops: dict[str, tuple[Target, str, Bodies | ClaimBodies]], workers: int,
                            duration: float, cpu: Callable[[], CpuReading], slices: int) -> dict[str, dict[str, Any]]:
    """Closed loops of several handlers taking turns: ``loops`` maps a handler to its target, path and bodies.

    Each handler gets ``duration`` seconds in all, cut into ``slices`` turns, so load from other
    processes drifts alike for all of them and their ratio is their own. Measured one after the other,
    the direct baseline's maximum swung by 40 % between runs minutes apart. Handlers of one target run
    on the same connections: the kernel may hand a handler's connections to the server's workers
    unevenly (16 connections: 13 and 3, say) and the next handler's evenly, and shared connections see
    the same spread. ``cpu()`` (:func:`cpu_reader`) is read around every turn; each handler's row has
    the CPU every process spent per request over its turns, and the machine's busy share.
    """
    conns: dict[int, list[Wire]] = {}
    for target, _, _ in loops.values():
        if id(target) not in conns:
            conns[id(target)] = [await Wire.open(target) for _ in range(workers)]
    samples = {name: Sample(ok_status=target.ok_status, ok_marker=target.ok_marker)
               for name, (target, _, _) in loops.items()}
    elapsed = dict.fromkeys(loops, 0.0)
    used: dict[str, dict[str, float]] = {name: {} for name in loops}  # CPU seconds by reading, over the turns

    async def worker(conn: Wire, name: str, stop_at: float) -> None:
        _, path, bodies = loops[name]
        while time.perf_counter() < stop_at:
            t0 = time.perf_counter()
            status, answer = await conn.post(path, bodies.next())
            samples[name].record(time.perf_counter() - t0, status, answer)

    for _ in range(slices):
        for name, (target, _, _) in loops.items():
            before, t0 = cpu(), time.perf_counter()
            await asyncio.gather(*(worker(c, name, t0 + duration / slices) for c in conns[id(target)]))
            elapsed[name] += time.perf_counter() - t0
            for key, value in cpu().items():
                used[name][key] = used[name].get(key, 0.0) + value - before.get(key, 0.0)
    for group in conns.values():
        for conn in group:
            conn.close()
    return {name: _turns_row(samples[name], used[name], elapsed[name], workers, list(loops), slices)
            for name in loops}


def _turns_row(sample: Sample, used: CpuReading, elapsed: float, workers: int, names: list[str],
               slices: int) -> dict[str, Any]:
    """One handler's closed-loop row from its turns (``used``: its readings' growth summed over them):
    throughput, latency, and CPU per request by process."""
    done = len(sample.latencies)
    per, busy = cpu_used({}, used)
    row: dict[str, Any] = {"workers": workers, "throughput_rps": round(done / elapsed, 1) if elapsed else 0.0,
                           **sample.summary(), "generator_cpu_share": round(per.get("generator", 0.0) / elapsed, 3),
                           "turns_with": names, "slices": slices}
    if busy is not None:
        row["machine_busy"] = round(busy, 3)
    if done:
        row["cpu_ms_per_request"] = {key: round(value / done * 1000, 3) for key, value in per.items()}
        row["server_cpu_ms_per_request"] = row["cpu_ms_per_request"].get("bench webhook")
        if "apiserver" in per:
            row["apiserver_cpu_ms_per_request"] = row["cpu_ms_per_request"]["apiserver"]
    return row


def apiserver_pid(port: int) -> int | None:
    """The local kube-apiserver serving ``port`` (its CPU is reported beside the webhook's)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"kube-apiserver") and f"--secure-port={port}".encode() in argv:
            return int(proc.name)
    return None


def _kubeconfig(explicit: str | None, cluster_name: str) -> tuple[str | None, str]:
    """The kubeconfig of a reachable cluster, or None and why not."""
    path = explicit
    if path is None:
        try:
            from dralab_kit.cluster.api import get_cluster
        except ImportError:
            return None, "the local cluster module is not installed"
        handle = get_cluster(cluster_name)
        if handle is None:
            return None, f"local cluster {cluster_name!r} is not up (dralab cluster up)"
        path = str(handle.kubeconfig)
    from dralab.kube import Kube

    try:
        with Kube.from_kubeconfig(path) as api:
            api.request("GET", "/version", timeout=5)
    except Exception as exc:  # KubeError, or credentials that do not load
        return None, f"apiserver not reachable through {path}: {exc}"
    return path, ""


def _start_server(workdir: Path, kubeconfig: str | None, workers: int,
                  namespace: str) -> tuple[subprocess.Popen[bytes], Target]:
    from dralab.webhook import certs

    ca, cert, key = certs.write(workdir)
    config = workdir / "config.yaml"
    # A long grace period: the janitor must not reap benchmark claims (they never get pods) mid-run.
    config.write_text(yaml.safe_dump(BENCH_CONFIG))
    port = free_port()
    argv = [sys.executable, "-m", "dralab.cli", "webhook", "serve", "--cert", str(cert), "--key", str(key),
            "--port", str(port), "--config", str(config), "--bench-routes", "--workers", str(workers),
            "--lease-name", "dralab-bench-webhook", "--lease-namespace", namespace]  # goes with the namespace
    argv += ["--kubeconfig", kubeconfig] if kubeconfig else ["--no-kube"]
    log = open(workdir / "webhook.log", "wb")  # noqa: SIM115 - handed to the child process
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    target = Target(Endpoint.parse(f"https://127.0.0.1:{port}"), ssl.create_default_context(cafile=str(ca)))

    def get(path: str) -> tuple[int, str]:
        if proc.poll() is not None:
            raise RuntimeError(f"webhook exited: {(workdir / 'webhook.log').read_text()[-2000:]}")
        return webhook_get(target, path, timeout=2)

    wait_for(lambda: get("/readyz")[0] == 200, 90, "the benchmark webhook server to be ready")
    if kubeconfig:  # the janitor's CPU counts: wait until a worker leads and its caches are synced
        wait_for(lambda: "dralab_webhook_leader 1.0" in get("/metrics")[1] and get("/readyz")[0] == 200, 90,
                 "a benchmark webhook worker to win its Lease")
    return proc, target


def webhook_get(target: Target, path: str, timeout: float) -> tuple[int, str]:
    """GET one of the webhook's own endpoints (``/readyz``, ``/metrics``): status and text, ``(0, "")`` when it
    does not answer. Not timed, so the kit's plain HTTP client (httpx, as the cluster's health probes) does it."""
    try:
        resp = httpx.get(f"https://{target.endpoint.authority}{path}", verify=target.ctx, timeout=timeout)
    except (httpx.HTTPError, OSError):
        return 0, ""
    return resp.status_code, resp.text


def _cluster_meter(kubeconfig: str | None, cluster_name: str) -> CpuMeter | None:
    """The local cluster's components as a CPU meter; None for a cluster given by kubeconfig (not ours)."""
    if kubeconfig is not None:
        return None
    from dralab_kit.cluster.api import get_cluster

    handle = get_cluster(cluster_name)
    return CpuMeter.for_cluster(handle) if handle is not None else None


def apiserver_target(kubeconfig: str) -> Target:
    """The apiserver as a load target, with the kubeconfig's client certificate (the direct baseline).

    The credentials come from the product's one loader (:func:`dralab.kube.load_kubeconfig`) and its
    TLS context, as for every other apiserver client: the key stays in memory, no file is written. A
    :class:`Wire` sends no token, hence the client certificate.
    """
    from dralab.kube import load_kubeconfig

    config = load_kubeconfig(kubeconfig)
    if not config.configuration.cert_file:
        raise RuntimeError("the direct baseline needs a kubeconfig with a client certificate (the local cluster's)")
    return Target(Endpoint.parse(config.host), config.ssl_context(), ok_status=201, ok_marker=b'"uid"')


def inflight(target: Target) -> float | None:
    """Admissions the webhook is still working on (summed over its workers); None if it does not say."""
    status, text = webhook_get(target, "/metrics", timeout=5)
    if not status:
        return None
    for line in text.splitlines():
        if line.startswith("dralab_webhook_inflight_requests"):
            return float(line.rsplit(" ", 1)[1])
    return None


# The apiserver's own latency histograms of ResourceClaim creates: the whole request, and its write to etcd
CREATE_HISTOGRAMS = {
    "apiserver": ("apiserver_request_duration_seconds", ('resource="resourceclaims"', 'verb="POST"', 'dry_run=""')),
    "etcd": ("etcd_request_duration_seconds", ('resource="resourceclaims"', 'operation="create"')),
}


def claim_create_histograms(metrics: str) -> dict[str, dict[str, float]]:
    """Each of :data:`CREATE_HISTOGRAMS` (``le`` -> count, ``sum``, ``count``) from the apiserver's ``/metrics``
    text: what the apiserver and its etcd write took, beside what the load generator saw."""
    out: dict[str, dict[str, float]] = {name: {} for name in CREATE_HISTOGRAMS}
    for line in metrics.splitlines():
        for name, (metric, labels) in CREATE_HISTOGRAMS.items():
            if not line.startswith(metric) or not all(label in line for label in labels):
                continue
            series, _, value = line.rpartition(" ")
            key = series.split('le="', 1)[1].split('"', 1)[0] if 'le="' in series else \
                series.split("{", 1)[0].rsplit("_", 1)[1]
            out[name][key] = out[name].get(key, 0.0) + float(value)
    return out


def _bucket_bound(bounds: list[tuple[float, float]], count: float) -> float | None:
    """The upper bound in ms of the first cumulative bucket holding ``count`` observations."""
    return next((round(le * 1000, 1) for le, c in bounds if c >= count), None)


def create_latency(before: dict[str, dict[str, float]], after: dict[str, dict[str, float]]) -> dict[str, Any]:
    """The claim creates between two readings, per histogram (``apiserver_*``, ``etcd_*``): count, mean, the
    bucket bounds holding the median and the 99th percentile (coarse buckets: an upper bound, in ms), and
    the share over the p99 target."""
    out: dict[str, Any] = {}
    for name in CREATE_HISTOGRAMS:
        was, now = before.get(name) or {}, after.get(name) or {}
        n = now.get("count", 0.0) - was.get("count", 0.0)
        if n <= 0:
            continue
        bounds = sorted((float(k), now[k] - was.get(k, 0.0)) for k in now if k not in ("sum", "count", "+Inf"))
        mean = (now["sum"] - was.get("sum", 0.0)) / n * 1000
        out.update({f"{name}_creates": int(n), f"{name}_mean_ms": round(mean, 2),
                    f"{name}_p50_at_most_ms": _bucket_bound(bounds, 0.5 * n),
                    f"{name}_p99_at_most_ms": _bucket_bound(bounds, 0.99 * n)})
        within = next((c for le, c in bounds if le >= P99_TARGET_MS / 1000), None)
        if within is not None:
            out[f"{name}_share_over_25ms"] = round(1 - within / n, 4)
    return out


def drain(hook: Target, limit: float = 60.0, api: Any = None, namespace: str = "") -> float | None:
    """Leave nothing of one measurement to the next: wait until the webhook has finished what an overloaded run
    left queued (the client gave up on those requests, the server did not), delete the namespace's claims
    (``api``), then wait for the machine to be quiet again (:func:`~dralab_kit.bench.cpu.settle_machine`).

    The claims go because the cluster's own webhook reaps any claim whose pod never came once its grace
    period (30 s by default) ends: left in place, one run's claims were deleted during a later run, and that
    deletion work (0.2 cores of the cluster's webhook, more of the apiserver and etcd) was charged to it.
    Returns the machine's busy share when the next measurement starts.
    """
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and (inflight(hook) or 0) > 0:
        time.sleep(0.2)
    if api is not None and namespace:
        from dralab.kube.paths import claims_path

        api.delete(claims_path(namespace), propagation=None)  # DELETE on a collection: every claim in it
    return settle_machine()


CpuReading = dict[str, float]


def cpu_reader(server_pid: int, meter: CpuMeter | None, api_pid: int | None) -> Callable[[], CpuReading]:
    """A reader of the CPU seconds so far of everything that shares the machine with a measurement: the
    benchmark's webhook (every worker), the load generator (this process), the cluster's components where
    the cluster is dralab's own (``meter``; else the apiserver alone), and the machine (busy and total)."""

    def read() -> CpuReading:
        out = meter.read() if meter is not None else ({"apiserver": process_cpu(api_pid)} if api_pid else {})
        if "webhook" in out:  # the cluster's own webhook, not the one under load
            out["cluster webhook"] = out.pop("webhook")
        out["bench webhook"] = tree_cpu(server_pid)
        out["generator"] = process_cpu(os.getpid())
        out["machine busy"], out["machine total"] = machine_cpu()
        return out

    return read


def cpu_used(before: CpuReading, after: CpuReading) -> tuple[dict[str, float], float | None]:
    """CPU seconds each named process used between two readings, with ``other`` (the rest of the machine's
    busy time: the kernel, processes not named) when the readings have the machine's; and the machine's busy
    share of all its cores (None without it)."""
    used = {k: max(0.0, v - before.get(k, 0.0)) for k, v in after.items() if not k.startswith("machine")}
    if "machine busy" not in after:
        return used, None
    busy = after["machine busy"] - before.get("machine busy", 0.0)
    total = after["machine total"] - before.get("machine total", 0.0)
    used["other"] = max(0.0, busy - sum(used.values()))
    return used, busy / total if total > 0 else None


def cpu_during(before: CpuReading, after: CpuReading, seconds: float) -> dict[str, Any]:
    """Cores each process used on average over ``seconds`` (:func:`cpu_used`) and ``machine_busy``."""
    used, busy = cpu_used(before, after)
    return {"cores": {k: round(v / seconds, 3) for k, v in used.items()},
            "machine_busy": round(busy, 3) if busy is not None else None}


def _one_round(targets: dict[str, tuple[Target, str, Any]], rates: tuple[int, ...], seconds: float,
               proc: subprocess.Popen[bytes], api_pid: int | None, progress: Progress, task: Any,
               hook: Target | None = None, closed_loops: bool = True, api: Any = None,
               cpu: Callable[[], CpuReading] | None = None, namespace: str = "") -> dict[str, Any]:
    """One repeat: each handler's closed loop with the CPU the server and the apiserver spent on it, then
    every handler at every rate (taking turns at each step, so drifting load hits them alike); the server
    drains between measurements."""
    results: dict[str, Any] = {name: {"open_loop": []} for name in targets}
    load = [round(x, 2) for x in os.getloadavg()]

    def wait() -> float | None:
        return drain(hook, api=api, namespace=namespace) if hook is not None else None

    paired: set[str] = set()
    for pair in PAIRS if closed_loops else ():
        if not all(n in targets for n in pair):
            continue
        wait()
        progress.update(task, description=f"{' and '.join(pair)}: closed loops taking turns, {CLOSED_WORKERS} workers")
        rows = asyncio.run(closed_loop_turns({n: targets[n] for n in pair}, CLOSED_WORKERS, seconds,
                                             cpu or (lambda: {"bench webhook": tree_cpu(proc.pid)}),
                                             max(1, round(seconds / SLICE_SECONDS))))
        results.update({name: {"open_loop": [], "closed_loop": row} for name, row in rows.items()})
        paired.update(pair)
        progress.advance(task, len(pair))
    for name, (target, path, bodies) in targets.items() if closed_loops else ():
        if name in paired:
            continue
        wait()
        progress.update(task, description=f"{name}: closed loop, {CLOSED_WORKERS} workers")
        cpu0 = settled_cpu(proc.pid)
        api0 = process_cpu(api_pid) if api_pid else None
        closed = asyncio.run(closed_loop(target, path, bodies, CLOSED_WORKERS, seconds))
        # CPU seconds per request: far less sensitive to a busy machine than wall time. The server's
        # counts every process and the janitor's work on the claims (read once it has settled).
        if closed["completed"]:
            closed["server_cpu_ms_per_request"] = round((settled_cpu(proc.pid) - cpu0) / closed["completed"] * 1000, 3)
            if api0 is not None and api_pid:
                closed["apiserver_cpu_ms_per_request"] = round(
                    (process_cpu(api_pid) - api0) / closed["completed"] * 1000, 3)
        results[name]["closed_loop"] = closed
        progress.advance(task)
    for rate in rates:
        for name, (target, path, bodies) in targets.items():
            if name in TYPED:
                continue
            quiet = wait()
            progress.update(task, description=f"{name}: open loop at {rate} req/s")
            seen = claim_creates(api) if api is not None and name in ("create", "direct") else None
            reading0, t0 = (cpu(), time.perf_counter()) if cpu is not None else (None, 0.0)
            row = asyncio.run(open_loop(target, path, bodies, rate, seconds))
            if reading0 is not None and cpu is not None:  # was the machine saturated while this ran, and by whom
                row["cpu"] = {**cpu_during(reading0, cpu(), time.perf_counter() - t0), "machine_busy_at_start": quiet}
            if seen is not None:  # the apiserver's own share of the latency, in the same run
                row.update(create_latency(seen, claim_creates(api)))
            results[name]["open_loop"].append(row)
            progress.advance(task)
    return {"load_average_start": load, "load_average_end": [round(x, 2) for x in os.getloadavg()],
            "handlers": results}


def claim_creates(api: Any) -> dict[str, dict[str, float]]:
    """The apiserver's claim-create histograms now (empty when its metrics cannot be read)."""
    from dralab.kube import KubeError

    try:
        return claim_create_histograms(api.text("/metrics"))
    except KubeError:
        return {}


def spread(values: list[float | None]) -> dict[str, Any]:
    """Median, min and max of one figure over the repeats (None where a run had no value)."""
    got = sorted(v for v in values if v is not None)
    if not got:
        return {"median": None, "min": None, "max": None, "runs": values}
    return {"median": round(statistics.median(got), 3), "min": round(got[0], 3), "max": round(got[-1], 3),
            "runs": values}


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def summarize(rounds: list[dict[str, Any]], rates: tuple[int, ...]) -> dict[str, Any]:
    """Each figure per run, as median and spread; ratios are taken inside each run, then summarized."""
    names = [n for n in rounds[0]["handlers"] if n not in TYPED]  # the handlers with open loops
    every = list(rounds[0]["handlers"])

    def closed(name: str, key: str) -> list[float | None]:
        return [(r["handlers"][name].get("closed_loop") or {}).get(key) for r in rounds]

    def at(name: str, rate: int, key: str) -> list[float | None]:
        out = []
        for r in rounds:
            row = next(x for x in r["handlers"][name]["open_loop"] if x["offered_rps"] == rate)
            out.append(row.get(key) if not row.get("errors") else None)  # a run with errors has no valid p99
        return out

    summary: dict[str, Any] = {"max_rps": {n: spread(closed(n, "throughput_rps")) for n in every},
                               "server_cpu_ms_per_request": {n: spread(closed(n, "server_cpu_ms_per_request"))
                                                             for n in every},
                               "p99_ms": {n: {str(rate): spread(at(n, rate, "p99_ms")) for rate in rates}
                                          for n in names},
                               "errors": {n: {str(rate): [next(x for x in r["handlers"][n]["open_loop"]
                                                               if x["offered_rps"] == rate)["errors"] for r in rounds]
                                              for rate in rates} for n in names}}
    if all("cpu" in x for r in rounds for h in r["handlers"].values() for x in h["open_loop"]):
        summary["cpu_during_open_loop"] = cpu_summary(rounds, names, rates)
    ratios = {"convert_vs_noop_max": ("convert", "noop")} if {"convert", "noop"} <= set(names) else {}
    if "create" in names and "direct" in names:
        ratios["create_vs_direct_max"] = ("create", "direct")
        summary["apiserver_cpu_ms_per_request"] = {n: spread(closed(n, "apiserver_cpu_ms_per_request"))
                                                   for n in ("create", "direct")}
        if all(closed(n, "cpu_ms_per_request")[0] for n in ("create", "direct")):
            summary["closed_loop_cpu"] = closed_cpu_summary(rounds)
        # what the apiserver itself took per create in those runs (its own histogram): the gap's apiserver part
        summary["apiserver_mean_ms"] = {n: {str(rate): spread(at(n, rate, "apiserver_mean_ms")) for rate in rates}
                                        for n in ("create", "direct")}
        summary["apiserver_share_over_25ms"] = {n: {str(rate): spread(at(n, rate, "apiserver_share_over_25ms"))
                                                    for rate in rates} for n in ("create", "direct")}
        # the apiserver's write to etcd: does the store itself slow down when the webhook shares the machine
        summary["etcd_share_over_25ms"] = {n: {str(rate): spread(at(n, rate, "etcd_share_over_25ms"))
                                               for rate in rates} for n in ("create", "direct")}
        summary["create_p99_vs_direct_p99"] = {
            str(rate): spread([_ratio(c, d) for c, d in zip(at("create", rate, "p99_ms"), at("direct", rate, "p99_ms"),
                                                             strict=True)]) for rate in rates}
    for key, (a, b) in ratios.items():
        summary[key] = spread([_ratio(x, y) for x, y in zip(closed(a, "throughput_rps"), closed(b, "throughput_rps"),
                                                             strict=True)])
    if all(n in every for n in TYPED):
        summary["prefer_vs_single_cpu"] = prefer_vs_single(closed("prefer", "server_cpu_ms_per_request"),
                                                           closed("single", "server_cpu_ms_per_request"))
        if any(closed("prefer", "apiserver_cpu_ms_per_request")):  # the create path: the apiserver's share too
            summary["prefer_vs_single_apiserver_cpu"] = prefer_vs_single(
                closed("prefer", "apiserver_cpu_ms_per_request"), closed("single", "apiserver_cpu_ms_per_request"))
    return summary


def prefer_vs_single(prefer: list[float | None], single: list[float | None]) -> dict[str, Any]:
    """The webhook's CPU per admission of 3-type ``firstAvailable`` pods against one-type pods: the ratio and
    the extra ms, each taken inside a round (their turns shared the load), then median and spread."""
    pairs = list(zip(prefer, single, strict=True))
    return {"ratio": spread([_ratio(p, s) for p, s in pairs]),
            "extra_ms": spread([round(p - s, 3) if p is not None and s is not None else None for p, s in pairs])}


def _medians(readings: list[dict[str, float]]) -> dict[str, float]:
    """Per key, the median over the rounds' readings (a key a round lacks counts as 0 there)."""
    keys = sorted({k for reading in readings for k in reading})
    return {k: round(statistics.median(reading.get(k, 0.0) for reading in readings), 3) for k in keys}


def cpu_summary(rounds: list[dict[str, Any]], names: list[str], rates: tuple[int, ...]) -> dict[str, Any]:
    """Per handler and rate, over the rounds: the machine's busy share (median and spread) and the median
    cores of each process (``cpu_during``), errors or not (a saturated run is the one to explain)."""
    out: dict[str, Any] = {}
    for name in names:
        for rate in rates:
            rows = [next(x for x in r["handlers"][name]["open_loop"] if x["offered_rps"] == rate)["cpu"]
                    for r in rounds]
            out.setdefault(name, {})[str(rate)] = {"machine_busy": spread([row.get("machine_busy") for row in rows]),
                                                   "cores": _medians([row["cores"] for row in rows])}
    return out


def closed_cpu_summary(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Where a closed-loop request's CPU went, for create and direct (taking turns): per process, the median
    over the rounds of the CPU ms per request, and the machine's busy share. With the machine saturated,
    maximum throughput is the cores over the sum of these, so their difference is the ratio's gap by owner."""
    out: dict[str, Any] = {}
    for name in ("create", "direct"):
        rows = [r["handlers"][name]["closed_loop"] for r in rounds]
        out[name] = {"machine_busy": spread([row.get("machine_busy") for row in rows]),
                     "ms_per_request": _medians([row.get("cpu_ms_per_request") or {} for row in rows])}
    return out


def _median_rows(rounds: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """The handler's rows from the run whose closed-loop throughput is the median (for the report table)."""
    ordered = sorted(rounds, key=lambda r: r["handlers"][name].get("closed_loop", {}).get("throughput_rps") or 0)
    return ordered[len(ordered) // 2]["handlers"][name]


def run(quick: bool, kubeconfig: str | None, cluster_name: str, duration: float | None,
        repeats: int | None = None, workers: int | None = None, handlers: tuple[str, ...] = (),
        rates: tuple[int, ...] = (), closed_loops: bool = True) -> dict[str, Any]:
    """The whole benchmark; ``handlers``/``rates`` (default: all) and ``closed_loops`` narrow it while iterating."""
    rates = rates or (RATES_QUICK if quick else RATES_FULL)
    seconds = duration or (3.0 if quick else 8.0)
    repeats = repeats or (1 if quick else REPEATS_FULL)
    workers = workers if workers is not None else max(1, len(os.sched_getaffinity(0)))
    kube, skip_reason = _kubeconfig(kubeconfig, cluster_name)
    namespace = f"bench-admission-{uuid.uuid4().hex[:6]}"
    from dralab.kube.paths import namespace_path

    api = None
    if kube is not None:
        from dralab.kube import Kube

        api = Kube.from_kubeconfig(kube)
        api.create(namespace_path(), {"metadata": {"name": namespace, "labels": {"dralab.io/bench": "admission"}}})
    load_before = os.getloadavg()
    sequential = _apiserver_baseline(api, namespace, 20 if quick else 100) if api is not None else None
    rounds: list[dict[str, Any]] = []
    api_pid = None
    with tempfile.TemporaryDirectory(prefix="dralab-bench-") as tmp:
        proc, hook = _start_server(Path(tmp), kube, workers, namespace)
        try:
            targets: dict[str, tuple[Target, str, Any]] = {
                name: (hook, path, Bodies(namespace)) for name, path in HANDLERS.items()}
            typed_path = HANDLERS["convert" if kube is None else "create"]
            targets.update({kind: (hook, typed_path, Bodies(namespace, typed_pod(kind))) for kind in TYPED})
            if kube is None:
                targets.pop("create")
            else:
                direct = apiserver_target(kube)
                from dralab.kube.paths import claims_path

                targets["direct"] = (direct, claims_path(namespace), ClaimBodies(namespace))
                api_pid = apiserver_pid(direct.port)
            cpu = cpu_reader(proc.pid, _cluster_meter(kubeconfig, cluster_name) if kube else None, api_pid)
            if handlers:
                targets = {name: t for name, t in targets.items() if name in handlers}
            with Progress(console=console, transient=True) as progress:
                steps = len(rates) + (1 if closed_loops else 0)
                task = progress.add_task("admission", total=repeats * steps * len(targets))
                for _ in range(repeats):
                    rounds.append(_one_round(targets, rates, seconds, proc, api_pid, progress, task, hook,
                                             closed_loops, api, cpu, namespace))
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
            if api is not None:
                try:
                    api.delete(namespace_path(namespace))
                finally:
                    api.close()
    summary = summarize(rounds, rates)
    typed_path = HANDLERS["convert" if kube is None else "create"]
    rows: dict[str, Any] = {name: {"path": path, **_median_rows(rounds, name)}
                            for name, path in {**HANDLERS, "direct": "apiserver",
                                               **dict.fromkeys(TYPED, typed_path)}.items()
                            if name in rounds[0]["handlers"]}
    if "create" not in rows and (not handlers or "create" in handlers):
        rows["create"] = {"skipped": skip_reason}
    return {"rates": list(rates), "duration_s": seconds, "closed_loops": closed_loops, "repeats": repeats,
            "server_workers": workers,
            "closed_loop_workers": CLOSED_WORKERS, "baseline": "noop", "direct_baseline": "direct",
            "bench_config": BENCH_CONFIG, "apiserver_measured": api_pid is not None,
            "handlers": rows, "rounds": rounds, "summary": summary,
            "typed_pods": _typed_pods(typed_path),
            "apiserver_create_sequential": sequential or {"skipped": skip_reason},
            "load_average": {"before": [round(x, 2) for x in load_before],
                             "after": [round(x, 2) for x in os.getloadavg()]},
            "targets": _targets(summary, rows)}


def _typed_pods(path: str) -> dict[str, Any]:
    """What the ``single`` and ``prefer`` handlers admit, for the reader of the result."""
    from dralab_kit.bench.prefer import PREFER_TYPES, SINGLE_TYPE

    return {"path": path, "prefer": f"dralab.io/prefer-types: {','.join(PREFER_TYPES)} (firstAvailable, 3 subrequests)",
            "single": f"nvidia.com/use-gputype: {SINGLE_TYPE} (one exactly request)", "baseline": "single"}


def _apiserver_baseline(api: Any, namespace: str, n: int) -> dict[str, Any]:
    """The apiserver's own latency for the claim create the create handler makes (sequential, direct)."""
    from dralab.config import default_config
    from dralab.kube.paths import claims_path
    from dralab.model.convert import Converter

    converter = Converter(default_config().vendors)
    latencies = []
    for i in range(n):
        claim = converter.convert(_pod(f"direct-{i}"), namespace=namespace, request_uid=f"direct-{i}").objects[0]
        t0 = time.perf_counter()
        api.create(claims_path(namespace), claim)
        latencies.append((time.perf_counter() - t0) * 1000)
    return {"requests": n, "p50_ms": round(percentile(latencies, 50), 3), "p99_ms": round(percentile(latencies, 99), 3)}


def _targets(summary: dict[str, Any], handlers: dict[str, Any]) -> dict[str, Any]:
    """Verdicts on the medians over the repeats (each with its spread)."""
    out: dict[str, Any] = {}
    conv = summary.get("convert_vs_noop_max") or {"median": None, "min": None, "max": None}
    out["convert_max_throughput_vs_noop"] = {"ratio": conv["median"], "spread": [conv["min"], conv["max"]],
                                             "target": THROUGHPUT_TARGET,
                                             "met": conv["median"] is not None and conv["median"] >= THROUGHPUT_TARGET}
    if not {"create", "direct"} <= set(summary["p99_ms"]):
        reason = handlers.get("create", {}).get("skipped", "no create run")
        for key in ("create_p99_at_100_rps", "create_p99_every_rate", "create_max_vs_direct", "server_cpu_per_pod"):
            out[key] = {"skipped": reason}
        return out
    p99 = summary["p99_ms"]["create"]
    errors = summary["errors"]["create"]
    at_100 = p99.get("100")
    if at_100 is None:
        out["create_p99_at_100_rps"] = {"skipped": "no 100 req/s run"}
    else:
        out["create_p99_at_100_rps"] = {"p99_ms": at_100["median"], "spread_ms": [at_100["min"], at_100["max"]],
                                        "target_ms": P99_TARGET_MS, "errors": errors["100"],
                                        "met": at_100["median"] is not None and at_100["median"] <= P99_TARGET_MS}
    worst = [p99[r]["median"] for r in p99]
    out["create_p99_every_rate"] = {
        "p99_ms_by_rate": {r: p99[r]["median"] for r in p99}, "target_ms": P99_TARGET_MS,
        "met": all(v is not None and v <= P99_TARGET_MS for v in worst)}
    direct = summary["create_vs_direct_max"]
    out["create_max_vs_direct"] = {"ratio": direct["median"], "spread": [direct["min"], direct["max"]],
                                   "create_rps": summary["max_rps"]["create"]["median"],
                                   "direct_rps": summary["max_rps"]["direct"]["median"], "target": DIRECT_TARGET,
                                   "met": direct["median"] is not None and direct["median"] >= DIRECT_TARGET}
    cpu = summary["server_cpu_ms_per_request"]["create"]
    out["server_cpu_per_pod"] = {"ms": cpu["median"], "spread_ms": [cpu["min"], cpu["max"]], "target_ms": CPU_TARGET_MS,
                                 "met": cpu["median"] is not None and cpu["median"] <= CPU_TARGET_MS}
    return out


JANITOR_SIZES = (1000, 10000, 50000)


class _QuietApi:
    """What the janitor's passes may call, answering nothing: the measured state needs no API call."""

    def list(self, path: str, **_: Any) -> dict[str, Any]:
        return {"items": []}

    def patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return {}

    def delete(self, path: str, **_: Any) -> None:
        return None


def measure_janitor_pass(sizes: tuple[int, ...] = JANITOR_SIZES, repeats: int = 5) -> dict[str, Any]:
    """CPU of one janitor pass in memory (no cluster, no server), at each number of cached claims.

    The state is the steady one: every pod bound, its claim adopted. ``incremental``: the pass after
    one pod event (what each pod event costs now); ``full``: a full pass (index rebuilt, every claim
    decided: at start, after a relist, every resync); ``plan``: the pure :func:`plan` over both caches,
    the core of what every pass cost before issue 27. Milliseconds of this thread's CPU, median of
    ``repeats``.
    """
    from dralab.webhook.controllers.janitor import Janitor, plan
    from dralab.webhook.metrics import Metrics

    now = 1_767_225_600.0
    stamp = "2025-12-31T23:00:00Z"
    out: dict[str, Any] = {}
    for n in sizes:
        pods = {("bench", f"p{i}"): {
            "metadata": {"name": f"p{i}", "namespace": "bench", "uid": f"u{i}", "creationTimestamp": stamp},
            "spec": {"nodeName": "n1", "resourceClaims": [{"name": "gpu", "resourceClaimName": f"c{i}"}]},
        } for i in range(n)}
        claims = {("bench", f"c{i}"): {"metadata": {
            "name": f"c{i}", "namespace": "bench", "uid": f"cu{i}", "creationTimestamp": stamp,
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": f"p{i}", "uid": f"u{i}"}],
        }} for i in range(n)}
        jan = Janitor(_QuietApi(), Metrics(), resync_seconds=1e9, clock=lambda: now)  # type: ignore[arg-type]
        jan.pods.items, jan.claims.items = pods, claims
        figures: dict[str, list[float]] = {"incremental": [], "full": [], "plan": []}
        for r in range(repeats):
            t0 = time.thread_time()
            jan.reconcile_once(full=True)
            figures["full"].append(time.thread_time() - t0)
            assert jan.last_evaluated == n
            jan.pods._changed("MODIFIED", pods[("bench", f"p{r * 7919 % n}")])
            t0 = time.thread_time()
            jan.reconcile_once()
            figures["incremental"].append(time.thread_time() - t0)
            assert jan.last_evaluated == 1
            t0 = time.thread_time()
            plan(jan.claims.snapshot(), jan.pods.snapshot(), now, jan.grace)
            figures["plan"].append(time.thread_time() - t0)
        out[str(n)] = {k: round(statistics.median(v) * 1000, 3) for k, v in figures.items()}
    return out


@click.command("admission")
@click.option("--out", "out_dir", default="bench/results", show_default=True, help="Directory for admission.json.")
@click.option("--quick", is_flag=True, help="CI size: one rate (100 req/s), 3 s per run, one repeat.")
@click.option("--kubeconfig", default=None, help="Cluster for the create handler (default: the local cluster).")
@click.option("--cluster", "cluster_name", default=os.environ.get("DRALAB_TEST_CLUSTER", "dralab"),
              show_default=True, help="Local cluster name used when --kubeconfig is not given.")
@click.option("--duration", type=float, default=None, help="Seconds per run (default 8, quick 3).")
@click.option("--repeats", type=click.IntRange(min=1), default=None,
              help="Rounds of every measurement; figures are their median and spread (default 3, quick 1).")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Webhook server processes (default: one per core).")
@click.option("--handler", "handlers", multiple=True, type=click.Choice([*HANDLERS, "direct", *TYPED]),
              help="Measure only this handler (repeatable; default: all). For iterating, not for results.")
@click.option("--rate", "rates", multiple=True, type=click.IntRange(min=1),
              help="Open-loop rate in req/s (repeatable; default 50, 100, 200; quick 100).")
@click.option("--no-closed-loop", is_flag=True, help="Skip the closed-loop (maximum throughput) runs.")
@click.option("--janitor-pass", is_flag=True,
              help="Measure only the janitor's pass in memory (no cluster, no server; janitor.json): CPU of "
                   "one incremental pass after a pod event and of one full pass at --janitor-sizes cached claims.")
@click.option("--janitor-sizes", default=",".join(map(str, JANITOR_SIZES)), show_default=True,
              help="Cached claims (and pods) for --janitor-pass, separated by commas.")
def admission(out_dir: str, quick: bool, kubeconfig: str | None, cluster_name: str, duration: float | None,
              repeats: int | None, workers: int | None, handlers: tuple[str, ...], rates: tuple[int, ...],
              no_closed_loop: bool, janitor_pass: bool, janitor_sizes: str) -> None:
    """Admission latency (open loop at fixed rates) and maximum throughput (closed loop) over TLS.

    Baselines in the same run: the no-op handler for conversion, and the same load generator creating
    the same claims directly against the apiserver for the create handler.

    \b
    Example:
      dralab bench admission --quick --out /tmp/results
      dralab bench admission --janitor-pass
    """
    if janitor_pass:
        figures = measure_janitor_pass(parse_sizes(janitor_sizes), repeats or 5)
        path = write_result(out_dir, "janitor", {
            "benchmark": "janitor", "repeats": repeats or 5, "unit": "ms of thread CPU, median",
            "sizes": [{"claims": int(n), **row} for n, row in figures.items()],
            "baseline": "plan: the pure plan() over both caches, the core of every pass before the index",
        })
        console.print("cached claims: janitor pass CPU, ms (median of "
                      f"{repeats or 5}): incremental (one pod event) / full / plan() alone")
        for n, row in figures.items():
            console.print(f"{int(n):>7,}: {row['incremental']} / {row['full']} / {row['plan']}")
        console.print(f"wrote {path}")
        return
    result = run(quick, kubeconfig, cluster_name, duration, repeats, workers, handlers, tuple(sorted(rates)),
                 not no_closed_loop)
    path = write_result(out_dir, "admission", result)
    summary = result["summary"]
    for name, entry in result["handlers"].items():
        if "skipped" in entry:
            console.print(f"{name}: skipped ({entry['skipped']})")
            continue
        mx = summary["max_rps"][name]
        cpu = summary["server_cpu_ms_per_request"][name]
        if name in TYPED:
            console.print(f"{name}: max {mx['median']} req/s, server CPU {cpu['median']} ms/admission")
            continue
        p99 = ", ".join(f"{rate}/s p99 {v['median']} ms [{v['min']}-{v['max']}]"
                        for rate, v in summary["p99_ms"][name].items())
        console.print(f"{name}: {p99}; max {mx['median']} req/s [{mx['min']}-{mx['max']}], "
                      f"server CPU {cpu['median']} ms/request")
    for key in ("prefer_vs_single_cpu", "prefer_vs_single_apiserver_cpu"):
        if key in summary:
            console.print(f"{key} (prefer-types with 3 types against one type, per admission): "
                          f"{json.dumps(summary[key])}")
    console.print(f"apiserver claim create, direct and sequential: {result['apiserver_create_sequential']}")
    console.print(f"load average before/after: {result['load_average']}")
    console.print(f"targets: {json.dumps(result['targets'])}")
    click.echo(str(path))
