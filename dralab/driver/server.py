"""The kubelet-facing gRPC servers of one driver name: registration and DRA (v1 + v1beta1), plus health.

Two unix sockets per driver name: ``<registry-dir>/<driver>-reg.sock`` (Registration) and
``<plugin-dir>/<driver>/dra.sock`` (DRAPlugin v1 and v1beta1, and grpc.health.v1), served by one gRPC
server: every sync gRPC server polls its completion queue every 200 ms and checks for itself being
garbage-collected once a second, whether it has calls or not, so a second server per driver doubled
that idle cost (it adds up on a host simulating hundreds of nodes). The kubelet calls only
Registration on the first socket and only DRAPlugin on the second; the other services each socket
also answers are harmless. The health check
never takes a worker of the pools the kubelet's calls run on: it connects to both sockets (the
HTTP/2 handshake is answered by gRPC's own I/O, so a socket that is gone or not served fails) and
checks that no Prepare/Unprepare call has been running for longer than ``STUCK_CALL_S`` (a wedged
call, such as a lock never released, fails it). A driver whose workers are all busy with slow API
reads is therefore healthy, as it should be: restarting it would not make the apiserver faster.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterable, Iterator
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from dralab.driver.cdi import ClaimRef
from dralab.driver.proto import (
    SUPPORTED_VERSIONS,
    dra_v1_pb2,
    dra_v1_pb2_grpc,
    dra_v1beta1_pb2,
    dra_v1beta1_pb2_grpc,
    pluginregistration_pb2,
    pluginregistration_pb2_grpc,
)
from dralab.driver.state import DriverState, claim_uid_problem
from dralab.errors import UserError
from dralab.util import get_logger

log = get_logger("dralab.driver.server")

MAX_UNIX_PATH = 107  # sun_path is 108 bytes including the terminating NUL
PLUGIN_TYPE = "DRAPlugin"
# The kubelet gives up on a Prepare after about 45 s; a call still running long after that is wedged.
STUCK_CALL_S = 180.0


class InFlight:
    """Start times of the calls being served, so health can tell a busy driver from a wedged one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: dict[int, float] = {}
        self._next = 0

    @contextlib.contextmanager
    def call(self) -> Iterator[None]:
        with self._lock:
            key, self._next = self._next, self._next + 1
            self._calls[key] = time.monotonic()
        try:
            yield
        finally:
            with self._lock:
                del self._calls[key]

    def oldest_s(self) -> float | None:
        """How long the longest-running call has been running (None when none is)."""
        with self._lock:
            first = min(self._calls.values(), default=None)
        return None if first is None else time.monotonic() - first


@dataclass(frozen=True)
class SocketPaths:
    """Where one driver name's sockets live."""

    registration: Path
    dra: Path

    @classmethod
    def for_driver(cls, driver: str, plugin_dir: str | Path, registry_dir: str | Path) -> SocketPaths:
        paths = cls(
            registration=Path(registry_dir).absolute() / f"{driver}-reg.sock",
            dra=Path(plugin_dir).absolute() / driver / "dra.sock",
        )
        for path in (paths.registration, paths.dra):
            if len(os.fsencode(path)) > MAX_UNIX_PATH:
                raise UserError(
                    f"unix socket path {path} is {len(os.fsencode(path))} bytes, over the limit of {MAX_UNIX_PATH}: "
                    "use shorter --plugin-dir / --registry-dir"
                )
        return paths


class RegistrationService(pluginregistration_pb2_grpc.RegistrationServicer):
    """Answers the kubelet's plugin watcher and records the registration outcome."""

    def __init__(self, driver: str, endpoint: Path) -> None:
        self.driver = driver
        self.endpoint = endpoint
        self.registered = threading.Event()
        self.error = ""

    def GetInfo(self, request: Any, context: Any) -> Any:
        return pluginregistration_pb2.PluginInfo(
            type=PLUGIN_TYPE, name=self.driver, endpoint=str(self.endpoint), supported_versions=list(SUPPORTED_VERSIONS)
        )

    def NotifyRegistrationStatus(self, request: Any, context: Any) -> Any:
        if request.plugin_registered:
            self.error = ""
            self.registered.set()
            log.info("registered with the kubelet", extra={"fields": {"driver": self.driver}})
        else:
            self.error = request.error or "registration refused"
            self.registered.clear()
            log.error("kubelet refused registration", extra={"fields": {"driver": self.driver, "error": self.error}})
        return pluginregistration_pb2.RegistrationStatusResponse()


def _split(claims: Iterable[Any]) -> tuple[list[ClaimRef], dict[str, str]]:
    """The claims whose uid can name files, and an error per uid that cannot (that claim fails alone)."""
    refs: list[ClaimRef] = []
    refused: dict[str, str] = {}
    for c in claims:
        problem = claim_uid_problem(c.uid)
        if problem:
            refused[c.uid] = problem
        else:
            refs.append(ClaimRef(namespace=c.namespace, name=c.name, uid=c.uid))
    return refs, refused


class _DRAService:
    """NodePrepare/NodeUnprepare for one API version (``pb`` is that version's message module).

    Requests, responses and contexts are typed Any: the generated message classes are made at import
    time, so no checker sees them.
    """

    pb = dra_v1_pb2
    with_share_id = True

    def __init__(self, state: DriverState, inflight: InFlight | None = None) -> None:
        self.state = state
        self.inflight = inflight or InFlight()

    def NodePrepareResources(self, request: Any, context: Any) -> Any:
        with self.inflight.call(), self.state.metrics.work(self.state.driver, "prepare"):
            return self._prepare(request)

    def NodeUnprepareResources(self, request: Any, context: Any) -> Any:
        with self.inflight.call(), self.state.metrics.work(self.state.driver, "unprepare"):
            return self._unprepare(request)

    def _prepare(self, request: Any) -> Any:
        start = time.perf_counter()
        resp = self.pb.NodePrepareResourcesResponse()
        refs, refused = _split(request.claims)
        for uid, problem in refused.items():
            resp.claims[uid].error = problem
        if refused:
            self.state.refused("prepare", refused)
        if refs:
            for uid, result in self.state.prepare(refs).items():
                entry = resp.claims[uid]
                if result.error:
                    entry.error = result.error
                    continue
                for dev in result.devices:
                    out = entry.devices.add(
                        request_names=list(dev.request_names),
                        pool_name=dev.pool_name,
                        device_name=dev.device_name,
                        cdi_device_ids=list(dev.cdi_device_ids),
                    )
                    if self.with_share_id and dev.share_id:
                        out.share_id = dev.share_id
        self.state.metrics.duration.labels(self.state.driver, "prepare").observe(time.perf_counter() - start)
        return resp

    def _unprepare(self, request: Any) -> Any:
        start = time.perf_counter()
        resp = self.pb.NodeUnprepareResourcesResponse()
        refs, refused = _split(request.claims)
        for uid, problem in refused.items():
            resp.claims[uid].error = problem
        if refused:
            self.state.refused("unprepare", refused)
        for uid, error in self.state.unprepare(refs).items():
            resp.claims[uid].error = error
        self.state.metrics.duration.labels(self.state.driver, "unprepare").observe(time.perf_counter() - start)
        return resp


class DRAv1Service(_DRAService, dra_v1_pb2_grpc.DRAPluginServicer):
    pb = dra_v1_pb2
    with_share_id = True


class DRAv1beta1Service(_DRAService, dra_v1beta1_pb2_grpc.DRAPluginServicer):
    pb = dra_v1beta1_pb2
    with_share_id = False


def probe_sockets(paths: SocketPaths, timeout: float = 5.0, inflight: InFlight | None = None) -> tuple[bool, str]:
    """Both sockets accept a gRPC connection, and no call is wedged (see the module docstring).

    No RPC is sent: a handler would need a worker of the pool the kubelet's calls queue on.
    """
    for path in (paths.registration, paths.dra):
        with grpc.insecure_channel(f"unix://{path}") as ch:
            try:
                grpc.channel_ready_future(ch).result(timeout=timeout)
            except grpc.FutureTimeoutError:
                return False, f"socket check failed: {path} does not accept gRPC connections within {timeout:g}s"
    oldest = inflight.oldest_s() if inflight is not None else None
    if oldest is not None and oldest > STUCK_CALL_S:
        return False, f"a Prepare/Unprepare call has been running for {oldest:.0f}s (over {STUCK_CALL_S:g}s): wedged"
    return True, f"ok: {paths.registration} and {paths.dra} accept connections"


class HealthService(health_pb2_grpc.HealthServicer):
    """grpc.health.v1: the same check as ``/healthz`` (connections and wedged calls, no nested RPC)."""

    def __init__(self, paths: SocketPaths, inflight: InFlight | None = None) -> None:
        self.paths = paths
        self.inflight = inflight

    def Check(self, request: Any, context: Any) -> Any:
        ok, detail = probe_sockets(self.paths, inflight=self.inflight)
        if not ok:
            log.warning("health check failed", extra={"fields": {"detail": detail}})
        status = health_pb2.HealthCheckResponse.SERVING if ok else health_pb2.HealthCheckResponse.NOT_SERVING
        return health_pb2.HealthCheckResponse(status=status)


def _remove_stale(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


class PluginServer:
    """Both sockets of one driver name on one gRPC server; start() binds them (removing stale sockets first)."""

    def __init__(self, state: DriverState, paths: SocketPaths, workers: int = 8) -> None:
        self.state = state
        self.paths = paths
        self.registration = RegistrationService(state.driver, paths.dra)
        # Registration calls come once per kubelet start; the two workers more keep one free for them
        # while every other worker serves a Prepare or Unprepare.
        pool = futures.ThreadPoolExecutor(max_workers=workers + 2, thread_name_prefix="dra")
        self._server = grpc.server(pool)
        self.inflight = InFlight()
        dra_v1_pb2_grpc.add_DRAPluginServicer_to_server(DRAv1Service(state, self.inflight), self._server)
        dra_v1beta1_pb2_grpc.add_DRAPluginServicer_to_server(DRAv1beta1Service(state, self.inflight), self._server)
        health_pb2_grpc.add_HealthServicer_to_server(HealthService(paths, self.inflight), self._server)
        pluginregistration_pb2_grpc.add_RegistrationServicer_to_server(self.registration, self._server)

    def start(self) -> None:
        # Binding creates and listens on each socket: the DRA socket first, so that when the kubelet
        # sees the registration socket appear, the endpoint it is told about already exists. A call
        # that connects before start() waits in the listen queue for the server to start.
        for path in (self.paths.dra, self.paths.registration):
            _remove_stale(path)
            if self._server.add_insecure_port(f"unix://{path}") == 0:
                raise UserError(f"cannot listen on {path}: check the directory is writable")
        self._server.start()
        log.info(
            "serving",
            extra={
                "fields": {"driver": self.state.driver, "dra": str(self.paths.dra), "reg": str(self.paths.registration)}
            },
        )

    def stop(self, grace: float = 2.0) -> None:
        """Stop serving; the registration socket is removed first, so the kubelet's plugin watcher sees
        the plugin leave before calls in flight on the DRA socket are given ``grace`` to end."""
        with contextlib.suppress(FileNotFoundError):
            self.paths.registration.unlink()
        self._server.stop(grace).wait()
        for path in (self.paths.registration, self.paths.dra):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    def health(self) -> tuple[bool, str]:
        return probe_sockets(self.paths, inflight=self.inflight)
