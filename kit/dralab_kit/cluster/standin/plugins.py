"""Plugin discovery and DRA calls, as the kubelet does them over unix sockets.

Discovery: every ``*.sock`` in the registry directory is asked ``GetInfo``; a DRA plugin
(type ``DRAPlugin``, a supported service version, an endpoint socket) is told
``NotifyRegistrationStatus(plugin_registered=true)`` and used from then on. A socket that is
replaced (driver restart) is registered again. Reachability is checked by connecting to the
endpoint; how long a driver has been unreachable drives the ResourceSlice cleanup.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from google.protobuf.json_format import MessageToDict

from dralab.driver.proto import (
    dra_v1_pb2,
    dra_v1_pb2_grpc,
    dra_v1beta1_pb2,
    dra_v1beta1_pb2_grpc,
    pluginregistration_pb2,
    pluginregistration_pb2_grpc,
)
from dralab.util import get_logger

log = get_logger("dralab.standin")

CALL_TIMEOUT = 45.0  # the kubelet's per-call timeout
_SERVICES = {
    "v1.DRAPlugin": (dra_v1_pb2, dra_v1_pb2_grpc),
    "v1beta1.DRAPlugin": (dra_v1beta1_pb2, dra_v1beta1_pb2_grpc),
}


def choose_version(supported: list[str]) -> str | None:
    """The first advertised service version this stand-in speaks (the plugin lists its preference first)."""
    for version in supported:
        if version in _SERVICES:
            return version
    return None


@dataclass
class Plugin:
    """A registered DRA driver."""

    name: str
    endpoint: str
    version: str
    reg_socket: str
    reg_inode: int
    registered_at: float
    unreachable_since: float | None = None
    # one channel per registration, kept across calls (a channel per call cost more CPU than the call);
    # dropped after any transport error, so a restarted driver is reached on a fresh connection at once
    channel: grpc.Channel | None = field(default=None, repr=False, compare=False)
    slices_wiped: bool = False


def _channel(path: str) -> grpc.Channel:
    return grpc.insecure_channel(f"unix:{path}")


def _inode(path: Path) -> int:
    try:
        return path.stat().st_ino
    except OSError:
        return -1


def socket_reachable(path: str, timeout: float = 1.0) -> bool:
    """True when something accepts connections on the unix socket ``path``."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(path)
        return True
    except OSError:
        return False
    finally:
        sock.close()


class PluginManager:
    """Tracks the DRA drivers registered through one registry directory."""

    def __init__(self, registry_dir: Path) -> None:
        self.registry_dir = registry_dir
        self.plugins: dict[str, Plugin] = {}
        self._rejected: dict[str, int] = {}  # socket path -> inode already refused
        self._lock = threading.Lock()

    def get(self, driver: str) -> Plugin | None:
        with self._lock:
            return self.plugins.get(driver)

    def forget(self, driver: str) -> None:
        """Drop a driver that went away for good (its sockets are gone and its slices were removed)."""
        with self._lock:
            self.plugins.pop(driver, None)

    def snapshot(self) -> list[Plugin]:
        with self._lock:
            return list(self.plugins.values())

    def scan(self) -> list[str]:
        """Register new or replaced registration sockets; return the names registered now."""
        registered = []
        known = {p.reg_socket: p.reg_inode for p in self.snapshot()}
        try:
            entries = sorted(self.registry_dir.glob("*.sock"))
        except OSError:
            entries = []
        for path in entries:
            inode = _inode(path)
            if known.get(str(path)) == inode or self._rejected.get(str(path)) == inode:
                continue
            name = self._register(path, inode)
            if name:
                registered.append(name)
        return registered

    def _register(self, path: Path, inode: int) -> str | None:
        """GetInfo, then (as the kubelet) record the plugin before NotifyRegistrationStatus: a driver told it
        is registered may be called at once, so the plugin must be callable by then.

        A status that could not be delivered leaves the plugin registered, as the kubelet leaves it: the
        driver may have received it all the same (a reply lost or late on a busy node), and a plugin the
        driver believes registered but the node does not would never have its slices removed."""
        plugin = None
        try:
            with _channel(str(path)) as channel:
                stub = pluginregistration_pb2_grpc.RegistrationStub(channel)
                info = stub.GetInfo(pluginregistration_pb2.InfoRequest(), timeout=5)
                error = self._validate(info)
                if not error:
                    version = choose_version(list(info.supported_versions))
                    assert version is not None
                    plugin = Plugin(info.name, info.endpoint, version, str(path), inode, time.time())
                    with self._lock:  # a replaced registration's channel closes when its last call ends
                        self.plugins[info.name] = plugin
                try:
                    stub.NotifyRegistrationStatus(
                        pluginregistration_pb2.RegistrationStatus(plugin_registered=not error, error=error or ""),
                        timeout=5,
                    )
                except grpc.RpcError as exc:
                    log.warning(
                        "registration status not delivered",
                        extra={"fields": {"socket": str(path), "error": str(exc.code())}},
                    )
        except grpc.RpcError as exc:
            log.info(
                "registration socket not answering yet",
                extra={"fields": {"socket": str(path), "error": str(exc.code())}},
            )
            return None
        if error:
            self._rejected[str(path)] = inode
            log.warning("plugin rejected", extra={"fields": {"socket": str(path), "error": error}})
            return None
        assert plugin is not None
        log.info("plugin registered",
                 extra={"fields": {"driver": info.name, "endpoint": info.endpoint, "version": plugin.version}})
        return info.name

    @staticmethod
    def _validate(info: Any) -> str | None:
        if info.type != "DRAPlugin":
            return f"plugin type {info.type!r} is not DRAPlugin"
        if not info.name:
            return "plugin name is empty"
        if not choose_version(list(info.supported_versions)):
            known = ", ".join(_SERVICES)
            return f"none of the supported versions {list(info.supported_versions)} is known ({known})"
        if not info.endpoint or not os.path.isabs(info.endpoint):
            return f"endpoint {info.endpoint!r} must be an absolute socket path"
        return None

    def check_reachability(self, now: float) -> None:
        """Mark plugins unreachable (endpoint or registration socket gone) or reachable again."""
        for plugin in self.snapshot():
            reg_present = _inode(Path(plugin.reg_socket)) == plugin.reg_inode
            ok = reg_present and socket_reachable(plugin.endpoint)
            if ok:
                plugin.unreachable_since = None
                plugin.slices_wiped = False
            elif plugin.unreachable_since is None:
                plugin.unreachable_since = now
                log.warning("plugin unreachable", extra={"fields": {"driver": plugin.name}})
            if not reg_present:
                # the registration socket went away (driver stopped or restarting): whatever socket
                # appears next under that path is registered afresh, even if it reuses the inode
                plugin.reg_inode = -2

    def call(self, driver: str, method: str, claims: list[dict[str, str]]) -> tuple[dict[str, Any], dict[str, Any]]:
        """Call NodePrepareResources/NodeUnprepareResources; returns (request, response) as JSON dicts.

        Raises ``grpc.RpcError`` on transport errors and LookupError when the driver is not registered.
        """
        plugin = self.get(driver)
        if plugin is None:
            raise LookupError(f"DRA driver {driver} is not registered on this node")
        pb2, pb2_grpc = _SERVICES[plugin.version]
        req_type = getattr(pb2, f"{method}Request")
        request = req_type(claims=[pb2.Claim(namespace=c["namespace"], uid=c["uid"], name=c["name"]) for c in claims])
        channel = plugin.channel
        if channel is None:
            channel = plugin.channel = _channel(plugin.endpoint)
        try:
            response = getattr(pb2_grpc.DRAPluginStub(channel), method)(request, timeout=CALL_TIMEOUT)
        except grpc.RpcError:
            plugin.channel = None
            channel.close()
            raise
        as_dict = {"preserving_proto_field_name": False}
        return MessageToDict(request, **as_dict), MessageToDict(response, **as_dict)
