"""``dralab bench caches``: what dralab's watch caches cost per object, and the monitor per scrape.

The webhook's janitor caches dralab's pods and claims, the monitor every claim and ResourceSlice,
and each node's driver (with its claim cache on) the claims of its node. Their memory is the
objects they hold. Here each cache is rebuilt in memory at fleet sizes from objects recorded on a
live fleet cluster (:mod:`dralab_kit.fixtures.recorded`), decoded from JSON as a watch decodes them,
and measured with ``tracemalloc``:

- **bytes per cached object**: claim, pod and slice, kept whole and kept as the informers keep them
  now (:func:`dralab.kube.informer.slim`: no ``managedFields``), the whole form being the baseline;
- **the monitor's scrape**: CPU of one ``/metrics`` answer (the allocation picture over every slice
  and claim, then its gauge families) at each number of claims, with the series it exports.

No cluster, no server: the figures are the caches' own, so they can be multiplied by a fleet's
object counts (README, "Scale").
"""

from __future__ import annotations

import gc
import json
import statistics
import time
import tracemalloc
from collections.abc import Callable
from functools import partial
from typing import Any

import click
from rich.console import Console

from dralab_kit.bench import DEFAULT_OUT
from dralab_kit.bench.common import parse_sizes, write_result

console = Console(stderr=True)

SIZES = (1_000, 10_000, 50_000)
SIZES_QUICK = (1_000, 5_000)
DEVICES_PER_NODE = 8
KINDS = ("claim", "pod", "slice")


# ---------------------------------------------------------------- objects at fleet scale


def _texts(kind: str, n: int) -> list[str]:
    """``n`` distinct JSON texts of the recorded ``kind`` (names, uids, nodes and pools made unique).

    Claim ``i`` is allocated gpu ``i % 8`` of node ``i // 8``; slice ``i`` is node ``i``'s.
    """
    from dralab_kit.fixtures.recorded import recorded

    base = recorded(kind)
    out = []
    for i in range(n):
        obj = json.loads(json.dumps(base))
        meta = obj["metadata"]
        meta["name"] = f"{kind}-{i}"
        meta["uid"] = f"{i:08d}-0000-4000-8000-{i:012d}"
        node = f"fleet-{i // DEVICES_PER_NODE if kind != 'slice' else i:05d}"
        if kind == "claim":
            for result in obj["status"]["allocation"]["devices"]["results"]:
                result["pool"], result["device"] = node, f"gpu-{i % DEVICES_PER_NODE}"
            for entry in obj["status"].get("devices") or []:
                entry["pool"], entry["device"] = node, f"gpu-{i % DEVICES_PER_NODE}"
            obj["status"]["reservedFor"][0]["name"] = f"pod-{i}"
        elif kind == "pod":
            obj["spec"]["nodeName"] = node
        else:
            obj["spec"]["nodeName"] = node
            obj["spec"]["pool"]["name"] = node
        out.append(json.dumps(obj))
    return out


def _held_bytes(build: Callable[[], Any]) -> tuple[Any, int]:
    """What ``build()`` returns and the bytes still allocated for it once it returned (tracemalloc)."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        made = build()
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return made, after - before


def bytes_per_object(kind: str, n: int) -> dict[str, float]:
    """Bytes per cached ``kind`` object, whole and slimmed, over a cache of ``n`` of them."""
    from dralab.kube.informer import Key, key_of, slim

    texts = _texts(kind, n)
    out: dict[str, float] = {"json_bytes": round(statistics.mean(len(t) for t in texts), 1)}

    def cache_of(shape: Callable[[Any], Any]) -> dict[Key, Any]:
        return {key_of(o): shape(o) for o in map(json.loads, texts)}

    for form, shape in (("whole", lambda o: o), ("slim", slim)):
        cache, held = _held_bytes(partial(cache_of, shape))
        assert len(cache) == n
        out[form] = round(held / n, 1)
        del cache
    out["saved"] = round(1 - out["slim"] / out["whole"], 3) if out["whole"] else 0.0
    return out


def monitor_scrape(claims: int, repeats: int) -> dict[str, Any]:
    """One monitor scrape that computes afresh, over ``claims`` claims on ``claims / 8`` nodes: CPU (ms,
    median of ``repeats``) of the picture, of its gauges (with HAMi's names) and of the /metrics text."""
    from prometheus_client import CollectorRegistry, generate_latest

    from dralab.kube.informer import slim
    from dralab.monitor.allocation import compute
    from dralab.monitor.collector import families

    nodes = max(1, claims // DEVICES_PER_NODE)
    slices = [slim(json.loads(t)) for t in _texts("slice", nodes)]
    cached = [slim(json.loads(t)) for t in _texts("claim", claims)]
    parts: dict[str, list[float]] = {"picture": [], "gauges": [], "text": []}
    text = b""
    for _ in range(repeats):
        t0 = time.thread_time()
        alloc = compute(slices, cached)
        t1 = time.thread_time()
        fams = families(alloc)
        t2 = time.thread_time()
        registry = CollectorRegistry()
        registry.register(_Fixed(fams))
        text = generate_latest(registry)
        t3 = time.thread_time()
        for name, took in (("picture", t1 - t0), ("gauges", t2 - t1), ("text", t3 - t2)):
            parts[name].append(took)
    assert len(alloc.shares) == claims and alloc.unknown_devices == 0, "every claim must meet its slice's device"
    ms = {k: round(statistics.median(v) * 1000, 2) for k, v in parts.items()}
    total = sum(ms.values())
    series = sum(len(f.samples) for f in fams)
    dralab_only = sum(len(f.samples) for f in families(alloc, hami=False))
    return {"nodes": nodes, "claims": claims, **{f"{k}_ms": v for k, v in ms.items()},
            "scrape_ms": round(total, 2), "scrape_us_per_claim": round(total * 1000 / claims, 2),
            "series": series, "series_without_hami": dralab_only, "text_bytes": len(text)}


class _Fixed:
    """A collector answering given families (the bench times the exposition of one computed picture)."""

    def __init__(self, fams: list[Any]) -> None:
        self.fams = fams

    def collect(self) -> list[Any]:
        return self.fams


def measure(sizes: tuple[int, ...], repeats: int) -> dict[str, Any]:
    return {
        "per_object": {str(n): {k: bytes_per_object(k, n) for k in KINDS} for n in sizes},
        "monitor_scrape": [monitor_scrape(n, repeats) for n in sizes],
    }


# ---------------------------------------------------------------- command


@click.command()
@click.option("--out", default=DEFAULT_OUT, show_default=True, help="folder for caches.json")
@click.option("--quick", is_flag=True, help=f"{SIZES_QUICK} objects, one repeat")
@click.option("--sizes", default=None, metavar="N,N,...", help=f"objects per cache (default {SIZES})")
@click.option("--repeats", type=click.IntRange(min=1), default=3, show_default=True)
def caches(out: str, quick: bool, sizes: str | None, repeats: int) -> None:
    """Bytes per cached claim, pod and slice (whole and slim), and the monitor's CPU per scrape.

    In memory, from recorded objects: no cluster.

    \b
    Example:
      dralab bench caches --quick --out /tmp/results
    """
    chosen = parse_sizes(sizes, "objects per cache") if sizes else (SIZES_QUICK if quick else SIZES)
    result = {"benchmark": "caches", "quick": quick, "repeats": 1 if quick else repeats,
              "unit": "bytes per object (tracemalloc); ms of thread CPU", **measure(chosen, 1 if quick else repeats)}
    path = write_result(out, "caches", result)
    for n, kinds in result["per_object"].items():
        console.print(f"{n} objects: " + ", ".join(
            f"{k} {v['whole']:.0f} -> {v['slim']:.0f} B" for k, v in kinds.items()), markup=False)
    for s in result["monitor_scrape"]:
        console.print(f"monitor scrape at {s['claims']} claims: {s['scrape_ms']} ms, {s['series']} series",
                      markup=False)
    click.echo(f"-> {path}")
