"""Driver metrics and the small HTTP endpoint that serves ``/metrics``, ``/healthz`` and ``/readyz``.

The endpoint is reachable by anything on the node network (the chart's probes, Prometheus), so it
is built not to be a lever against the driver: one event-loop thread holds every connection (an
idle connection costs a socket, not a thread), the request head must arrive whole within
``REQUEST_TIMEOUT_S`` and within ``MAX_HEAD_BYTES``, every answer closes its connection, and at
most ``MAX_WAITING`` connections may wait for their request head (beyond that the oldest is closed,
so a flood of idle connections cannot lock the kubelet's probe out). The checks run on their own
two threads (never on the gRPC pool the kubelet's calls use), one at a time per endpoint, each
bounded by ``CHECK_TIMEOUT_S``.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

from dralab.kube.authz import MetricsAuthorizer

_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
# What the driver's CPU goes to (``dralab_driver_work_cpu_seconds``): per pod (prepare, unprepare, the
# claim status write) and per period (reconcile, publish, restoring CDI specs).
WORK = ("prepare", "unprepare", "status", "reconcile", "publish", "restore")


class HandshakeCount(Collector):
    """``dralab_driver_apiserver_handshakes_total``: the TLS handshakes with the apiserver of every node's
    client this process runs, read from their contexts at scrape time (no work on the call path);
    ``dralab_driver_apiserver_resumed_handshakes_total``: those of them that resumed a session.

    A new connection costs its node's driver about 1.1 ms more CPU than a call on a kept one with a full
    handshake, 0.7 ms resumed (README "Scale", items 23 and 24), and the apiserver a handshake too; the
    apiserver closes a connection idle for 90 s, so a node that gets a pod less often than that pays one per
    pod (its claim's read; the status write follows on that connection). A resumed one skips the
    certificates and signatures of a full handshake (:mod:`dralab.kube.tls`)."""

    def __init__(self) -> None:
        self._sources: list[tuple[Callable[[], int], Callable[[], int]]] = []
        self._lock = threading.Lock()

    def track(self, handshakes: Callable[[], int], resumed: Callable[[], int]) -> None:
        with self._lock:
            self._sources.append((handshakes, resumed))

    def collect(self) -> Iterator[CounterMetricFamily]:
        with self._lock:
            sources = list(self._sources)
        family = CounterMetricFamily("dralab_driver_apiserver_handshakes",
                                     "TLS handshakes with the apiserver (each a new connection)")
        family.add_metric([], sum(handshakes() for handshakes, _ in sources))
        yield family
        family = CounterMetricFamily("dralab_driver_apiserver_resumed_handshakes",
                                     "TLS handshakes with the apiserver that resumed an earlier session")
        family.add_metric([], sum(resumed() for _, resumed in sources))
        yield family


class DriverMetrics:
    """All driver metrics, in their own registry (several drivers can live in one test process)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.calls = Counter(
            "dralab_driver_calls_total",
            "NodePrepare/NodeUnprepare claims handled",
            ["driver", "call", "result"],
            registry=r,
        )
        self.duration = Histogram(
            "dralab_driver_call_duration_seconds",
            "Duration of one NodePrepareResources/NodeUnprepareResources gRPC call",
            ["driver", "call"],
            buckets=_BUCKETS,
            registry=r,
        )
        self.errors = Counter(
            "dralab_driver_errors_total", "Claim errors by reason", ["driver", "call", "reason"], registry=r
        )
        self.prepared = Gauge("dralab_driver_prepared_claims", "Claims currently prepared", ["driver"], registry=r)
        self.quarantined = Counter(
            "dralab_driver_checkpoint_quarantined_total",
            "Corrupt checkpoints moved aside and rebuilt",
            ["driver"],
            registry=r,
        )
        self.publishes = Counter(
            "dralab_driver_slice_publishes_total", "ResourceSlice publications", ["driver", "result"], registry=r
        )
        self.generation = Gauge("dralab_driver_pool_generation", "Published pool generation", ["driver"], registry=r)
        self.cache = Counter(
            "dralab_driver_claim_cache_total",
            "Claim reads on the Prepare path: answered by the informer cache (hit) or by a GET (miss)",
            ["driver", "result"],
            registry=r,
        )
        self.commits = Histogram(
            "dralab_driver_checkpoint_commit_changes",
            "Checkpoint changes made durable by one write (group commit: >1 when calls overlapped)",
            ["driver"],
            buckets=(1, 2, 4, 8, 16, 32, 64),
            registry=r,
        )

        self.enforcement_refusals = Counter(
            "dralab_driver_enforcement_refusals_total",
            "Claims refused because the enforcement library is unusable (missing, unreadable, not an ELF "
            "shared object, built for another machine)",
            ["driver", "reason"],
            registry=r,
        )
        self.enforcement_mode = Gauge(
            "dralab_driver_enforcement_mode",
            "1 for the enforcement mode in effect: required (claims are enforced or refused) or none "
            "(no enforcement library: the operator's enforcement: none, or a vendor profile that enforces nothing)",
            ["driver", "mode", "profile"],
            registry=r,
        )

        self.device_unhealthy = Gauge(
            "dralab_driver_device_unhealthy",
            "1 while the backend reports the device unhealthy (published with the dralab.io/unhealthy taint where "
            "the cluster takes device taints)",
            ["device"],
            registry=r,
        )
        self.claim_status = Counter(
            "dralab_driver_claim_status_writes_total",
            "Claim device status writes after Prepare (ok, gone: the claim went away, error)",
            ["driver", "result"],
            registry=r,
        )

        self.work_cpu = Histogram(
            "dralab_driver_work_cpu_seconds",
            "CPU time of the thread doing one unit of driver work (prepare, unprepare, status: one gRPC call "
            "or claim status write; reconcile, publish, restore: one pass); the rest of the process's CPU is "
            "gRPC's own threads, watches and the interpreter",
            ["driver", "work"],
            buckets=_BUCKETS,
            registry=r,
        )
        self.handshakes = HandshakeCount()
        r.register(self.handshakes)

    @contextlib.contextmanager
    def work(self, driver: str, kind: str) -> Iterator[None]:
        """Count the calling thread's CPU time over the block as one unit of ``kind`` work.

        Thread CPU time, not wall time: a call that waits (for the apiserver, a checkpoint commit, the
        interpreter lock) costs what it computed, not its wait behind other drivers sharing the process
        or machine (a busy machine still makes the same work cost somewhat more CPU)."""
        if kind not in WORK:
            raise ValueError(f"driver work {kind!r}: use one of {', '.join(WORK)}")
        start = time.thread_time()
        try:
            yield
        finally:
            self.work_cpu.labels(driver, kind).observe(time.thread_time() - start)

    def render(self) -> bytes:
        return generate_latest(self.registry)


REQUEST_TIMEOUT_S = 5.0  # the whole request head, from accept on
CHECK_TIMEOUT_S = 5.0  # a /healthz or /readyz check; the probe then gets a 503
MAX_HEAD_BYTES = 8192
MAX_WAITING = 64

_REASONS = {200: "OK", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
            408: "Request Timeout", 431: "Request Header Fields Too Large", 503: "Service Unavailable"}


def _authorization(head: bytes) -> str | None:
    """The ``Authorization`` header of a request head, or None (what ``/metrics`` hands the authorizer)."""
    for line in head.split(b"\r\n")[1:]:
        name, sep, value = line.partition(b":")
        if sep and name.strip().lower() == b"authorization":
            return value.strip().decode("latin-1")
    return None


class StatusServer:
    """``/metrics`` (Prometheus text), ``/healthz`` (gRPC sockets answer) and ``/readyz`` (registered and published)."""

    def __init__(
        self,
        metrics: DriverMetrics,
        healthy: Callable[[], tuple[bool, str]],
        ready: Callable[[], tuple[bool, str]],
        port: int,
        host: str = "127.0.0.1",
        metrics_auth: MetricsAuthorizer | None = None,
    ) -> None:
        """``metrics_auth``: ``/metrics`` answers only callers it allows (dralab.kube.authz: 401, 403, 503
        otherwise); None serves it to anyone (driver.metricsAuthorization: false). The probes stay open."""
        self.metrics = metrics
        self.metrics_auth = metrics_auth
        self.checks: dict[str, Callable[[], tuple[bool, str]]] = {"/healthz": healthy, "/readyz": ready}
        self._sock = socket.create_server((host, port), reuse_port=False)
        self.port = int(self._sock.getsockname()[1])
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="driver-status-check")
        self._running: dict[str, Future[tuple[bool, str]]] = {}
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.AbstractServer | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._waiting: dict[asyncio.StreamWriter, None] = {}  # insertion order: oldest first
        self._thread = threading.Thread(target=self._loop.run_forever, name="driver-status", daemon=True)

    def start(self) -> None:
        self._thread.start()
        started = asyncio.run_coroutine_threadsafe(self._listen(), self._loop)
        started.result(timeout=10)

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._serve, sock=self._sock, limit=MAX_HEAD_BYTES)

    def stop(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
            for writer in list(self._writers):
                writer.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(timeout=5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._pool.shutdown(wait=False, cancel_futures=True)
        with contextlib.suppress(RuntimeError):
            self._loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        while len(self._waiting) >= MAX_WAITING:
            oldest = next(iter(self._waiting))
            del self._waiting[oldest]
            oldest.close()
        self._waiting[writer] = None
        try:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), REQUEST_TIMEOUT_S)
            except TimeoutError:
                await self._send(writer, 408, b"request head not received in time\n")
                return
            except asyncio.LimitOverrunError:
                await self._send(writer, 431, b"request head too large\n")
                return
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            finally:
                self._waiting.pop(writer, None)
            method, _, rest = head.partition(b" ")
            path = rest.split(b" ", 1)[0].decode("latin-1")
            if method not in (b"GET", b"HEAD"):
                await self._send(writer, 405, b"only GET\n")
            elif path == "/metrics":
                auth = self.metrics_auth
                decision = None if auth is None else await auth.acheck(_authorization(head))
                if decision is not None and not decision.allowed:
                    await self._send(writer, decision.status, (decision.reason + "\n").encode(),
                                     head_only=method == b"HEAD")
                else:
                    body = await self._loop.run_in_executor(self._pool, self.metrics.render)
                    await self._send(writer, 200, body, CONTENT_TYPE_LATEST, head_only=method == b"HEAD")
            elif path in self.checks:
                ok, detail = await self._check(path)
                await self._send(writer, 200 if ok else 503, (detail + "\n").encode(), head_only=method == b"HEAD")
            else:
                await self._send(writer, 404, b"not found\n")
        finally:
            self._writers.discard(writer)
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), REQUEST_TIMEOUT_S)

    async def _check(self, path: str) -> tuple[bool, str]:
        """Run one check on the status pool; concurrent probes of one endpoint share the running check."""
        running = self._running.get(path)
        if running is None or running.done():
            running = self._pool.submit(self.checks[path])
            self._running[path] = running
        try:
            return await asyncio.wait_for(asyncio.wrap_future(running), CHECK_TIMEOUT_S)
        except TimeoutError:
            return False, f"{path} check did not finish within {CHECK_TIMEOUT_S:g}s"
        except Exception as exc:  # a failing check is an unhealthy answer, not a broken endpoint
            return False, f"{path} check failed: {type(exc).__name__}: {exc}"

    async def _send(
        self, writer: asyncio.StreamWriter, code: int, body: bytes, ctype: str = "text/plain", head_only: bool = False
    ) -> None:
        head = (
            f"HTTP/1.1 {code} {_REASONS.get(code, '')}\r\nContent-Type: {ctype}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        ).encode("latin-1")
        writer.write(head if head_only else head + body)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(writer.drain(), REQUEST_TIMEOUT_S)
