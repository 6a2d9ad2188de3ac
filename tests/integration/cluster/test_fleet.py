"""A 20-node simulated fleet with churn: HAMi pods through the webhook, released and reallocated, nothing left.

Its own throw-away cluster (``--fleet 20x8``: every node's driver in one process, every stand-in in
another). Fill two pods per node, then two churn rounds that delete one pod per node and create one
per node; at the end no claim, no consumed capacity and no prepared claim may remain, every pod
must have run, and no node may have failed a Prepare.
"""

from __future__ import annotations

import asyncio
import os

import pytest

from dralab_kit.bench import fleet as bench
from dralab_kit.bench.concurrency import async_client
from dralab_kit.cluster import build
from dralab_kit.cluster.api import down, ensure_cluster

pytestmark = pytest.mark.integration

NODES = 20
POD = {"memory_mib": 4096, "cores": 25}


@pytest.fixture(scope="module")
def fleet_cluster():
    if build.missing_binaries():
        pytest.skip("cluster binaries not built (`dralab cluster build`)")
    name = f"it-fleet-{os.getpid() % 100000}"
    try:
        handle = ensure_cluster(name, devices=f"fleet:{NODES}x8")
        bench.wait_fleet_slices(handle, NODES, timeout=180)
        yield handle
    finally:
        down(name, keep_logs=bool(os.environ.get("DRALAB_KEEP_LOGS")))


async def _churn(handle) -> tuple[list, str]:
    async with async_client(handle) as client:
        runner = bench.Runner(client, timeout=150)
        ns = await runner.namespace("fleet-churn")
        batches = [await bench._batch(runner, ns, "dralab", "f", 2 * NODES, POD)]
        for r in range(2):
            await bench._delete_pods(runner, ns, [f"f-{i}" for i in range(r * NODES, (r + 1) * NODES)])
            batches.append(await bench._batch(runner, ns, "dralab", f"c{r}", NODES, POD))
        events = (await client.get(f"/api/v1/namespaces/{ns}/events")).json().get("items") or []
        await runner.clear(ns, kube_wait=150)
    # a pod the scheduler retries (FailedScheduling) is the scheduler's business; any other warning (a failed
    # Prepare, a driver not registered yet: `up` waits for every node's registration, the webhook's) is the fleet's
    warnings = [f"{e['involvedObject'].get('name')}: {e.get('reason')}: {e.get('message', '')[:200]}"
                for e in events if e.get("type") == "Warning" and e.get("reason") != "FailedScheduling"]
    return batches, "\n".join(warnings)


def test_fleet_churn_leaves_nothing_behind(fleet_cluster) -> None:
    slices = fleet_cluster.kube().list("/apis/resource.k8s.io/v1/resourceslices").get("items") or []
    assert sorted({s["spec"]["pool"]["name"] for s in slices}) == sorted(fleet_cluster.nodes)  # one pool per node

    batches, warnings = asyncio.run(_churn(fleet_cluster))

    for batch in batches:
        assert batch.failures == 0, batch.first_error
        assert len(batch.running) == batch.n  # every pod's claims were prepared and the pod ran
    assert not warnings
    fleet = bench.Fleet(fleet_cluster, NODES, timeout=120)
    bench._wait_released(fleet, 120)
    assert fleet.leaks() == {"claims": 0, "capacity": 0, "prepared": 0}
