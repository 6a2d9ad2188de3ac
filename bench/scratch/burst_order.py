"""Scratch: is the fleet's burst ratio (dralab ÷ baseline) the kind or the turn it runs in?

Why: on Kubernetes v1.37.2 the fleet bench's fills came out even (dralab ÷ baseline 1.00 at 200 nodes)
while its bursts did not (0.78 at 50 nodes, 0.73 at 200). The bench runs the burst once per kind, the
baseline first, so the kind and its turn are one. This runs bursts of 1,000 pods on one throw-away fleet
(the bench's own bring-up, burst and clear: :func:`dralab_kit.bench.fleet.measure_size` and
:func:`~dralab_kit.bench.fleet.burst`) in the order baseline, dralab, dralab, baseline, baseline, dralab,
so each kind bursts first, second and after itself, and keeps each burst's row, the webhook's new
connections per pod among them. Not a `dralab bench`: no target, one run, kept with its output for
README "Scale".

    .venv/bin/python bench/scratch/burst_order.py --nodes 50 --kubernetes v1.37.2 \
        --out bench/results/scratch/burst-order.json
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from dralab_kit.bench.concurrency import async_client
from dralab_kit.bench.fleet import Fleet, burst, measure_size
from dralab_kit.bench.phases import COUNTERS
from dralab_kit.bench.results import context

ORDER = ("baseline", "dralab", "dralab", "baseline", "baseline", "dralab")
KEPT = ("pods", "pods_per_s", "bound_p50_s", "bound_p99_s", "running_p99_s", "window_s", "failures", "retries",
        "duplicate_claims", "cpu_ms_per_pod", "dralab_cpu_ms_per_pod", "clear_s")
CONNECTIONS = COUNTERS["dralab_webhook_connections"]


def geometric_mean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


async def bursts(handle: Any, nodes: int, quick: bool, timeout: float, row: dict[str, Any]) -> None:
    """Every burst of :data:`ORDER` on one fleet, into ``row["bursts"]`` as each ends."""
    fleet = Fleet(handle, nodes, timeout)
    row.update(nodes=nodes, order=list(ORDER), bursts=[])
    async with async_client(handle) as client:
        for turn, kind in enumerate(ORDER):
            got = await burst(fleet, client, kind, quick)
            spent = got.get("spent_per_pod") or {}
            kept = {k: got.get(k) for k in KEPT}
            kept.update(turn=turn, kind=kind,
                        webhook_connections_per_pod=(spent.get(CONNECTIONS) or {}).get("calls_per_pod"),
                        apiserver_create_pod_ms_per_pod=(spent.get("apiserver: create pod") or {}).get("ms_per_pod"))
            row["bursts"].append(kept)


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Each kind's rate by turn, and the ratio of geometric means over its three bursts."""
    rates: dict[str, list[float]] = {"dralab": [], "baseline": []}
    for b in rows:
        rates[b["kind"]].append(float(b["pods_per_s"]))
    out: dict[str, Any] = {"pods_per_s_by_turn": {k: [round(r, 2) for r in v] for k, v in rates.items()}}
    if all(rates.values()):
        out["ratio_of_geometric_means"] = round(geometric_mean(rates["dralab"]) / geometric_mean(rates["baseline"]), 3)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=50)
    parser.add_argument("--kubernetes", default="v1.37.2")
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    row = measure_size(args.nodes, False, False, args.timeout, "template", run=bursts, kubernetes=args.kubernetes)
    result = {"context": context(False), "kubernetes": args.kubernetes, "row": row,
              "summary": summary(row.get("bursts") or [])}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result["summary"]))


if __name__ == "__main__":
    main()
