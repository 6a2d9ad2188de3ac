"""``dralab bench admission``: webhook latency and throughput over TLS, three handlers, one server.

The server is the real ``dralab webhook serve`` in its own process; this process only generates
load, with a minimal HTTP/1.1 keep-alive client so the generator costs little CPU. Three handlers
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
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
import yaml
from rich.console import Console
from rich.progress import Progress

from dralab.bench.common import percentile, write_result
from dralab.util import free_port, wait_for

RATES_FULL = (50, 100, 200, 500)
RATES_QUICK = (100,)
HANDLERS = {"noop": "/bench/noop", "convert": "/bench/convert", "create": "/mutate"}
P99_TARGET_MS = 25.0
WEBHOOK_TIMEOUT = 10.0  # seconds: the registration's timeoutSeconds
THROUGHPUT_TARGET = 0.5

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


class Bodies:
    """Pre-rendered AdmissionReview bodies with unique pod names and UIDs (claims must not collide)."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.template = json.dumps({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "@UID@", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                        "resource": {"group": "", "version": "v1", "resource": "pods"},
                        "namespace": namespace, "operation": "CREATE", "object": _pod("@NAME@")},
        })
        self.n = 0

    def next(self) -> bytes:
        self.n += 1
        uid = str(uuid.uuid4())
        return self.template.replace("@UID@", uid).replace("@NAME@", f"bench-{self.n}-{uid[:8]}").encode()


class Connection:
    """One keep-alive TLS connection speaking just enough HTTP/1.1."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, port: int, ctx: ssl.SSLContext) -> Connection:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname="localhost")
        return cls(reader, writer)

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        head = (f"POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        self.writer.write(head + body)
        status_line = await self.reader.readline()
        status = int(status_line.split()[1])
        length = 0
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        return status, await self.reader.readexactly(length)

    def close(self) -> None:
        self.writer.close()


@dataclass
class Sample:
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    first_error: str = ""

    def record(self, latency: float, status: int, body: bytes) -> None:
        ok = status == 200 and b'"allowed":true' in body
        if ok:
            self.latencies.append(latency)
        else:
            self.errors += 1
            if not self.first_error:
                self.first_error = f"HTTP {status}: {body[:300].decode(errors='replace')}"

    def summary(self) -> dict[str, Any]:
        ms = [x * 1000 for x in self.latencies]
        out = {"completed": len(ms), "errors": self.errors,
               "p50_ms": round(percentile(ms, 50), 3) if ms else None,
               "p99_ms": round(percentile(ms, 99), 3) if ms else None,
               "max_ms": round(max(ms), 3) if ms else None}
        if self.first_error:
            out["first_error"] = self.first_error
        return out


async def open_loop(port: int, ctx: ssl.SSLContext, path: str, bodies: Bodies, rate: float,
                    duration: float, max_connections: int = 64) -> dict[str, Any]:
    """Start ``rate`` requests per second for ``duration`` seconds on a fixed schedule.

    Connections are reused; up to ``max_connections`` are opened when all are busy (as an apiserver
    would), beyond that requests wait, and the wait counts in their latency.
    """
    idle: asyncio.Queue[Connection] = asyncio.Queue()
    opened = 4
    for _ in range(opened):
        idle.put_nowait(await Connection.open(port, ctx))
    sample = Sample()
    payloads = [bodies.next() for _ in range(int(rate * duration))]

    async def one(scheduled: float, body: bytes) -> None:
        nonlocal opened
        if idle.empty() and opened < max_connections:
            opened += 1
            conn = await Connection.open(port, ctx)
        else:
            conn = await idle.get()
        try:
            status, answer = await conn.post(path, body)
        except (OSError, asyncio.IncompleteReadError, ValueError, IndexError) as exc:
            sample.errors += 1
            sample.first_error = sample.first_error or f"{type(exc).__name__}: {exc}"
            conn.close()
            idle.put_nowait(await Connection.open(port, ctx))
            return
        sample.record(time.perf_counter() - scheduled, status, answer)
        idle.put_nowait(conn)

    start = time.perf_counter() + 0.05
    tasks = []
    for i, body in enumerate(payloads):
        scheduled = start + i / rate
        delay = scheduled - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
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
           "connections": opened, **sample.summary()}
    if pending:
        out["timed_out"] = len(pending)
    return out


async def closed_loop(port: int, ctx: ssl.SSLContext, path: str, bodies: Bodies, workers: int,
                      duration: float) -> dict[str, Any]:
    """``workers`` clients sending back to back for ``duration`` seconds: the maximum throughput."""
    sample = Sample()
    conns = [await Connection.open(port, ctx) for _ in range(workers)]
    stop_at = time.perf_counter() + duration

    async def worker(conn: Connection) -> None:
        while time.perf_counter() < stop_at:
            body = bodies.next()
            t0 = time.perf_counter()
            status, answer = await conn.post(path, body)
            sample.record(time.perf_counter() - t0, status, answer)

    t0 = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in conns))
    elapsed = time.perf_counter() - t0
    for conn in conns:
        conn.close()
    return {"workers": workers, "throughput_rps": round(len(sample.latencies) / elapsed, 1), **sample.summary()}


def _process_cpu(pid: int) -> float:
    """User plus system CPU seconds of process ``pid`` so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _kubeconfig(explicit: str | None, cluster_name: str) -> tuple[str | None, str]:
    """The kubeconfig of a reachable cluster, or None and why not."""
    path = explicit
    if path is None:
        try:
            from dralab.cluster.api import get_cluster
        except ImportError:
            return None, "the local cluster module is not installed"
        handle = get_cluster(cluster_name)
        if handle is None:
            return None, f"local cluster {cluster_name!r} is not up (dralab cluster up)"
        path = str(handle.kubeconfig)
    from dralab.webhook.kube import ApiError, KubeApi

    try:
        api = KubeApi.from_kubeconfig(path)
        api.request("GET", "/version", timeout=5)
        api.close()
    except (ApiError, Exception) as exc:
        return None, f"apiserver not reachable through {path}: {exc}"
    return path, ""


def _start_server(workdir: Path, kubeconfig: str | None) -> tuple[subprocess.Popen, int, ssl.SSLContext]:
    from dralab.webhook import certs

    ca, cert, key = certs.write(workdir)
    config = workdir / "config.yaml"
    # A long grace period: the janitor must not reap benchmark claims (they never get pods) mid-run.
    config.write_text(yaml.safe_dump({"webhook": {"claimGracePeriodSeconds": 86400}}))
    port = free_port()
    argv = [sys.executable, "-m", "dralab.cli", "webhook", "serve", "--cert", str(cert), "--key", str(key),
            "--port", str(port), "--config", str(config), "--bench-routes"]
    argv += ["--kubeconfig", kubeconfig] if kubeconfig else ["--no-kube"]
    log = open(workdir / "webhook.log", "wb")  # noqa: SIM115 - handed to the child process
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    ctx = ssl.create_default_context(cafile=str(ca))

    def healthy() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"webhook exited: {(workdir / 'webhook.log').read_text()[-2000:]}")
        try:
            import http.client

            conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=2)
            conn.request("GET", "/readyz")
            return conn.getresponse().status == 200
        except (OSError, ssl.SSLError):
            return False

    wait_for(healthy, 60, "the benchmark webhook server to be ready")
    return proc, port, ctx


def run(quick: bool, kubeconfig: str | None, cluster_name: str, duration: float | None) -> dict[str, Any]:
    rates = RATES_QUICK if quick else RATES_FULL
    seconds = duration or (3.0 if quick else 10.0)
    workers = 16
    kube, skip_reason = _kubeconfig(kubeconfig, cluster_name)
    handlers = dict(HANDLERS)
    namespace = f"bench-admission-{uuid.uuid4().hex[:6]}"
    api = None
    if kube is None:
        handlers.pop("create")
    else:
        from dralab.webhook.kube import KubeApi

        api = KubeApi.from_kubeconfig(kube)
        api.create("/api/v1/namespaces", {"metadata": {"name": namespace, "labels": {"dralab.io/bench": "admission"}}})
    results: dict[str, Any] = {}
    load_before = os.getloadavg()
    apiserver = _apiserver_baseline(api, namespace, 20 if quick else 100) if api is not None else None
    with tempfile.TemporaryDirectory(prefix="dralab-bench-") as tmp:
        proc, port, ctx = _start_server(Path(tmp), kube)
        try:
            # Handlers take turns at each step, so a shared machine's drifting load hits them alike.
            bodies = {name: Bodies(namespace) for name in handlers}
            results = {name: {"path": path, "open_loop": []} for name, path in handlers.items()}
            with Progress(console=console, transient=True) as progress:
                task = progress.add_task("admission", total=(len(rates) + 1) * len(handlers))
                for rate in rates:
                    for name, path in handlers.items():
                        progress.update(task, description=f"{name}: open loop at {rate} req/s")
                        results[name]["open_loop"].append(
                            asyncio.run(open_loop(port, ctx, path, bodies[name], rate, seconds)))
                        progress.advance(task)
                for name, path in handlers.items():
                    progress.update(task, description=f"{name}: closed loop, {workers} workers")
                    cpu0 = _process_cpu(proc.pid)
                    closed = asyncio.run(closed_loop(port, ctx, path, bodies[name], workers, seconds))
                    # CPU seconds the server spent per request: far less sensitive to a busy machine than wall time.
                    if closed["completed"]:
                        closed["server_cpu_ms_per_request"] = round(
                            (_process_cpu(proc.pid) - cpu0) / closed["completed"] * 1000, 3)
                    results[name]["closed_loop"] = closed
                    progress.advance(task)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
            if api is not None:
                try:
                    api.delete(f"/api/v1/namespaces/{namespace}")
                finally:
                    api.close()
    if "create" not in results:
        results["create"] = {"skipped": skip_reason}
    return {"rates": list(rates), "duration_s": seconds, "baseline": "noop", "handlers": results,
            "apiserver_create_sequential": apiserver or {"skipped": skip_reason},
            "load_average": {"before": [round(x, 2) for x in load_before],
                             "after": [round(x, 2) for x in os.getloadavg()]},
            "targets": _targets(results)}


def _apiserver_baseline(api: Any, namespace: str, n: int) -> dict[str, Any]:
    """The apiserver's own latency for the claim create the create handler makes (sequential, direct)."""
    from dralab.config import default_config
    from dralab.model.convert import Converter
    from dralab.webhook.kube import claims_path

    converter = Converter(default_config().vendors)
    latencies = []
    for i in range(n):
        claim = converter.convert(_pod(f"direct-{i}"), namespace=namespace, request_uid=f"direct-{i}").objects[0]
        t0 = time.perf_counter()
        api.create(claims_path(namespace), claim)
        latencies.append((time.perf_counter() - t0) * 1000)
    return {"requests": n, "p50_ms": round(percentile(latencies, 50), 3), "p99_ms": round(percentile(latencies, 99), 3)}


def _targets(results: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    noop = results["noop"]["closed_loop"]["throughput_rps"]
    conv = results["convert"]["closed_loop"]["throughput_rps"]
    ratio = conv / noop if noop else 0.0
    out["convert_max_throughput_vs_noop"] = {"ratio": round(ratio, 3), "target": THROUGHPUT_TARGET,
                                             "met": ratio >= THROUGHPUT_TARGET}
    create = results.get("create", {})
    at_100 = next((r for r in create.get("open_loop", []) if r["offered_rps"] == 100), None)
    if at_100 is None:
        out["create_p99_at_100_rps"] = {"skipped": create.get("skipped", "no 100 req/s run")}
    else:
        p99 = at_100["p99_ms"]
        out["create_p99_at_100_rps"] = {"p99_ms": p99, "target_ms": P99_TARGET_MS,
                                        "met": p99 is not None and p99 <= P99_TARGET_MS and at_100["errors"] == 0}
    return out


@click.command("admission")
@click.option("--out", "out_dir", default="bench/results", show_default=True, help="Directory for admission.json.")
@click.option("--quick", is_flag=True, help="CI size: one rate (100 req/s), 3 s per run.")
@click.option("--kubeconfig", default=None, help="Cluster for the create handler (default: the local cluster).")
@click.option("--cluster", "cluster_name", default=os.environ.get("DRALAB_TEST_CLUSTER", "dralab"),
              show_default=True, help="Local cluster name used when --kubeconfig is not given.")
@click.option("--duration", type=float, default=None, help="Seconds per run (default 10, quick 3).")
def admission(out_dir: str, quick: bool, kubeconfig: str | None, cluster_name: str, duration: float | None) -> None:
    """Admission latency (open loop at fixed rates) and maximum throughput (closed loop) over TLS.

    \b
    Example:
      dralab bench admission --quick --out /tmp/results
    """
    result = run(quick, kubeconfig, cluster_name, duration)
    path = write_result(out_dir, "admission", result)
    for name, entry in result["handlers"].items():
        if "skipped" in entry:
            console.print(f"{name}: skipped ({entry['skipped']})")
            continue
        rates = ", ".join(f"{r['offered_rps']}/s p50 {r['p50_ms']} ms p99 {r['p99_ms']} ms"
                          for r in entry["open_loop"])
        closed = entry["closed_loop"]
        console.print(f"{name}: {rates}; max {closed['throughput_rps']} req/s, "
                      f"server CPU {closed.get('server_cpu_ms_per_request')} ms/request")
    console.print(f"apiserver claim create, direct and sequential: {result['apiserver_create_sequential']}")
    console.print(f"load average before/after: {result['load_average']}")
    console.print(f"targets: {json.dumps(result['targets'])}")
    click.echo(str(path))
