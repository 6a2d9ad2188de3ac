"""A recorder between the real kubelet and the DRA drivers of the node: every call, as the stand-in records it.

The real kubelet keeps no log of which claim it prepared or unprepared, yet labs ask exactly
that ("Unprepare recorded"). The tap sits in the plugin-registration path:

- each driver registers in a private folder (``registry/``), as on the local profile;
- for each driver socket found there, the tap serves a registration socket of the same name in
  the kubelet's ``plugins_registry``; its ``GetInfo`` is the driver's answer with the endpoint
  replaced by the tap's own DRA socket;
- DRA calls are forwarded byte for byte to the driver's endpoint (nothing is decoded on the way:
  the kubelet and the driver talk exactly as without the tap), and each unary call (registration
  and gRPC health too) is appended to ``kubelet-records.jsonl`` with the stand-in's fields
  (``call``, ``claims``, ``cdiDeviceIDs``, ``error``) plus ``method``, ``unknownFields`` (fields
  our schema does not know, per direction) and ``source: "kubelet"``.

When a driver's registration socket disappears, the tap removes its own, so the kubelet sees
the plugin leave. Streaming methods are not proxied (the kubelet gets UNIMPLEMENTED).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import signal
import sys
import threading
from collections.abc import Callable
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import json_format, unknown_fields
from google.protobuf.message import DecodeError, Message

from dralab.driver.proto import dra_v1_pb2, dra_v1beta1_pb2, pluginregistration_pb2

REG_SUFFIX = "-reg.sock"
_DRA_MESSAGES: dict[str, tuple[type[Message], type[Message]]] = {}
for _pb, _pkg in ((dra_v1_pb2, "v1"), (dra_v1beta1_pb2, "v1beta1")):
    _svc = f"/k8s.io.kubelet.pkg.apis.dra.{_pkg}.DRAPlugin/"
    _DRA_MESSAGES[_svc + "NodePrepareResources"] = (_pb.NodePrepareResourcesRequest, _pb.NodePrepareResourcesResponse)
    _DRA_MESSAGES[_svc + "NodeUnprepareResources"] = (
        _pb.NodeUnprepareResourcesRequest,
        _pb.NodeUnprepareResourcesResponse,
    )


def decode(method: str, request: bytes, response: bytes | None) -> dict[str, Any]:
    """What a record says about one call (pure): the call name, claims, CDI ids, errors, unknown fields."""
    call = method.rsplit("/", 1)[-1]
    out: dict[str, Any] = {"method": method, "call": call, "claims": [], "cdiDeviceIDs": [], "unknownFields": {}}
    types = _DRA_MESSAGES.get(method)
    if types is None:
        return out
    req_type, resp_type = types
    try:
        req = req_type.FromString(request)
    except DecodeError as exc:
        out["error"] = f"undecodable request: {exc}"
        return out
    out["request"] = json_format.MessageToDict(req)
    out["claims"] = [{"namespace": c.namespace, "name": c.name, "uid": c.uid} for c in req.claims]
    if unknown := len(unknown_fields.UnknownFieldSet(req)):
        out["unknownFields"]["request"] = unknown
    if response is None:
        return out
    resp = resp_type.FromString(response)
    out["response"] = json_format.MessageToDict(resp)
    if unknown := len(unknown_fields.UnknownFieldSet(resp)):
        out["unknownFields"]["response"] = unknown
    errors = {uid: r.error for uid, r in resp.claims.items() if r.error}
    if errors:
        out["error"] = "; ".join(f"{uid}: {err}" for uid, err in sorted(errors.items()))
    if call == "NodePrepareResources":
        out["cdiDeviceIDs"] = [i for r in resp.claims.values() for d in r.devices for i in d.cdi_device_ids]
    return out


class Recorder:
    """Appends one JSON line per call (thread-safe)."""

    def __init__(self, path: Path, node: str) -> None:
        self.path = path
        self.node = node
        self._lock = threading.Lock()

    def write(self, driver: str, fields: dict[str, Any]) -> None:
        record = {
            "time": dt.datetime.now(dt.UTC).isoformat(timespec="microseconds"),
            "node": self.node,
            "source": "kubelet",
            "driver": driver,
            "pod": None,
            "namespace": None,
            "podUID": None,
            **fields,
        }
        line = json.dumps(record) + "\n"
        with self._lock, self.path.open("a") as fh:
            fh.write(line)


def _raw(fn: Callable[[bytes, grpc.ServicerContext], bytes]) -> grpc.RpcMethodHandler:
    return grpc.unary_unary_rpc_method_handler(fn, request_deserializer=None, response_serializer=None)


class DriverTap:
    """The tap for one driver: a registration socket for the kubelet and a forwarding DRA socket."""

    def __init__(self, driver_reg: Path, kubelet_registry: Path, socket_dir: Path, recorder: Recorder) -> None:
        self.driver_reg = driver_reg
        self.name = driver_reg.name.removesuffix(REG_SUFFIX)
        self.reg_path = kubelet_registry / driver_reg.name
        self.dra_path = socket_dir / f"{self.name}.sock"
        self.recorder = recorder
        self._reg_channel = grpc.insecure_channel(f"unix://{driver_reg}")
        self._upstream: grpc.Channel | None = None
        self._upstream_endpoint = ""
        self._server: grpc.Server | None = None

    def _upstream_info(self) -> pluginregistration_pb2.PluginInfo:
        info = self._reg_channel.unary_unary(
            "/pluginregistration.Registration/GetInfo",
            request_serializer=pluginregistration_pb2.InfoRequest.SerializeToString,
            response_deserializer=pluginregistration_pb2.PluginInfo.FromString,
        )(pluginregistration_pb2.InfoRequest(), timeout=10)
        if info.endpoint != self._upstream_endpoint:
            self._upstream = grpc.insecure_channel(f"unix://{info.endpoint}")
            self._upstream_endpoint = info.endpoint
        return info

    def _get_info(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        info = self._upstream_info()
        self._record("/pluginregistration.Registration/GetInfo", request, None, None)
        info.endpoint = str(self.dra_path)
        return info.SerializeToString()

    def _notify(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        status = pluginregistration_pb2.RegistrationStatus.FromString(request)
        self.recorder.write(
            self.name,
            {"method": "/pluginregistration.Registration/NotifyRegistrationStatus", "call": "NotifyRegistrationStatus",
             "request": json_format.MessageToDict(status), "claims": [], "cdiDeviceIDs": []},
        )  # fmt: skip
        return self._reg_channel.unary_unary("/pluginregistration.Registration/NotifyRegistrationStatus")(
            request, timeout=10
        )

    def _forward(self, method: str) -> Callable[[bytes, grpc.ServicerContext], bytes]:
        def handler(request: bytes, context: grpc.ServicerContext) -> bytes:
            if self._upstream is None:
                self._upstream_info()
            assert self._upstream is not None
            remaining = context.time_remaining()
            try:
                response = self._upstream.unary_unary(method)(request, timeout=remaining)
            except grpc.RpcError as exc:
                error = f"{exc.code().name}: {exc.details()}"
                self._record(method, request, None, error)
                context.abort(exc.code(), exc.details() or "")
                raise
            self._record(method, request, response, None)
            return response

        return handler

    def _record(self, method: str, request: bytes, response: bytes | None, error: str | None) -> None:
        """Record a call; a record that cannot be made never disturbs the forwarded call."""
        try:
            fields = decode(method, request, response)
        except Exception as exc:  # the recorder must not break the kubelet's call
            fields = {"method": method, "call": method.rsplit("/", 1)[-1], "claims": [], "cdiDeviceIDs": [],
                      "recordError": f"{type(exc).__name__}: {exc}"}  # fmt: skip
        if error:
            fields["error"] = error
        with contextlib.suppress(OSError):
            self.recorder.write(self.name, fields)

    def start(self) -> None:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        server.add_generic_rpc_handlers(
            (
                grpc.method_handlers_generic_handler(
                    "pluginregistration.Registration",
                    {"GetInfo": _raw(self._get_info), "NotifyRegistrationStatus": _raw(self._notify)},
                ),
            )
        )
        server.add_generic_rpc_handlers((_ForwardAll(self._forward),))
        # The DRA socket first: once the registration socket appears the kubelet may connect.
        self.dra_path.unlink(missing_ok=True)
        server.add_insecure_port(f"unix://{self.dra_path}")
        server.add_insecure_port(f"unix://{self.reg_path}")
        server.start()
        self._server = server

    def stop(self) -> None:
        for path in (self.reg_path, self.dra_path):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        if self._server is not None:
            self._server.stop(1).wait()


class _ForwardAll(grpc.GenericRpcHandler):
    """Forwards every unary method not handled elsewhere (the DRA services, gRPC health)."""

    def __init__(self, forward: Callable[[str], Callable[[bytes, grpc.ServicerContext], bytes]]) -> None:
        self._forward = forward

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        method = handler_call_details.method
        if method.startswith("/pluginregistration."):
            return None
        return _raw(self._forward(method))


def run(driver_registry: Path, kubelet_registry: Path, socket_dir: Path, records: Path, node: str) -> None:
    """Mirror driver registrations into the kubelet's registry until SIGTERM."""
    socket_dir.mkdir(parents=True, exist_ok=True)
    kubelet_registry.mkdir(parents=True, exist_ok=True)
    recorder = Recorder(records, node)
    taps: dict[str, DriverTap] = {}
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    print(f"tap: {driver_registry} -> {kubelet_registry}, records in {records}", flush=True)
    while not stop.is_set():
        present = {p.name: p for p in driver_registry.glob(f"*{REG_SUFFIX}") if p.is_socket()}
        for name, path in present.items():
            if name not in taps:
                tap = DriverTap(path, kubelet_registry, socket_dir, recorder)
                tap.start()
                taps[name] = tap
                print(f"tap: serving {tap.reg_path} for {path}", flush=True)
        for name in [n for n in taps if n not in present]:
            taps.pop(name).stop()
            print(f"tap: {name} left; removed its registration", flush=True)
        stop.wait(0.2)
    for tap in taps.values():
        tap.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dralab_kit.cluster.node.tap")
    parser.add_argument("--driver-registry", required=True, type=Path)
    parser.add_argument("--kubelet-registry", required=True, type=Path)
    parser.add_argument("--socket-dir", required=True, type=Path)
    parser.add_argument("--records", required=True, type=Path)
    parser.add_argument("--node", required=True)
    args = parser.parse_args(argv)
    run(args.driver_registry, args.kubelet_registry, args.socket_dir, args.records, args.node)
    return 0


if __name__ == "__main__":
    sys.exit(main())
