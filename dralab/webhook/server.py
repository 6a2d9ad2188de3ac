"""The admission server: ASGI (admissions direct, the rest through Starlette) under uvicorn over TLS, and the janitor.

Endpoints: ``/mutate``, ``/validate`` (AdmissionReview v1), ``/healthz``, ``/readyz``, ``/metrics``.
With ``bench_routes`` two more exist for the admission benchmark on the same server:
``/bench/noop`` (parse and allow) and ``/bench/convert`` (convert without creating objects).
"""

from __future__ import annotations

import contextlib
import gc
import importlib.util
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from dralab.config import Config
from dralab.jsonio import dumps
from dralab.kube import AsyncKube, Kube
from dralab.kube.authz import MetricsAuthorizer
from dralab.util import get_logger
from dralab.versions import server_version
from dralab.webhook.controllers.adoption import Adopter, build_adopter
from dralab.webhook.controllers.budgets import BudgetGate, BudgetMetrics, BudgetReconciler
from dralab.webhook.controllers.janitor import Janitor
from dralab.webhook.converters import build_converters
from dralab.webhook.extended import DeviceClassWatch
from dralab.webhook.handlers import AdmissionHandler, BadReview, parse_review, respond
from dralab.webhook.lifecycle import ClaimLifecycle, template_lifecycle_warning
from dralab.webhook.limits import Inflight, NamespaceRate, ServerLimits
from dralab.webhook.metrics import Metrics
from dralab.webhook.tls import ReloadingTLS
from dralab.webhook.transport import MAX_HEAD_BYTES, TLSServer, guarded_protocol
from dralab.webhook.volcano import VolcanoMutator

log = get_logger("dralab.webhook.server")
AsgiApp = Callable[[dict[str, Any], Callable[..., Any], Callable[..., Any]], Awaitable[None]]  # scope, receive, send
# Bodies above this are converted in a worker thread, so a large pod never holds up the event loop.
OFFLOAD_BYTES = 64 * 1024
WARM_SECONDS = 5.0  # at most this long for the admission client's first connection before serving (warm)
# uvloop (libuv, with its own TLS layer) where installed: 13 % less CPU per admitted pod than asyncio's loop
UVLOOP = importlib.util.find_spec("uvloop") is not None
WARM_CONNECTIONS = 4  # apiserver connections each worker opens before serving (more open only under load)


@dataclass
class Webhook:
    """Everything one server process holds."""

    config: Config
    handler: AdmissionHandler
    metrics: Metrics
    api: Kube | None
    janitor: Janitor | None
    admission_api: AsyncKube | None = None
    budgets: BudgetReconciler | None = None
    adopter: Adopter | None = None  # migration: HAMi-DRA's claims get owners, orphans are reaped
    budget_metrics: BudgetMetrics | None = None

    elected: bool = False  # background work comes and goes with a Lease (never gates readiness)
    draining: bool = False  # stopping: not ready, each answer closes its connection (shutdown_delay_seconds)

    def ready(self) -> bool:
        """Ready unless this process runs the janitor from the start (no election) and its caches still sync
        (a draining process is not ready either: ``/readyz`` says so first).

        An elected janitor does not count: the leader may be any worker of any replica, and a probe
        reaches whichever worker accepts it, so readiness must not depend on which one leads.
        """
        jan = self.janitor
        return jan is None or self.elected or jan.ready()

    def drain(self) -> None:
        """Start stopping; the listener stays open until the drain ends (transport.TLSServer)."""
        self.draining = True
        log.info("webhook draining before it stops")

    def publish(self, parts: Any) -> None:
        """Record which background parts run here now (the elected leader's, or none)."""
        self.elected = True
        self.janitor = next((p for p in parts if isinstance(p, Janitor)), None)
        self.budgets = next((p for p in parts if isinstance(p, BudgetReconciler)), None)
        self.adopter = next((p for p in parts if isinstance(p, Adopter)), None)
        self.metrics.leader.set(1 if parts else 0)


def build(
    config: Config,
    api: Kube | None,
    own_namespace: str = "",
    janitor: bool = True,
    admission_api: AsyncKube | None = None,
    workers: int = 1,
    watch_classes: bool | None = None,
) -> Webhook:
    """Wire converter, lifecycle, handler and (claim mode with an API) the janitor.

    ``admission_api`` (asyncio) serves the admission path when given; else ``api`` does, in threads.
    The janitor always uses ``api`` from its own threads. ``janitor=False`` leaves the background work
    to :func:`background` (run by the elected leader); ``workers``: this process enforces its share of the
    namespace claim rate (:func:`dralab.webhook.workers.worker_rate`); ``watch_classes`` (default: as
    ``janitor``) keeps the DeviceClass cache the admission warnings read.
    """
    from dralab.webhook.workers import worker_rate

    metrics = Metrics()
    wh = config.webhook
    converters = build_converters(config)  # the same converters as `dralab convert`
    budget_metrics = BudgetMetrics(metrics.registry)
    budget_api = admission_api or api
    gate = BudgetGate(budget_api, budget_metrics) if budget_api is not None else None
    lifecycle = ClaimLifecycle(
        converters.pod, budget_api, metrics, budgets=gate,
        rate=NamespaceRate(*worker_rate(wh.claim_create_rate_per_second, wh.claim_create_burst, workers,
                                         wh.max_claims_per_pod)),
    )
    excluded = set(converters.excluded)
    if own_namespace:
        excluded.add(own_namespace)
    handler = AdmissionHandler(lifecycle, metrics, excluded, deadline_seconds=float(wh.admission_deadline_seconds))
    handler.volcano = VolcanoMutator(converters.volcano, budget_api, metrics, excluded, budgets=gate)
    watch = janitor if watch_classes is None else watch_classes
    handler.extended = DeviceClassWatch(api) if api is not None and watch else None
    webhook = Webhook(config, handler, metrics, api, None, admission_api, budget_metrics=budget_metrics)
    if janitor:
        webhook.janitor, webhook.budgets, webhook.adopter = background(webhook)
    return webhook


def background(webhook: Webhook) -> tuple[Janitor | None, BudgetReconciler | None, Adopter | None]:
    """The background work that must run once (the janitor, budget statuses, adoption): fresh objects each call."""
    api, config, metrics = webhook.api, webhook.config, webhook.metrics
    if api is None:
        return None, None, None
    jan = None
    if config.webhook.lifecycle == "claim":
        jan = Janitor(api, metrics, grace_seconds=float(config.webhook.claim_grace_period_seconds))
    budgets = BudgetReconciler(api, webhook.budget_metrics or BudgetMetrics(metrics.registry))
    return jan, budgets, build_adopter(config, api, metrics)


class BodyTooLarge(Exception):
    """The request body passed the limit (HTTP 413; the rest is never read)."""


class ClientGone(Exception):
    """The client disconnected before its request body arrived (nothing to answer)."""


def declared_length(scope: dict[str, Any]) -> str | None:
    """The request's Content-Length header as sent (the first one), or None."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            return value.decode("latin-1")
    return None


def held_bytes(declared: str | None, limit: int) -> int:
    """What a request's body may take while in flight: its declared length, else the whole limit."""
    try:
        size = int(declared or "")
    except ValueError:
        return limit
    return size if 0 <= size <= limit else limit


async def read_body(receive: Callable[[], Any], declared: str | None, limit: int) -> bytes:
    """The body, refused by its declared length before reading and by its size while reading (chunked)."""
    if declared is not None:
        try:
            size = int(declared)
        except ValueError:
            raise BadReview("Content-Length is not a number") from None
        if size > limit:
            raise BodyTooLarge(f"request body of {size} bytes is over the limit of {limit}")
    chunks: list[bytes] = []
    total = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk = message.get("body", b"")
        total += len(chunk)
        if total > limit:
            raise BodyTooLarge(f"request body is over the limit of {limit} bytes")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


JSON_TYPE = b"application/json"
TEXT_TYPE = b"text/plain; charset=utf-8"
CLOSE = ((b"connection", b"close"),)


async def answer(send: Callable[[dict[str, Any]], Any], status: int, body: bytes, content_type: bytes,
                 extra: tuple[tuple[bytes, bytes], ...] = ()) -> None:
    """One complete HTTP answer over ASGI."""
    headers = [(b"content-type", content_type), (b"content-length", b"%d" % len(body)), *extra]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class AdmissionApp:
    """The ASGI app: POSTs to the admission paths go straight to their handlers, everything else to Starlette.

    An admission is most of what the server does; Starlette's middleware, routing and request and response
    objects cost more per admission than the answer itself. Other methods on those paths reach Starlette,
    which keeps answering them 405.
    """

    def __init__(self, admissions: dict[str, Callable[..., Any]], fallback: Starlette) -> None:
        self.admissions = admissions
        self.fallback = fallback

    async def __call__(
        self, scope: MutableMapping[str, Any], receive: Callable[..., Any], send: Callable[..., Any]
    ) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            route = self.admissions.get(scope["path"])
            if route is not None:
                await route(scope, receive, send)
                return
        await self.fallback(scope, receive, send)


class _Endpoint:
    """An ASGI callable Starlette routes to as an app (only methods other than POST get here: 405)."""

    def __init__(self, app: Callable[..., Any]) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        await self.app(scope, receive, send)


def create_app(
    webhook: Webhook,
    ready: Callable[[], bool] | None = None,
    bench_routes: bool = False,
    limits: ServerLimits | None = None,
    metrics_auth: MetricsAuthorizer | None = None,
) -> AdmissionApp:
    """The ASGI app; ``ready`` adds a readiness condition (the janitor's caches).

    ``metrics_auth``: ``/metrics`` answers only callers it allows (:mod:`dralab.kube.authz`; 401, 403
    or 503 otherwise); None serves it to anyone (``webhook.metricsAuthorization: false``). The probes stay open.
    """
    metrics = webhook.metrics
    handler = webhook.handler
    limits = limits or ServerLimits()
    inflight = Inflight(limits.max_inflight, limits.max_inflight_bytes, metrics.inflight.set)

    def admission(endpoint: str, call: Callable[..., Any]) -> AsgiApp:
        # bound once: looking a labelled child up per request costs more than counting
        requests, latency = metrics.requests.labels(endpoint), metrics.latency.labels(endpoint)

        async def route(scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
            start = time.perf_counter()
            requests.inc()
            declared = declared_length(scope)
            hold = held_bytes(declared, limits.max_body_bytes)
            if not inflight.try_enter(hold):
                metrics.refused.labels("too_many_inflight").inc()
                message = (f"too many concurrent admission requests ({inflight.count} in flight, at most "
                           f"{limits.max_inflight}, bodies within {limits.max_inflight_bytes} bytes); retry")
                await answer(send, 503, message.encode(), TEXT_TYPE, (*CLOSE, (b"retry-after", b"1")))
                return
            try:
                body = await read_body(receive, declared, limits.max_body_bytes)
                review = parse_review(body)
                result = await call(review, offload=len(body) > OFFLOAD_BYTES)
                reply: tuple[int, bytes, bytes, tuple[tuple[bytes, bytes], ...]] = (200, dumps(result), JSON_TYPE, ())
            except ClientGone:
                return
            except BodyTooLarge as exc:
                metrics.refused.labels("body_too_large").inc()
                reply = (413, str(exc).encode(), TEXT_TYPE, CLOSE)
            except BadReview as exc:
                metrics.errors.labels(endpoint).inc()
                reply = (400, str(exc).encode(), TEXT_TYPE, ())
            finally:
                inflight.leave(hold)
                latency.observe(time.perf_counter() - start)
            if webhook.draining and CLOSE[0] not in reply[3]:  # the client reconnects, to a replica that stays
                reply = (*reply[:3], (*reply[3], *CLOSE))
            await answer(send, *reply)

        return route

    async def noop(review: dict[str, Any], offload: bool = False) -> dict[str, Any]:
        return respond(str(review["request"].get("uid", "")))

    async def convert_only(review: dict[str, Any], offload: bool = False) -> dict[str, Any]:
        return await handler.mutate(review, create=False, offload=offload)

    async def healthz(request: Request) -> Response:
        return PlainTextResponse("ok")

    async def readyz(request: Request) -> Response:
        if webhook.draining:
            return PlainTextResponse("not ready: shutting down", 503, headers={"connection": "close"})
        if ready is not None and not ready():
            return PlainTextResponse("not ready: caches syncing", 503)
        return PlainTextResponse("ok")

    async def metrics_route(request: Request) -> Response:
        if metrics_auth is not None:
            decision = await metrics_auth.acheck(request.headers.get("authorization"))
            if not decision.allowed:
                return PlainTextResponse(decision.reason + "\n", decision.status, headers=decision.headers())
        return Response(metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    admissions = {"/mutate": admission("mutate", handler.mutate), "/validate": admission("validate", handler.validate)}
    if bench_routes:
        admissions["/bench/noop"] = admission("noop", noop)
        admissions["/bench/convert"] = admission("convert", convert_only)
    routes = [Route(path, _Endpoint(app), methods=["POST"]) for path, app in admissions.items()]
    routes += [Route("/healthz", healthz), Route("/readyz", readyz), Route("/metrics", metrics_route)]
    return AdmissionApp(admissions, Starlette(routes=routes))


async def warm(api: Any, timeout: float = WARM_SECONDS) -> dict[str, Any] | None:
    """Load the admission API client and open its first apiserver connection before serving.

    The client is loaded on first use (its modules, TLS context and connection take a few hundred ms,
    with the event loop held); done by the first admission, that stalls every admission queued behind it.
    ``GET /version`` is readable by every identity; its answer is returned (None when it failed). Failure
    only costs the first admission that time again.
    A client that can (:meth:`dralab.kube.AsyncKube.warm`) opens :data:`WARM_CONNECTIONS` at once: their
    TLS handshakes would otherwise come with the first burst of admissions.
    """
    try:
        with anyio.fail_after(timeout):
            if hasattr(api, "warm"):
                await api.warm(WARM_CONNECTIONS)
            info = await api.get("/version")
        return dict(info) if isinstance(info, dict) else {}
    except Exception as exc:  # unreachable, slow or refused: serving goes ahead
        log.info("apiserver not reached before serving", extra={"fields": {"error": f"{type(exc).__name__}: {exc}"}})
        return None


def warn_of_the_cluster(lifecycle: str, info: dict[str, Any] | None) -> str | None:
    """Log, once at start, what the apiserver's version (``GET /version``'s answer) means for ``lifecycle``."""
    warning = template_lifecycle_warning(lifecycle, server_version(info or {}))
    if warning:
        log.warning(warning)
    return warning


def settle_heap() -> None:
    """Collect once, then leave everything alive now (modules, clients, the app) out of later collections.

    A full collection walks every tracked object; with the API client, uvicorn and Starlette loaded
    that took 30 ms with the event loop held, and one came every few seconds under admission load
    (each request allocates): at 50 admissions per second one such pause is the 99th percentile.
    Frozen objects are never freed, so this runs once, after start-up, with start-up's garbage collected.
    """
    gc.collect()
    gc.freeze()


class Server:
    """uvicorn over a reloading TLS context; ``run()`` blocks, ``start_in_thread()`` is for tests."""

    def __init__(
        self,
        webhook: Webhook,
        cert: str | Path,
        key: str | Path,
        host: str = "127.0.0.1",
        port: int = 8443,
        bench_routes: bool = False,
        reload_interval: float = 1.0,
        limits: ServerLimits | None = None,
        client_ca: str | Path | None = None,
        sock: Any = None,
        elector: Any = None,
        http: str = "httptools",
        metrics_auth: MetricsAuthorizer | None = None,
    ) -> None:
        """``sock``: an already listening socket (a worker's, shared with the others) instead of host/port;
        ``elector``: a :class:`~dralab.webhook.controllers.lease.LeaderElector` (its leadership runs background work);
        ``http``: the HTTP/1.1 parser, ``httptools`` or ``h11`` (:func:`~dralab.webhook.transport.guarded_protocol`);
        ``metrics_auth``: who may read ``/metrics`` (:func:`create_app`).
        """
        self.webhook = webhook
        self.sock = sock
        self.elector = elector
        self.limits = limits or ServerLimits()
        self.tls = ReloadingTLS(cert, key, webhook.metrics, client_ca=client_ca)
        self.reload_interval = reload_interval
        app = create_app(webhook, ready=webhook.ready, bench_routes=bench_routes, limits=self.limits,
                         metrics_auth=metrics_auth)
        # uvicorn's HTTP/1.1 under the request deadline, on a listener with the current certificate and a
        # handshake deadline (dralab.webhook.transport)
        self.config = uvicorn.Config(
            app,
            host=host,
            port=port,
            http=guarded_protocol(self.limits.read_timeout_seconds, http,
                                  on_connection=webhook.metrics.connections.inc,
                                  idle_timeout=self.limits.idle_timeout_seconds),
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_keep_alive=max(1, int(self.limits.idle_timeout_seconds)),
            limit_concurrency=self.limits.max_connections,
            h11_max_incomplete_event_size=MAX_HEAD_BYTES,  # request line and headers (h11; httptools: the guard)
            backlog=2048,
        )
        self.config.load()
        self.server = TLSServer(self.config, self.tls.listener, self.limits.handshake_timeout_seconds, sock,
                                drain_seconds=self.limits.shutdown_delay_seconds, on_drain=webhook.drain)
        self._thread: Any = None

    async def serve(self) -> None:
        if self.elector is None:
            if self.webhook.janitor is not None:
                self.webhook.janitor.start()
            if self.webhook.budgets is not None:
                self.webhook.budgets.start()
            if self.webhook.adopter is not None:
                self.webhook.adopter.start()
        if self.webhook.handler.extended is not None:
            self.webhook.handler.extended.start()
        if self.elector is not None:
            self.elector.start()
        try:
            if self.webhook.admission_api is not None:
                warn_of_the_cluster(self.webhook.config.webhook.lifecycle, await warm(self.webhook.admission_api))
            settle_heap()
            async with anyio.create_task_group() as tg:
                tg.start_soon(self.tls.watch, self.reload_interval)
                await self.server.serve()
                tg.cancel_scope.cancel()
        finally:
            if self.elector is not None:
                # stops the leader's background work, then hands the lease on at once
                await anyio.to_thread.run_sync(self.elector.stop)
            if self.webhook.janitor is not None:
                self.webhook.janitor.stop()
            if self.webhook.budgets is not None:
                self.webhook.budgets.stop()
            if self.webhook.adopter is not None:
                self.webhook.adopter.stop()
            if self.webhook.handler.extended is not None:
                self.webhook.handler.extended.stop()
            if self.webhook.admission_api is not None:
                await self.webhook.admission_api.close()

    def run(self) -> None:
        log.info("webhook serving", extra={"fields": {"host": self.config.host, "port": self.config.port}})
        anyio.run(self.serve, backend_options={"use_uvloop": UVLOOP})

    def start_in_thread(self) -> None:
        import threading

        self._thread = threading.Thread(target=self.run, name="webhook-server", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.server.should_exit = True
        if self._thread is not None:
            with contextlib.suppress(Exception):
                self._thread.join(timeout=10)

    @property
    def started(self) -> bool:
        return bool(self.server.started)
