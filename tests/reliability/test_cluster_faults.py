"""Fault scenarios and a burst on a cluster of the suite's own (never the shared ``dralab`` cluster).

Reduced sizes (``--quick`` workloads, a 10 s claim grace period); ``dralab bench faults`` and
``dralab bench concurrency`` run the full sizes. Every scenario must end with zero leaked claims,
zero leaked capacity, no over-committed device and no stale or missing CDI spec.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import filelock
import pytest

from dralab_kit.bench import concurrency as conc
from dralab_kit.cluster import build
from dralab_kit.faults.context import Ctx
from dralab_kit.faults.engine import names_for, run_scenario
from dralab_kit.gobuild import cache_root

pytestmark = pytest.mark.integration

GRACE = 10


@pytest.fixture(scope="module")
def own_cluster() -> Iterator[Any]:
    if build.missing_binaries():
        cache_root().mkdir(parents=True, exist_ok=True)
        with filelock.FileLock(str(cache_root() / ".cluster-build.lock")):
            if build.missing_binaries():
                build.build(progress=False)
    with conc.own_cluster("rel", config={"webhook": {"claimGracePeriodSeconds": GRACE}}) as handle:
        yield handle


@pytest.fixture(scope="module")
def ctx(own_cluster) -> Iterator[Ctx]:
    c = Ctx(own_cluster, quick=True, grace=GRACE)
    yield c
    c.close()


def test_idle_cluster_audits_clean(ctx: Ctx) -> None:
    audit = ctx.audit()
    assert audit.clean, audit


@pytest.mark.parametrize("scenario", names_for("local"))
def test_scenario_ends_without_leaks(ctx: Ctx, scenario: str) -> None:
    row = run_scenario(ctx, scenario)
    assert row["leaked_claims"] == 0, row["detail"]
    assert row["leaked_capacity"] == 0, row["detail"]
    assert row["passed"], row["detail"]


def test_bursts_are_all_bound_and_the_figures_are_complete(own_cluster) -> None:
    result = asyncio.run(conc._bench(own_cluster, (1, 10), ()))
    assert result["n"] == [1, 10]
    assert result["failures"] == [0, 0], result["first_errors"]
    assert all(p is not None and p > 0 for p in result["pods_per_s"])
    assert all(a <= b for a, b in zip(result["p50_s"], result["p99_s"], strict=True))
    assert result["baseline"]["failures"] == [0, 0]
    assert ctx_clean(own_cluster)


def ctx_clean(handle: Any) -> bool:
    c = Ctx(handle, quick=True, grace=GRACE)
    try:
        return c.settle().clean
    finally:
        c.close()
