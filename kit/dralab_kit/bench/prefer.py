"""``dralab bench prefer``: scheduling bursts of pods whose claims list 3 GPU types (``firstAvailable``)
against the same bursts of pods that accept one type, on one KWOK node with fake GPUs of three types.

A ``dralab.io/prefer-types: "l4,h100,a100"`` pod becomes a claim with three ``firstAvailable``
subrequests (KEP-4816); the scheduler's DRA allocator tries them in order. The node has one small L4
and one small H100 (8 pods each) and five A100, so in a burst of 200 (or 30, --quick) the first 8
pods get the L4, the next 8 the H100 and the rest fall back to an A100 past two full types: for
most pods, every subrequest is tried.
The baseline of the same run is the same pods with ``nvidia.com/use-gputype: a100`` (one type, a
plain ``exactly`` request), which all fit on the A100s. Kinds take turns burst by burst, each burst
in a fresh namespace cleared before the next, so drifting load hits both alike.

Per burst: pods/s (pods bound over the time to the last bound) and create-to-scheduled p50/p99
from :class:`~dralab_kit.bench.concurrency.BurstRunner`; per kind, the scheduler's own attempt and
queue-to-bound histograms and its CPU per pod (:mod:`dralab_kit.bench.phases`, :mod:`dralab_kit.bench.cpu`).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
import uuid
from collections.abc import Sequence
from typing import Any

import click

from dralab_kit.bench import DEFAULT_OUT
from dralab_kit.bench.common import write_result

NODE = "prefer-node"
VENDOR = "nvidia"
PREFER_TYPES = ("l4", "h100", "a100")  # most preferred first: the small pools fill, later pods fall back
SINGLE_TYPE = "a100"
# (type, product name, devices, memory MiB each): the L4 and the H100 (memory cut down) fill early in a
# burst, the A100s hold every single-type pod
CARDS = (("l4", "NVIDIA L4", 1, 4096), ("h100", "NVIDIA H100 80GB HBM3", 1, 4096),
         ("a100", "NVIDIA A100-SXM4-40GB", 5, 40960))
POD_MEMORY_MIB = 512
POD_CORES = 2
N_FULL = 200
N_QUICK = 30
REPEATS_FULL = 3
KINDS = ("prefer", "single")


# ---------------------------------------------------------------- pure: pods and inventory


def typed_pod(name: str, types: Sequence[str], memory_mib: int = POD_MEMORY_MIB,
              cores: int = POD_CORES) -> dict[str, Any]:
    """A pod in HAMi's NVIDIA syntax asking for a share of one GPU of ``types``.

    Several types: ``dralab.io/prefer-types`` in that order (a ``firstAvailable`` request). One type: the
    vendor's own ``nvidia.com/use-gputype`` (an ``exactly`` request with the type's selector), the
    plain request the comparison is against.
    """
    from dralab.model.convert import ANN_PREFER_TYPES

    if not types:
        raise ValueError("typed_pod needs at least one device type")
    annotations = ({ANN_PREFER_TYPES: ",".join(types)} if len(types) > 1
                   else {"nvidia.com/use-gputype": types[0]})
    limits = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": str(memory_mib), "nvidia.com/gpucores": str(cores)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "cuda", "image": "busybox", "resources": {"limits": limits}}],
        },
    }


def kind_pod(kind: str, name: str) -> dict[str, Any]:
    """The benchmark's pod of ``kind``: ``prefer`` (3 types, firstAvailable) or ``single`` (one type)."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}: use one of {', '.join(KINDS)}")
    return typed_pod(name, PREFER_TYPES if kind == "prefer" else (SINGLE_TYPE,))


def inventory_doc(node: str = NODE) -> dict[str, Any]:
    """A fake NVIDIA host with the :data:`CARDS` (dralab/model inventory format)."""
    devices: list[dict[str, Any]] = []
    for type_name, product, count, memory in CARDS:
        for _ in range(count):
            i = len(devices)
            devices.append({"vendor": VENDOR, "name": f"gpu-{i}", "uuid": f"GPU-BENCH-{i:04d}-{type_name.upper()}",
                            "productName": product, "model": type_name.upper(), "memory": f"{memory}Mi",
                            "cores": 100, "physicalID": i, "index": i})
    return {"nodes": [{"name": node, "devices": devices}]}


def capacity(type_name: str) -> int:
    """How many benchmark pods the cards of ``type_name`` hold at once (memory or cores run out first)."""
    return sum(count * min(memory // POD_MEMORY_MIB, 100 // POD_CORES)
               for t, _, count, memory in CARDS if t == type_name)


def check_size(n: int) -> None:
    """Refuse a burst the single-type baseline cannot fit (it would measure Pending pods, not scheduling)."""
    if n > capacity(SINGLE_TYPE):
        raise click.BadParameter(f"N={n} does not fit the {capacity(SINGLE_TYPE)} pods the {SINGLE_TYPE} cards hold; "
                                 f"use --n {capacity(SINGLE_TYPE)} or less", param_hint="--n")


def spread(values: Sequence[float | None]) -> dict[str, Any]:
    """Median, min and max over the rounds (None where a round had no value)."""
    got = sorted(v for v in values if v is not None)
    if not got:
        return {"median": None, "min": None, "max": None, "runs": list(values)}
    return {"median": round(statistics.median(got), 4), "min": round(got[0], 4), "max": round(got[-1], 4),
            "runs": list(values)}


def judge(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Per kind the median and spread over the rounds of pods/s, p50 and p99; the ratio prefer/single of
    pods/s taken inside each round (both bursts saw the same load), then its median and spread.

    A burst with failures (a pod refused, or not bound in time) has no valid figure: its pods/s counts
    only the pods that made it, so it and its round's ratio are left out (None), and counted.
    """
    def valid(row: dict[str, Any], key: str) -> float | None:
        return None if row.get("failures") else row.get(key)

    out: dict[str, Any] = {}
    for kind in KINDS:
        out[kind] = {key: spread([valid(r[kind], key) for r in rounds]) for key in ("pods_per_s", "p50_s", "p99_s")}
        out[kind]["bursts_with_failures"] = sum(1 for r in rounds if r[kind].get("failures"))
    ratios = []
    for r in rounds:
        a, b = valid(r["prefer"], "pods_per_s"), valid(r["single"], "pods_per_s")
        ratios.append(round(a / b, 3) if a and b else None)
    out["prefer_to_single_pods_per_s"] = spread(ratios)
    return out


def allocation_mix(claims: list[dict[str, Any]]) -> dict[str, int]:
    """How many allocation results name each subrequest (``gpu/l4``...) or plain request (``gpu``):
    evidence that the prefer pods did fall back."""
    mix: dict[str, int] = {}
    for claim in claims:
        for res in (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []:
            mix[res.get("request", "?")] = mix.get(res.get("request", "?"), 0) + 1
    return dict(sorted(mix.items()))


# ---------------------------------------------------------------- the bench


async def _burst(client: Any, kind: str, n: int, scraper: Any, meter: Any) -> dict[str, Any]:
    """One burst of ``n`` pods of ``kind`` in a fresh namespace, then its clean-up (the next starts clean)."""
    from dralab_kit.bench.concurrency import BurstRunner, cpu_per_pod, summarize
    from dralab_kit.bench.phases import per_pod

    runner = BurstRunner(client)
    ns = await runner.namespace(f"{kind}-{n}")
    stem = f"p-{uuid.uuid4().hex[:4]}"
    pods = [kind_pod(kind, f"{stem}-{i}") for i in range(n)]
    before = await scraper.snapshot() if scraper else None
    cpu0 = meter.read() if meter else None
    burst = await runner.run(ns, pods, wait_running=False)
    cpu1 = meter.read() if meter else None
    row = summarize([burst])
    if scraper is not None and before is not None:
        row["phases"] = per_pod(before, await scraper.snapshot(), n)  # the components' own histograms, per pod
    if cpu0 is not None and cpu1 is not None:
        row["cpu_ms_per_pod"] = cpu_per_pod(cpu0, cpu1, n)
    claims = await runner._ok("GET", f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims")
    row["allocated_as"] = allocation_mix(claims.get("items") or [])
    await runner.clear(ns)
    return row


def _say(kind: str, row: dict[str, Any]) -> None:
    click.echo(f"[{kind}] N={row['n']} {row['pods_per_s']} pods/s p50 {row['p50_s']}s p99 {row['p99_s']}s "
               f"failures {row['failures']} as {row['allocated_as']} {row['first_error'][:160]}", err=True)


async def _bench(handle: Any, n: int, repeats: int) -> dict[str, Any]:
    from dralab_kit.bench.concurrency import async_client
    from dralab_kit.bench.cpu import CpuMeter
    from dralab_kit.bench.phases import Scraper

    scraper = Scraper.for_cluster(handle)
    meter = CpuMeter.for_cluster(handle)
    rounds: list[dict[str, Any]] = []
    async with async_client(handle) as client:
        # cold: the first burst of each kind after the cluster came up, kept apart from the judged rounds
        cold = {}
        for kind in KINDS:
            cold[kind] = await _burst(client, kind, n, scraper, meter)
            _say(f"cold {kind}", cold[kind])
        for r in range(repeats):
            order = KINDS if r % 2 == 0 else KINDS[::-1]  # alternate who goes first
            row: dict[str, Any] = {"order": list(order), "load_average": [round(x, 2) for x in os.getloadavg()]}
            for kind in order:
                row[kind] = await _burst(client, kind, n, scraper, meter)
                _say(kind, row[kind])
            rounds.append(row)
    return {"cold": cold, "rounds": rounds, "judged": judge(rounds)}


@click.command()
@click.option("--out", default=DEFAULT_OUT, show_default=True, help="folder for prefer.json")
@click.option("--quick", is_flag=True, help=f"N={N_QUICK}, one round")
@click.option("--n", "size", type=click.IntRange(min=1), default=None, help=f"pods per burst (default {N_FULL})")
@click.option("--repeats", type=click.IntRange(min=1), default=None,
              help=f"judged rounds, each a burst of each kind taking turns (default {REPEATS_FULL}, quick 1)")
@click.option("--keep", is_flag=True, help="leave the benchmark's cluster running (for debugging)")
def prefer(out: str, quick: bool, size: int | None, repeats: int | None, keep: bool) -> None:
    """Bursts of N pods with 3-way firstAvailable claims against N single-type pods: pods/s, p50/p99.

    Runs on a throw-away cluster of its own (one KWOK node: 1 L4, 1 H100, 5 A100 fake GPUs).

    \b
    Example:
      dralab bench prefer --quick --out /tmp/results
    """
    from dralab_kit.bench.concurrency import own_cluster
    from dralab_kit.cluster import build

    build.require_binaries()
    n = size or (N_QUICK if quick else N_FULL)
    check_size(n)
    rounds = repeats or (1 if quick else REPEATS_FULL)
    started = time.monotonic()
    load_before = [round(x, 2) for x in os.getloadavg()]
    with own_cluster("prefer", keep=keep, inventory=inventory_doc()) as handle:
        result = asyncio.run(_bench(handle, n, rounds))
    result.update({
        "n": n, "repeats": rounds, "quick": quick,
        "prefer_types": ",".join(PREFER_TYPES), "single_type": SINGLE_TYPE,
        "node": {"cards": [{"type": t, "product": p, "devices": c, "memory_mib": m, "pods": capacity(t)}
                           for t, p, c, m in CARDS],
                 "pod_memory_mib": POD_MEMORY_MIB, "pod_cores": POD_CORES},
        "baseline": {"what": f"the same pods with nvidia.com/use-gputype {SINGLE_TYPE} (one type, an exactly request), "
                             "same bursts, taking turns in the same run"},
        "load_average": {"before": load_before, "after": [round(x, 2) for x in os.getloadavg()]},
        "duration_s": round(time.monotonic() - started, 1),
    })
    path = write_result(out, "prefer", result)
    j = result["judged"]
    ratio = j["prefer_to_single_pods_per_s"]
    click.echo(f"N={n}: prefer {j['prefer']['pods_per_s']['median']} pods/s, single "
               f"{j['single']['pods_per_s']['median']} pods/s, ratio {ratio['median']} "
               f"({ratio['min']}-{ratio['max']}) -> {path}")
