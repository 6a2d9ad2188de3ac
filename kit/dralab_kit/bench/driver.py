"""``dralab bench driver``: NodePrepareResources latency and ResourceSlice publish time.

Prepare is measured the way the kubelet calls it: gRPC over the driver's real unix socket, each
claim new (so the claim read, the CDI write and the durable checkpoint write are in the figure;
the 1-claim phase also reports the checkpoint writes' own p50/p99):

- 1 claim per call, and 16 claims per call (per-claim figure = call time / 16);
- 1 claim per call with the claim cache switched off (every claim read is a GET);
- 1 and 16 claims per call with the claims in memory (``..._no_api``): the same driver in the same
  run with no apiserver or etcd work around the call, which tells the machine's share (CPU and
  disk shared with the control plane) from the driver's own;
- 8 one-claim calls at once (what group commit amortizes: checkpoint writes per call);
- an empty request (what liveness probes send) as the baseline of the same run.

Claims come from the local cluster's apiserver when it is reachable (created, then allocated
through the status subresource), otherwise from memory; the result records which and why. With
the apiserver, a call is sent once the driver's claim cache has seen the claim's allocation: the
kubelet calls Prepare only after the scheduler's allocation and the pod's binding, several API
round trips later, so the watch has delivered it by then; the cache-off phase measures the GET
path. The CDI folder is on tmpfs where there is one (``/run`` is tmpfs on a node, where
``/var/run/cdi`` lives); the checkpoint and claim folders are on disk, as ``/var/lib`` is.

The whole measurement runs ``--runs`` times (each on a fresh driver); every figure is the median
of the runs, with the spread (min, max and each run's value) beside it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import click
import grpc
from rich.progress import Progress

from dralab.driver.claims import ClaimSource, InMemoryClaimSource, KubeClaimSource
from dralab.driver.library import stub_library
from dralab.driver.proto import dra_v1_pb2, dra_v1_pb2_grpc
from dralab.driver.runner import DriverProcess, RunOptions
from dralab.kube import Kube, KubeError
from dralab.util import WaitTimeout, wait_for
from dralab_kit.bench import DEFAULT_OUT
from dralab_kit.bench.common import percentile, write_result
from dralab_kit.fixtures.driver_claims import NODE, lab20_claim
from dralab_kit.fixtures.fakeapi import FakeKube

NAMESPACE = "dralab-bench-driver"
TARGET_1_CLAIM_P99_MS = 15.0
TARGET_16_CLAIMS_P99_PER_CLAIM_MS = 5.0
CONCURRENT = 8
PHASES = (
    ("baseline_empty_prepare", 1),
    ("prepare_1_claim", 1),
    ("prepare_16_claims", 16),
    ("prepare_1_claim_get", 1),
    ("prepare_1_claim_no_api", 1),
    ("prepare_16_claims_no_api", 16),
    (f"prepare_1_claim_concurrent_{CONCURRENT}", 1),
    ("publish_8_devices", 1),
)


def _stats(samples_s: list[float], per: int = 1) -> dict[str, float]:
    ms = [s * 1000 for s in samples_s]
    return {
        "n": len(ms),
        "p50_ms": round(percentile(ms, 50), 3),
        "p99_ms": round(percentile(ms, 99), 3),
        "p50_per_claim_ms": round(percentile(ms, 50) / per, 3),
        "p99_per_claim_ms": round(percentile(ms, 99) / per, 3),
    }


def _prefixed(prefix: str, stats: dict[str, float]) -> dict[str, float]:
    """The p50/p99 of ``stats`` under ``prefix`` (e.g. the checkpoint writes made during a phase)."""
    return {f"{prefix}p50_ms": stats["p50_ms"], f"{prefix}p99_ms": stats["p99_ms"]}


def _across_runs(runs: list[dict[str, float]]) -> dict[str, Any]:
    """The median of each figure over the runs, with each run's value and the min..max spread."""
    out: dict[str, Any] = {"n": sum(int(r["n"]) for r in runs)}
    spread: dict[str, Any] = {}
    for key in ("p50_ms", "p99_ms", "p50_per_claim_ms", "p99_per_claim_ms"):
        values = [r[key] for r in runs]
        out[key] = round(statistics.median(values), 3)
        spread[key] = {"min": min(values), "max": max(values), "runs": values}
    for key in {k for r in runs for k in r} - set(out) - set(spread):
        values = [r[key] for r in runs if key in r]
        out[key] = round(statistics.median(values), 3)
        spread[key] = {"min": min(values), "max": max(values), "runs": values}
    out["spread"] = spread
    return out


def _cluster_client() -> tuple[Kube | None, str]:
    """A client for the local cluster, or None and the reason it is not used."""
    try:
        from dralab_kit.cluster.api import get_cluster
    except ImportError as exc:
        return None, f"local cluster API not importable ({exc})"
    handle = get_cluster()
    if handle is None:
        return None, "no local cluster (run `dralab cluster up`)"
    try:
        client = Kube.from_kubeconfig(handle.kubeconfig, timeout=5, user_agent="dralab-driver")
        client.request("GET", "/version")
    except Exception as exc:
        return None, f"local apiserver not reachable: {exc}"
    return client, f"local apiserver {client.host}"


class ApiClaims:
    """Allocated claims created on the apiserver (status written through the status subresource)."""

    def __init__(self, client: Kube) -> None:
        self.client = client
        # a namespace per run: the previous run's may still be terminating (a create there is refused)
        self.namespace = f"{NAMESPACE}-{uuid.uuid4().hex[:6]}"
        labels = {"dralab.io/bench": "driver"}
        client.create("/api/v1/namespaces", {"metadata": {"name": self.namespace, "labels": labels}})

    def make(self, name: str) -> str:
        base = f"/apis/resource.k8s.io/v1/namespaces/{self.namespace}/resourceclaims"
        body = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": {
                "devices": {
                    "requests": [{"name": "npu", "exactly": {"deviceClassName": "hami-vnpu-core.project-hami.io"}}]
                }
            },
        }
        made = self.client.create(base, body)
        status = lab20_claim(uid=made["metadata"]["uid"], name=name, namespace=self.namespace, share=str(uuid.uuid4()))
        made["status"] = status["status"]
        self.client.request("PUT", f"{base}/{name}/status", body=made)
        return made["metadata"]["uid"]

    def cleanup(self) -> None:
        with contextlib.suppress(KubeError):
            self.client.delete(f"/api/v1/namespaces/{self.namespace}")


class MemoryClaims:
    def __init__(self, source: InMemoryClaimSource) -> None:
        self.source = source
        self.namespace = NAMESPACE

    def make(self, name: str) -> str:
        uid = str(uuid.uuid4())
        self.source.put(lab20_claim(uid=uid, name=name, namespace=self.namespace, share=str(uuid.uuid4())))
        return uid

    def cleanup(self) -> None:
        return


class _Bench:
    """One run: a fresh driver in a fresh folder, every phase measured against it."""

    def __init__(
        self, proc: DriverProcess, stub: dra_v1_pb2_grpc.DRAPluginStub, maker: Any, tick: Callable[[], None]
    ) -> None:
        self.proc = proc
        self.stub = stub
        self.maker = maker
        self.tick = tick
        self.state = proc.served[0].state

    def _claims(self, label: str, n: int) -> list[dra_v1_pb2.Claim]:
        claims = []
        for i in range(n):
            name = f"{label}-c{i}-{uuid.uuid4().hex[:8]}"
            claims.append(dra_v1_pb2.Claim(namespace=self.maker.namespace, name=name, uid=self.maker.make(name)))
        informer = self.proc.informer
        if informer is not None and self.state.cache is not None:
            # the kubelet calls after allocation and binding: by then the watch has delivered the claim
            with contextlib.suppress(WaitTimeout):
                wait_for(
                    lambda: all(informer.lookup(c.namespace, c.name, c.uid) for c in claims),
                    10,
                    "the claim cache to see the new claims",
                    interval=0.001,
                    max_interval=0.01,
                )
        return claims

    def _call(self, claims: list[dra_v1_pb2.Claim]) -> float:
        req = dra_v1_pb2.NodePrepareResourcesRequest(claims=claims)
        start = time.perf_counter()
        resp = self.stub.NodePrepareResources(req, timeout=45)
        took = time.perf_counter() - start
        errors = [c.error for c in resp.claims.values() if c.error]
        if errors:
            raise click.ClickException(f"prepare failed during the benchmark: {errors[0]}")
        return took

    def _release(self, claims: list[dra_v1_pb2.Claim]) -> None:
        self.stub.NodeUnprepareResources(dra_v1_pb2.NodeUnprepareResourcesRequest(claims=claims), timeout=45)

    def empty(self, rounds: int) -> list[float]:
        samples = []
        for _ in range(rounds):
            start = time.perf_counter()
            self.stub.NodePrepareResources(dra_v1_pb2.NodePrepareResourcesRequest(), timeout=45)
            samples.append(time.perf_counter() - start)
        return samples

    def prepare(self, batch: int, rounds: int, label: str) -> list[float]:
        samples = []
        for _ in range(rounds):
            claims = self._claims(label, batch)
            samples.append(self._call(claims))
            self._release(claims)
            self.tick()
        return samples

    def prepare_without_api(self, batch: int, rounds: int, label: str) -> list[float]:
        """Claims served from memory: no apiserver or etcd work next to the call (same driver, same run)."""
        memory = InMemoryClaimSource()
        saved = (self.maker, self.state.claims, self.state.cache)
        self.maker, self.state.claims, self.state.cache = MemoryClaims(memory), memory, None
        try:
            return self.prepare(batch, rounds, label)
        finally:
            self.maker, self.state.claims, self.state.cache = saved

    def prepare_without_cache(self, rounds: int) -> list[float]:
        cache, self.state.cache = self.state.cache, None
        try:
            return self.prepare(1, rounds, "get")
        finally:
            self.state.cache = cache

    def concurrent(self, rounds: int) -> tuple[list[float], float]:
        """``CONCURRENT`` one-claim calls at once; also the checkpoint writes each call cost."""
        samples: list[float] = []
        writes = 0
        with ThreadPoolExecutor(max_workers=CONCURRENT, thread_name_prefix="bench-call") as pool:
            for _ in range(rounds):
                claims = self._claims("conc", CONCURRENT)
                gate = threading.Barrier(CONCURRENT)

                def one(claim: dra_v1_pb2.Claim, gate: threading.Barrier = gate) -> float:
                    gate.wait()
                    return self._call([claim])

                before = self.state.commit.writes
                samples += list(pool.map(one, claims))
                writes += self.state.commit.writes - before
                self._release(claims)
                self.tick()
        return samples, writes / max(1, rounds * CONCURRENT)


def _cdi_folder() -> tuple[Path, str]:
    """Where the run's CDI specs go: tmpfs when the machine has one (as /run is on a node)."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        return Path(tempfile.mkdtemp(prefix="drbcdi", dir=shm)), "tmpfs (/dev/shm), as /var/run/cdi on a node"
    return Path(tempfile.mkdtemp(prefix="drbcdi", dir="/tmp")), "/tmp (no tmpfs available)"


def _one_run(claims_src: ClaimSource, maker: Any, rounds: dict[str, int], progress: Progress) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="drb", dir="/tmp"))
    cdi_dir, cdi_note = _cdi_folder()
    lib = root / "lib" / "libvcore.so"
    lib.parent.mkdir()
    lib.write_bytes(stub_library())  # an ELF header the driver accepts (nothing is preloaded here)
    opts = RunOptions(
        node=NODE,
        backend="fake",
        plugin_dir=str(root / "p"),
        registry_dir=str(root / "r"),
        cdi_dir=str(cdi_dir),
        state_dir=str(root / "s"),
        enforcement_library=str(lib),
        publish=False,
    )
    proc = DriverProcess(opts, claims=claims_src).start()
    try:
        if proc.informer is not None:
            wait_for(proc.informer.synced.is_set, 60, "the driver's claim cache to list the claims")
        local = rounds["one"] + rounds["sixteen"] if isinstance(maker, ApiClaims) else 0
        task = progress.add_task("run", total=sum(rounds.values()) + local)
        with grpc.insecure_channel(f"unix://{proc.served[0].server.paths.dra}") as ch:
            bench = _Bench(proc, dra_v1_pb2_grpc.DRAPluginStub(ch), maker, lambda: progress.advance(task))
            bench.empty(20)  # warm the channel and the server threads
            empty = bench.empty(rounds["empty"])
            progress.advance(task, rounds["empty"])
            writes_before = len(bench.state.commit.write_seconds)
            one = bench.prepare(1, rounds["one"], "one")
            one_writes = list(bench.state.commit.write_seconds)[writes_before:]
            sixteen = bench.prepare(16, rounds["sixteen"], "b16")
            if isinstance(maker, ApiClaims):
                one_local = bench.prepare_without_api(1, rounds["one"], "local")
                sixteen_local = bench.prepare_without_api(16, rounds["sixteen"], "local16")
            else:  # the claims are in memory already: the same figures
                one_local, sixteen_local = one, sixteen
            get = bench.prepare_without_cache(rounds["get"])
            conc, writes_per_call = bench.concurrent(rounds["concurrent"])
        hits = proc.metrics.registry.get_sample_value(
            "dralab_driver_claim_cache_total", {"driver": bench.state.driver, "result": "hit"}
        )
        misses = proc.metrics.registry.get_sample_value(
            "dralab_driver_claim_cache_total", {"driver": bench.state.driver, "result": "miss"}
        )
    finally:
        proc.stop()
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(cdi_dir, ignore_errors=True)
    return {
        "baseline_empty_prepare": _stats(empty),
        "prepare_1_claim": {**_stats(one, 1), **_prefixed("checkpoint_write_", _stats(one_writes))},
        "prepare_1_claim_no_api": _stats(one_local, 1),
        "prepare_16_claims_no_api": _stats(sixteen_local, 16),
        "prepare_16_claims": _stats(sixteen, 16),
        "prepare_1_claim_get": _stats(get, 1),
        f"prepare_1_claim_concurrent_{CONCURRENT}": {**_stats(conc, 1), "checkpoint_writes_per_call": writes_per_call},
        "cache_reads": {"hit": hits or 0, "miss": misses or 0},
        "cdi_dir": cdi_note,
    }


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
        with contextlib.suppress(KubeError):
            client.delete(f"/api/v1/nodes/{node}")
    return samples


@click.command()
@click.option("--out", default=DEFAULT_OUT, show_default=True, help="Folder for driver.json.")
@click.option("--quick", is_flag=True, help="Fewer rounds (a smoke run).")
@click.option("--runs", type=click.IntRange(1), default=3, show_default=True, help="Whole runs; figures are medians.")
@click.option("--memory", "force_memory", is_flag=True, help="Use in-memory claims even if a cluster is up.")
def driver(out: str, quick: bool, runs: int, force_memory: bool) -> None:
    """Measure NodePrepareResources (1 and 16 claims per call, cache off, 8 at once, empty baseline) and slice publish.

    \b
    Example:
      dralab bench driver --quick --out /tmp/results
    """
    if quick:
        rounds = {"empty": 30, "one": 30, "sixteen": 8, "get": 15, "concurrent": 4}
        rounds_pub = 5
    else:
        rounds = {"empty": 300, "one": 300, "sixteen": 60, "get": 100, "concurrent": 40}
        rounds_pub = 30
    client, source_note = (None, "in-memory claims requested (--memory)") if force_memory else _cluster_client()
    memory_source = InMemoryClaimSource()
    claims_src: ClaimSource = memory_source
    maker: ApiClaims | MemoryClaims = MemoryClaims(memory_source)
    if client is not None:
        claims_src = KubeClaimSource(client)
        maker = ApiClaims(client)
    per_run: list[dict[str, Any]] = []
    try:
        with Progress() as progress:
            for _ in range(runs):
                per_run.append(_one_run(claims_src, maker, rounds, progress))
                pub_task = progress.add_task("publish", total=1)
                per_run[-1]["publish_8_devices"] = _stats(
                    _bench_publish(client if client is not None else FakeKube(), rounds_pub)
                )
                progress.advance(pub_task)
    finally:
        maker.cleanup()
        if client is not None:
            client.close()
    result = _summary(per_run, client is not None, source_note)
    path = write_result(out, "driver", result)
    click.echo(f"wrote {path}")
    for key, _ in PHASES:
        s = result[key]
        sp = s["spread"]["p99_ms"]
        line = f"{key:32s} p50 {s['p50_ms']:8.3f} ms  p99 {s['p99_ms']:8.3f} ms [{sp['min']:.3f}..{sp['max']:.3f}]"
        click.echo(f"{line}  p99/claim {s['p99_per_claim_ms']:.3f} ms")
    for name, t in result["targets"].items():
        click.echo(f"target {name}: {t['median']:.3f} <= {t['target']} -> {'met' if t['met'] else 'NOT met'}")
    click.echo(f"claims from: {result['claim_source_note']}; medians of {runs} run(s)")


def _summary(per_run: list[dict[str, Any]], api: bool, source_note: str) -> dict[str, Any]:
    """driver.json: each phase's medians over the runs with spreads, the targets and how they compare."""
    result: dict[str, Any] = {
        "runs": len(per_run),
        "claim_source": "apiserver" if api else "memory",
        "claim_source_note": source_note,
        "claim_cache": "informer (list+watch of the node's claims)" if api else "none (in-memory claims need no GET)",
        "slice_api": "apiserver" if api else "memory",
        "cdi_dir": per_run[0]["cdi_dir"],
        "cache_reads": {k: sum(r["cache_reads"][k] for r in per_run) for k in ("hit", "miss")},
        "load_average_1m": round(os.getloadavg()[0], 2),  # a shared host: tails follow the load
    }
    for key, _ in PHASES:
        result[key] = _across_runs([r[key] for r in per_run])
    base = result["baseline_empty_prepare"]
    for key, _ in PHASES[1:-1]:
        # the same run's empty call: what the socket, gRPC and the server's threads cost on their own
        result[key]["p99_over_baseline_p99"] = round(result[key]["p99_ms"] / max(base["p99_ms"], 1e-9), 2)
    one = result["prepare_1_claim"]["p99_ms"]
    sixteen = result["prepare_16_claims"]["p99_per_claim_ms"]
    result["targets"] = {
        "prepare_1_claim_p99_ms": {"target": TARGET_1_CLAIM_P99_MS, "median": one, "met": one <= TARGET_1_CLAIM_P99_MS},
        "prepare_16_claims_p99_per_claim_ms": {
            "target": TARGET_16_CLAIMS_P99_PER_CLAIM_MS,
            "median": sixteen,
            "met": sixteen <= TARGET_16_CLAIMS_P99_PER_CLAIM_MS,
        },
    }
    # kept for the report's summary table: the larger per-claim p99 against the 1-claim target
    result["target_p99_per_claim_ms"] = TARGET_1_CLAIM_P99_MS
    result["meets_target"] = all(t["met"] for t in result["targets"].values())
    return result
