"""``dralab bench driver``: NodePrepareResources latency and ResourceSlice publish time.

Prepare is measured the way the kubelet calls it: gRPC over the driver's real unix socket, 1 and
16 claims per call, each claim new (so the claim GET, the CDI write and both checkpoint writes are
in the figure), with an empty request (what liveness probes send) as the baseline of the same run.
Claims come from the local cluster's apiserver when it is reachable (created and allocated through
the status subresource), otherwise from memory, and the result records which and why.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import grpc
from rich.progress import Progress

from dralab.bench import DEFAULT_OUT
from dralab.bench.common import percentile, write_result
from dralab.driver.claims import ClaimSource, InMemoryClaimSource
from dralab.driver.kube import KubeClient, KubeError
from dralab.driver.proto import dra_v1_pb2, dra_v1_pb2_grpc
from dralab.driver.runner import DriverProcess, RunOptions
from dralab.driver.samples import NODE, lab20_claim

NAMESPACE = "dralab-bench-driver"


def _stats(samples_s: list[float], per: int = 1) -> dict[str, float]:
    ms = [s * 1000 for s in samples_s]
    return {
        "n": len(ms),
        "p50_ms": round(percentile(ms, 50), 3),
        "p99_ms": round(percentile(ms, 99), 3),
        "p50_per_claim_ms": round(percentile(ms, 50) / per, 3),
        "p99_per_claim_ms": round(percentile(ms, 99) / per, 3),
    }


def _cluster_client() -> tuple[KubeClient | None, str]:
    """A client for the local cluster, or None and the reason it is not used."""
    try:
        from dralab.cluster.api import get_cluster
    except ImportError as exc:
        return None, f"local cluster API not importable ({exc})"
    handle = get_cluster()
    if handle is None:
        return None, "no local cluster (run `dralab cluster up`)"
    try:
        client = KubeClient(str(handle.kubeconfig), timeout=5)
        client.request("GET", "/version")
    except Exception as exc:
        return None, f"local apiserver not reachable: {exc}"
    return client, f"local apiserver {client.host}"


class ApiClaims:
    """Allocated claims created on the apiserver (status written through the status subresource)."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        with contextlib.suppress(KubeError):
            client.create("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})

    def make(self, name: str) -> str:
        base = f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaims"
        body = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {
                "devices": {
                    "requests": [{"name": "npu", "exactly": {"deviceClassName": "hami-vnpu-core.project-hami.io"}}]
                }
            },
        }
        made = self.client.create(base, body)
        status = lab20_claim(uid=made["metadata"]["uid"], name=name, namespace=NAMESPACE, share=str(uuid.uuid4()))
        made["status"] = status["status"]
        self.client.request("PUT", f"{base}/{name}/status", body=made)
        return made["metadata"]["uid"]

    def cleanup(self) -> None:
        with contextlib.suppress(KubeError):
            self.client.delete(f"/api/v1/namespaces/{NAMESPACE}")


class MemoryClaims:
    def __init__(self, source: InMemoryClaimSource) -> None:
        self.source = source

    def make(self, name: str) -> str:
        uid = str(uuid.uuid4())
        self.source.put(lab20_claim(uid=uid, name=name, namespace=NAMESPACE, share=str(uuid.uuid4())))
        return uid

    def cleanup(self) -> None:
        return


def _bench_prepare(
    stub: dra_v1_pb2_grpc.DRAPluginStub,
    maker: Callable[[str], str],
    batch: int,
    rounds: int,
    tick: Callable[[], None],
) -> list[float]:
    samples = []
    for r in range(rounds):
        claims = []
        for i in range(batch):
            name = f"b{batch}-r{r}-c{i}-{uuid.uuid4().hex[:6]}"
            claims.append(dra_v1_pb2.Claim(namespace=NAMESPACE, name=name, uid=maker(name)))
        req = dra_v1_pb2.NodePrepareResourcesRequest(claims=claims)
        start = time.perf_counter()
        resp = stub.NodePrepareResources(req, timeout=45)
        samples.append(time.perf_counter() - start)
        errors = [c.error for c in resp.claims.values() if c.error]
        if errors:
            raise click.ClickException(f"prepare failed during the benchmark: {errors[0]}")
        stub.NodeUnprepareResources(dra_v1_pb2.NodeUnprepareResourcesRequest(claims=claims), timeout=45)
        tick()
    return samples


def _bench_empty(stub: dra_v1_pb2_grpc.DRAPluginStub, rounds: int) -> list[float]:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        stub.NodePrepareResources(dra_v1_pb2.NodePrepareResourcesRequest(), timeout=45)
        samples.append(time.perf_counter() - start)
    return samples


class _MemoryApi:
    """An in-memory stand-in for the slice API (create/list/delete), used when no apiserver is reachable."""

    def __init__(self) -> None:
        self.items: dict[str, dict[str, Any]] = {}
        self.n = 0

    def get(self, path: str, params: dict[str, Any] | None = None) -> dict[str, Any] | None:
        if path.startswith("/api/v1/nodes/"):
            return {"metadata": {"name": path.rsplit("/", 1)[1], "uid": "bench-node-uid"}}
        return {"items": list(self.items.values())}

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.n += 1
        name = body["metadata"]["generateName"] + str(self.n)
        self.items[name] = {**body, "metadata": {**body["metadata"], "name": name}}
        return self.items[name]

    def delete(self, path: str) -> bool:
        return self.items.pop(path.rsplit("/", 1)[1], None) is not None


def _bench_publish(client: Any, rounds: int) -> list[float]:
    """Time publish_once for a pool of 8 devices whose memory changes every round (create + delete)."""
    from dataclasses import replace

    from dralab.driver.devices.fake import from_inventory
    from dralab.driver.publisher import SlicePublisher
    from dralab.model.inventory import load_inventory
    from dralab.model.vendors import load_vendor_table

    vendor = load_vendor_table().get("ascend")
    base = from_inventory(load_inventory("lab20").node(NODE).devices[0])
    node = f"dralab-bench-{uuid.uuid4().hex[:6]}"
    if isinstance(client, KubeClient):
        client.create("/api/v1/nodes", {"metadata": {"name": node, "labels": {"dralab.io/bench": "true"}}})
    box: dict[str, Any] = {}
    pub = SlicePublisher(client, vendor, node, lambda: box["devices"])
    samples = []
    try:
        for r in range(rounds):
            box["devices"] = [
                replace(base, name=f"npu-{i}-0", index=i, physical_id=i, memory_bytes=(21525 - r) * 2**20)
                for i in range(8)
            ]
            start = time.perf_counter()
            pub.publish_once()
            samples.append(time.perf_counter() - start)
    finally:
        pub.delete_all()
        if isinstance(client, KubeClient):
            with contextlib.suppress(KubeError):
                client.delete(f"/api/v1/nodes/{node}")
    return samples


@click.command()
@click.option("--out", default=DEFAULT_OUT, show_default=True, help="Folder for driver.json.")
@click.option("--quick", is_flag=True, help="Fewer rounds (a smoke run).")
@click.option("--memory", "force_memory", is_flag=True, help="Use in-memory claims even if a cluster is up.")
def driver(out: str, quick: bool, force_memory: bool) -> None:
    """Measure NodePrepareResources (1 and 16 claims per call, empty baseline) and slice publish time.

    \b
    Example:
      dralab bench driver --quick --out /tmp/results
    """
    rounds_1, rounds_16, rounds_pub = (30, 8, 5) if quick else (300, 60, 30)
    client, source_note = (None, "in-memory claims requested (--memory)") if force_memory else _cluster_client()
    memory_source = InMemoryClaimSource()
    claims_src: ClaimSource = memory_source
    maker: ApiClaims | MemoryClaims = MemoryClaims(memory_source)
    if client is not None:
        from dralab.driver.claims import KubeClaimSource

        claims_src = KubeClaimSource(client)
        maker = ApiClaims(client)
    root = Path(tempfile.mkdtemp(prefix="drb", dir="/tmp"))
    lib = root / "lib" / "libvcore.so"
    lib.parent.mkdir()
    lib.write_bytes(b"")
    opts = RunOptions(
        node=NODE,
        backend="fake",
        plugin_dir=str(root / "p"),
        registry_dir=str(root / "r"),
        cdi_dir=str(root / "cdi"),
        state_dir=str(root / "s"),
        enforcement_library=str(lib),
        publish=False,
    )
    proc = DriverProcess(opts, claims=claims_src).start()
    result: dict[str, Any] = {}
    try:
        with grpc.insecure_channel(f"unix://{proc.served[0].server.paths.dra}") as ch, Progress() as progress:
            stub = dra_v1_pb2_grpc.DRAPluginStub(ch)
            _bench_empty(stub, 20)  # warm the channel and the server threads
            task = progress.add_task("prepare", total=rounds_1 + rounds_16)
            empty = _bench_empty(stub, rounds_1)
            one = _bench_prepare(stub, maker.make, 1, rounds_1, lambda: progress.advance(task))
            sixteen = _bench_prepare(stub, maker.make, 16, rounds_16, lambda: progress.advance(task))
            pub_task = progress.add_task("publish", total=1)
            publish = _bench_publish(client if client is not None else _MemoryApi(), rounds_pub)
            progress.advance(pub_task)
        result = {
            "claim_source": "apiserver" if client is not None else "memory",
            "claim_source_note": source_note,
            "slice_api": "apiserver" if client is not None else "memory",
            "baseline_empty_prepare": _stats(empty),
            "prepare_1_claim": _stats(one, 1),
            "prepare_16_claims": _stats(sixteen, 16),
            "publish_8_devices": _stats(publish),
            "load_average_1m": round(os.getloadavg()[0], 2),  # a shared host: tails follow the load
            "target_p99_per_claim_ms": 15.0,
            "meets_target": max(_stats(one)["p99_per_claim_ms"], _stats(sixteen, 16)["p99_per_claim_ms"]) <= 15.0,
        }
    finally:
        proc.stop()
        maker.cleanup()
        if client is not None:
            client.close()
        shutil.rmtree(root, ignore_errors=True)
    path = write_result(out, "driver", result)
    click.echo(f"wrote {path}")
    for key in ("baseline_empty_prepare", "prepare_1_claim", "prepare_16_claims", "publish_8_devices"):
        s = result[key]
        line = f"{key:24s} p50 {s['p50_ms']:8.3f} ms  p99 {s['p99_ms']:8.3f} ms"
        click.echo(f"{line}  p99/claim {s['p99_per_claim_ms']:.3f} ms")
    click.echo(f"claims from: {result['claim_source_note']}")
