"""A minimal in-process DRA driver for exercising the kubelet stand-in (and any kubelet-side code).

It serves the registration and DRA v1 services on the two unix sockets a real driver uses,
answers every prepare with one device per claim (or an error for claims marked to fail), and
keeps the calls it received in order, so a test can assert what was called when.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from dralab.driver.proto import dra_v1_pb2, dra_v1_pb2_grpc, pluginregistration_pb2, pluginregistration_pb2_grpc


@dataclass
class Call:
    """One call the driver received."""

    method: str
    claims: list[dict[str, str]]
    time: float
    note: Any = None


@dataclass
class TestDriver:
    """Serve ``name`` from ``registry_dir``/``plugins_dir`` until ``stop``."""

    __test__ = False  # not a pytest test class

    name: str
    registry_dir: Path
    plugins_dir: Path
    fail: dict[str, str] = field(default_factory=dict)  # claim name -> error message
    on_call: Callable[[str, list[dict[str, str]]], Any] | None = None
    on_notify: Callable[[bool], Any] | None = None  # called with plugin_registered as the kubelet's status arrives
    calls: list[Call] = field(default_factory=list)
    registered: threading.Event = field(default_factory=threading.Event)
    registration_errors: list[str] = field(default_factory=list)
    _servers: list[grpc.Server] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def endpoint(self) -> Path:
        return self.plugins_dir / self.name / "dra.sock"

    @property
    def registration_socket(self) -> Path:
        return self.registry_dir / f"{self.name}-reg.sock"

    def _record(self, method: str, request: Any) -> list[dict[str, str]]:
        claims = [{"namespace": c.namespace, "uid": c.uid, "name": c.name} for c in request.claims]
        note = self.on_call(method, claims) if self.on_call else None
        with self._lock:
            self.calls.append(Call(method, claims, time.time(), note))
        return claims

    def start(self) -> TestDriver:
        self.endpoint.parent.mkdir(parents=True, exist_ok=True)
        self.registry_dir.mkdir(parents=True, exist_ok=True)
        driver = self

        class Dra(dra_v1_pb2_grpc.DRAPluginServicer):
            def NodePrepareResources(self, request: Any, context: Any) -> Any:
                claims = driver._record("NodePrepareResources", request)
                out = dra_v1_pb2.NodePrepareResourcesResponse()
                for claim in claims:
                    entry = out.claims[claim["uid"]]
                    if claim["name"] in driver.fail:
                        entry.error = driver.fail[claim["name"]]
                        continue
                    entry.devices.append(
                        dra_v1_pb2.Device(
                            request_names=["req"],
                            pool_name="test",
                            device_name="dev-0",
                            cdi_device_ids=[f"test.dralab.io/dev={claim['uid']}"],
                        )
                    )
                return out

            def NodeUnprepareResources(self, request: Any, context: Any) -> Any:
                claims = driver._record("NodeUnprepareResources", request)
                out = dra_v1_pb2.NodeUnprepareResourcesResponse()
                for claim in claims:
                    out.claims[claim["uid"]].error = ""
                return out

        class Registration(pluginregistration_pb2_grpc.RegistrationServicer):
            def GetInfo(self, request: Any, context: Any) -> Any:
                return pluginregistration_pb2.PluginInfo(
                    type="DRAPlugin",
                    name=driver.name,
                    endpoint=str(driver.endpoint),
                    supported_versions=["v1.DRAPlugin"],
                )

            def NotifyRegistrationStatus(self, request: Any, context: Any) -> Any:
                if driver.on_notify is not None:
                    driver.on_notify(request.plugin_registered)
                if request.plugin_registered:
                    driver.registered.set()
                else:
                    driver.registration_errors.append(request.error)
                return pluginregistration_pb2.RegistrationStatusResponse()

        dra = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        dra_v1_pb2_grpc.add_DRAPluginServicer_to_server(Dra(), dra)
        dra.add_insecure_port(f"unix:{self.endpoint}")
        dra.start()
        reg = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        pluginregistration_pb2_grpc.add_RegistrationServicer_to_server(Registration(), reg)
        reg.add_insecure_port(f"unix:{self.registration_socket}")
        reg.start()
        self._servers = [dra, reg]
        return self

    def stop(self) -> None:
        for server in self._servers:
            server.stop(grace=None)
        self._servers = []
        for path in (self.registration_socket, self.endpoint):
            path.unlink(missing_ok=True)

    def methods(self) -> list[str]:
        with self._lock:
            return [c.method for c in self.calls]

    def calls_for(self, claim_uid: str) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if any(x["uid"] == claim_uid for x in c.claims)]
