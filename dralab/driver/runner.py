"""One driver process: a backend, and per driver name its state, sockets and slice publisher.

A node with devices of several vendors gets one registration (and one pool) per vendor's driver
name, all in this process. ``DriverProcess`` is what ``dralab driver run`` starts; tests build it
with an in-memory claim source and no apiserver.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from filelock import FileLock, Timeout

from dralab.config import Config, load_config
from dralab.driver import health
from dralab.driver.claims import ClaimSource, KubeClaimSource
from dralab.driver.devices import Backend, BackendOptions, Health, load_backend
from dralab.driver.health import HealthMonitor, HealthTracker
from dralab.driver.informer import ClaimInformer
from dralab.driver.library import check_mode
from dralab.driver.metrics import DriverMetrics, StatusServer
from dralab.driver.publisher import SlicePublisher
from dralab.driver.server import PluginServer, SocketPaths
from dralab.driver.state import DriverState
from dralab.driver.status import StatusWriter
from dralab.errors import UserError
from dralab.kube import Kube
from dralab.model.vendors import Vendor
from dralab.util import get_logger, spread_start

log = get_logger("dralab.driver.run")
Loop = Callable[[threading.Event], None]  # a background loop: runs until its stop event is set


@dataclass
class RunOptions:
    """Everything ``dralab driver run`` takes; unset paths come from the config's driver section."""

    node: str
    backend: str | None = None
    devices_file: str | None = None
    kubeconfig: str | None = None
    plugin_dir: str | None = None
    registry_dir: str | None = None
    cdi_dir: str | None = None
    state_dir: str | None = None
    config: str | None = None
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    enforcement_library: str | None = None
    enforcement: str | None = None  # required | none (None: the config's driver.enforcement)
    publish: bool = True
    resync_seconds: float = 300.0  # nodes / resync LISTs a second for a fleet; the slice watch acts at once
    reconcile_seconds: float = 60.0
    # how often the CDI specs of prepared claims are checked (a stat each) and rewritten if wiped
    spec_check_seconds: float = 5.0
    npu_smi: str = "npu-smi"
    claim_gid: int | None = None  # group of claim directories and shared files (non-root containers join it)
    claim_cache: bool = True  # watch the node's claims so Prepare needs no GET (apiserver claim source only)
    claim_dir_size: str | None = None  # a quantity (64Mi): each claim folder becomes a tmpfs of that size
    # device health as DRA device taints: auto (by the server's version), on (the cluster enables the gate), off
    device_taints: str = health.AUTO
    unhealthy_noexecute_after: float | None = None  # seconds unhealthy before NoExecute (None: NoSchedule only)
    health_seconds: float = 5.0  # how often the backend's health is read
    claim_status: bool = True  # write the claim's status.devices after Prepare (apiserver claim source only)
    metrics_authorization: bool | None = None  # /metrics behind TokenReview + SubjectAccessReview; None: config


def _claim_dir_bytes(size: str | None) -> int | None:
    """``--claim-dir-size`` in bytes (None: claim folders are not size-limited)."""
    if not size:
        return None
    from dralab.model.quantity import to_int

    value = to_int(size, "--claim-dir-size")
    if value < 4096:
        raise UserError(f"--claim-dir-size {size} is under one page (4096 bytes): give a size such as 64Mi")
    return value


def _state_folder(path: Path) -> None:
    """Create the state folder 0700; an existing one is left as it is (it may be a folder the user owns)."""
    if not path.exists():
        path.mkdir(mode=0o700, parents=True)
        path.chmod(0o700)
    elif path.stat().st_mode & 0o077:
        log.warning(
            "state folder is open to other users: each driver's own folder inside it is 0700",
            extra={"fields": {"path": str(path), "mode": oct(path.stat().st_mode & 0o777)}},
        )


@dataclass
class _Served:
    vendor: Vendor
    state: DriverState
    server: PluginServer
    publisher: SlicePublisher | None = None


def _client(kubeconfig: str | None) -> Kube:
    """The driver's API client: 10 s per call (Prepare waits on it), its own user agent."""
    return Kube.from_kubeconfig(kubeconfig, timeout=10.0, user_agent="dralab-driver")


@dataclass
class DriverProcess:
    """Owns everything the driver runs; ``start`` then ``stop``."""

    options: RunOptions
    claims: ClaimSource | None = None
    kube: Kube | None = None
    metrics: DriverMetrics = field(default_factory=DriverMetrics)
    served: list[_Served] = field(default_factory=list)
    backend: Backend | None = None
    status: StatusServer | None = None
    informer: ClaimInformer | None = None
    tracker: HealthTracker | None = None
    status_writer: StatusWriter | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: FileLock | None = None

    def _paths(self, cfg: Config) -> tuple[Path, Path, Path, Path]:
        o, d = self.options, cfg.driver
        return (
            Path(o.plugin_dir or d.plugin_dir),
            Path(o.registry_dir or d.registry_dir),
            Path(o.cdi_dir or d.cdi_dir),
            Path(o.state_dir or d.state_dir),
        )

    def start(self) -> DriverProcess:
        cfg = load_config(self.options.config)
        mode = check_mode(self.options.enforcement or cfg.driver.enforcement, "--enforcement")
        plugin_dir, registry_dir, cdi_dir, state_dir = self._paths(cfg)
        _state_folder(state_dir)
        self._lock = FileLock(str(state_dir / "driver.lock"))
        try:
            self._lock.acquire(timeout=0)
        except Timeout:
            raise UserError(
                f"another dralab driver holds {state_dir}/driver.lock: stop it or use another --state-dir"
            ) from None
        backend_name = self.options.backend or cfg.driver.backend
        if self.backend is None:  # a fleet process builds its nodes' backends from one parsed inventory
            self.backend = load_backend(
                backend_name,
                BackendOptions(
                    node=self.options.node,
                    state_dir=state_dir,
                    devices_file=self.options.devices_file,
                    inject_device_nodes=cfg.driver.inject_device_nodes,
                    npu_smi=self.options.npu_smi,
                    table=cfg.vendors,
                ),
            )
        devices = self.backend.enumerate()
        vendor_keys = list(dict.fromkeys(d.vendor for d in devices))
        vendors = [cfg.vendors.get(k) for k in vendor_keys if k in cfg.vendors.enabled]
        if not vendors:
            raise UserError(
                f"node {self.options.node} has no devices of an enabled vendor (backend {backend_name}): "
                "check --devices / --node or vendors.enabled in the config"
            )
        if self.options.publish and self.kube is None:
            self.kube = _client(self.options.kubeconfig)
        if self.claims is None:
            if self.kube is None:
                self.kube = _client(self.options.kubeconfig)
            self.claims = KubeClaimSource(self.kube)
        library = self.options.enforcement_library or cfg.driver.enforcement_library or None
        claim_dir_bytes = _claim_dir_bytes(self.options.claim_dir_size)
        if self.options.device_taints not in health.TAINT_MODES:
            raise UserError(f"--device-taints {self.options.device_taints}: use one of {', '.join(health.TAINT_MODES)}")
        self.tracker = HealthTracker(self.options.unhealthy_noexecute_after)
        self._track_handshakes()
        if self.options.claim_status and isinstance(self.claims, KubeClaimSource):
            metrics = self.metrics
            # The claim's GET and its status write, a moment apart, share a connection: a node that gets a
            # pod less often than the apiserver keeps an idle connection (90 s) then pays one handshake per
            # pod, not one per call (README "Scale", item 23).
            self.status_writer = StatusWriter(
                self.claims.client, on_result=lambda d, r: metrics.claim_status.labels(d, r).inc(),
                work=lambda d: metrics.work(d, "status"),
            )
            self._spawn("claim-status", self.status_writer.run)
        if self.options.claim_cache and isinstance(self.claims, KubeClaimSource):
            # every node's cache watches every claim (the apiserver cannot select claims by node)
            self.informer = ClaimInformer(self.claims.client.clone(), self.options.node, [v.driver for v in vendors])
            self._spawn("claim-informer", self.informer.run)
        monitor = None
        if hasattr(self.backend, "health"):
            monitor = HealthMonitor(
                self.backend.health, self.tracker, self._republish, self.options.health_seconds, self._health_metric
            )
            try:
                monitor.poll()  # the first slices already carry the taints of devices unhealthy at start
            except Exception as exc:
                log.warning("device health query failed", extra={"fields": {"error": str(exc)}})
        for vendor in vendors:
            state = DriverState(
                vendor=vendor,
                node=self.options.node,
                backend=self.backend,
                claims=self.claims,
                cdi_dir=cdi_dir,
                state_dir=state_dir,
                library=Path(library) if library else None,
                metrics=self.metrics,
                claim_gid=self.options.claim_gid,
                cache=self.informer,
                claim_dir_bytes=claim_dir_bytes,
                enforcement_mode=mode,
                status_sink=self.status_writer.submit if self.status_writer else None,
            ).open()
            server = PluginServer(state, SocketPaths.for_driver(vendor.driver, plugin_dir, registry_dir))
            served = _Served(vendor=vendor, state=state, server=server)
            self.served.append(served)
            server.start()
            if self.options.publish and self.kube is not None:
                served.publisher = SlicePublisher(
                    # its own connections: stop() closes self.kube while the publisher's watch may still read
                    self.kube.clone(),
                    vendor,
                    self.options.node,
                    self.backend.enumerate,
                    self.metrics,
                    self.options.resync_seconds,
                    enforcement=state.effective_mode,
                    taints=self.tracker.taints,
                    taint_mode=self.options.device_taints,
                )
                self._spawn(f"publish-{vendor.key}", served.publisher.run)
                self._spawn(f"watch-{vendor.key}", served.publisher.watch)
            if isinstance(self.claims, KubeClaimSource):
                self._spawn(f"reconcile-{vendor.key}", self._reconcile_loop(state))
            self._spawn(f"restore-specs-{vendor.key}", self._restore_loop(state))
        if monitor is not None:
            self._spawn("device-health", monitor.run)
        if self.options.metrics_port is not None:
            from dralab.kube.authz import metrics_authorizer

            enabled = self.options.metrics_authorization
            enabled = cfg.driver.metrics_authorization if enabled is None else enabled
            # without an API client the reviews cannot be made: /metrics answers 503 (fails closed)
            self.status = StatusServer(
                self.metrics, self.healthy, self.ready, self.options.metrics_port, self.options.metrics_host,
                metrics_auth=metrics_authorizer(enabled, self.kube, "driver"),
            )
            self.status.start()
            log.info("status endpoint", extra={"fields": {"port": self.status.port}})
        return self

    def _republish(self) -> None:
        for s in self.served:
            if s.publisher is not None:
                s.publisher.trigger()

    def _health_metric(self, device: str, report: Health) -> None:
        self.metrics.device_unhealthy.labels(device).set(0 if report.healthy else 1)

    def _spawn(self, name: str, target: Loop) -> None:
        thread = threading.Thread(target=target, args=(self._stop,), name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _reconcile_loop(self, state: DriverState) -> Loop:
        def loop(stop: threading.Event) -> None:
            period = self.options.reconcile_seconds
            wait = spread_start(period)  # a fleet's drivers, started together, must not reconcile together
            while not stop.wait(wait):
                wait = period
                try:
                    with self.metrics.work(state.driver, "reconcile"):
                        state.reconcile()
                except Exception as exc:  # a reconcile failure must never stop the driver
                    log.warning("reconcile failed", extra={"fields": {"error": str(exc)}})

        return loop

    def _restore_loop(self, state: DriverState) -> Loop:
        def loop(stop: threading.Event) -> None:
            while not stop.wait(self.options.spec_check_seconds):
                try:
                    with self.metrics.work(state.driver, "restore"):
                        state.restore_specs()
                except Exception as exc:  # a failed restore is retried next round; never stop the driver
                    log.warning("restoring CDI specs failed", extra={"fields": {"error": str(exc)}})

        return loop

    def healthy(self) -> tuple[bool, str]:
        """Every driver name's sockets answer."""
        details = []
        for s in self.served:
            ok, detail = s.server.health()
            if not ok:
                return False, f"{s.vendor.driver}: {detail}"
            details.append(f"{s.vendor.driver}: ok")
        return bool(self.served), "; ".join(details) or "no driver served"

    def ready(self) -> tuple[bool, str]:
        """Healthy, enforcement usable (claims would be refused otherwise), and every pool published and registered."""
        ok, detail = self.healthy()
        if not ok:
            return ok, detail
        checks = [s.state.enforcement_ready() for s in self.served]
        refusing = [why for usable, why in checks if not usable]
        if refusing:
            return False, "claims are refused: " + "; ".join(refusing)
        waiting = [s.vendor.driver for s in self.served if s.publisher and not s.publisher.published.is_set()]
        if waiting:
            return False, f"slices not yet published for {', '.join(waiting)}"
        unregistered = [s.vendor.driver for s in self.served if not s.server.registration.registered.is_set()]
        if unregistered:
            errors = [s.server.registration.error for s in self.served if s.server.registration.error]
            why = f" ({'; '.join(errors)})" if errors else ""
            return False, f"not registered with the kubelet yet: {', '.join(unregistered)}{why}"
        return True, detail

    def wait(self) -> None:
        """Block until stop() (signal handlers call it)."""
        self._stop.wait()

    def _track_handshakes(self) -> None:
        """Count the TLS handshakes of this node's API clients (each set of credentials once) in
        ``dralab_driver_apiserver_handshakes_total``, and the resumed ones among them."""
        clients = [self.kube, self.claims.client if isinstance(self.claims, KubeClaimSource) else None]
        configs = {id(c.config): c.config for c in clients if c is not None}
        for config in configs.values():
            self.metrics.handshakes.track(config.handshakes, config.resumed_handshakes)

    def stop(self) -> None:
        self._stop.set()
        for s in self.served:
            if s.publisher is not None:
                s.publisher.trigger()  # it sleeps until a trigger or its resync: wake it to see the stop
            s.server.stop()
        if self.status_writer is not None:
            self.status_writer.close()
        if self.status:
            self.status.stop()
        if self.kube:
            self.kube.close()
        if self._lock is not None:
            self._lock.release()
