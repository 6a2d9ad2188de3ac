"""The webhook as an attacker meets it: the real TLS server on a free port, raw sockets and reviews."""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from dralab.config import Config, default_config
from dralab.util import free_port, wait_for
from dralab.webhook import certs
from dralab.webhook.server import Server, build


@dataclass
class Served:
    url: str
    port: int
    ca: Path
    cert: Path
    key: Path
    server: Server

    def client(self, timeout: float = 10.0, **kwargs: Any) -> httpx.Client:
        return httpx.Client(verify=ssl.create_default_context(cafile=str(self.ca)), timeout=timeout, **kwargs)

    def tls_socket(self, timeout: float = 15.0) -> ssl.SSLSocket:
        """A TLS connection that has finished its handshake and sent nothing."""
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        return ssl.create_default_context(cafile=str(self.ca)).wrap_socket(raw, server_hostname="127.0.0.1")


@contextmanager
def serve(
    tmp: Path, config: Config | None = None, api: Any = None, server_kwargs: dict[str, Any] | None = None
) -> Iterator[Served]:
    """The real server (uvicorn over TLS) with ``config``; ``api`` None: conversion without creating claims."""
    ca, cert, key = certs.write(tmp)
    port = free_port()
    hook = build(config or default_config(), api, janitor=False)
    server = Server(hook, cert, key, port=port, reload_interval=0.1, **(server_kwargs or {}))
    server.start_in_thread()
    wait_for(lambda: server.started, 15, "webhook server to start")
    try:
        yield Served(f"https://127.0.0.1:{port}", port, ca, cert, key, server)
    finally:
        server.stop()


def review(pod: dict[str, Any], *, namespace: str = "team-a", operation: str = "CREATE", uid: str = "r-1",
           old: dict[str, Any] | None = None) -> dict[str, Any]:
    request: dict[str, Any] = {
        "uid": uid,
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": namespace,
        "operation": operation,
        "object": pod if operation != "DELETE" else None,
    }
    if old is not None:
        request["oldObject"] = old
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def gpu_pod(name: str = "p", limits: dict[str, Any] | None = None, containers: int = 1) -> dict[str, Any]:
    """An NVIDIA pod in HAMi syntax (``containers`` identical containers)."""
    limits = limits if limits is not None else {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1024"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "containers": [
                {"name": f"c{i}", "image": "busybox", "resources": {"limits": dict(limits)}} for i in range(containers)
            ]
        },
    }


def answer(resp: httpx.Response) -> dict[str, Any]:
    assert resp.status_code == 200, resp.text[:300]
    return resp.json()["response"]
