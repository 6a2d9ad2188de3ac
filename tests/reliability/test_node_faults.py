"""The node bench's faults on a real kubelet + containerd (profile ``node``), on a cluster of the
suite's own (``rel-reboot``): ``dralab bench node`` runs them all and records their figures; here the
reboot runs alone and must come back whole.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dralab_kit.bench import node as node_bench
from dralab_kit.cluster import api
from tests.integration.node.conftest import ensure_node_binaries

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("rel-reboot")]  # one cluster, one worker

NAME = "rel-reboot"


@pytest.fixture(scope="module")
def bench() -> Iterator[node_bench.Bench]:
    ensure_node_binaries()
    try:
        b = node_bench.Bench(api.ensure_cluster(NAME, real_node=True))
        yield b
        b.kube.close()
    finally:
        api.down(NAME, keep_logs=False)


def test_reboot_brings_the_pods_back_with_their_claims_and_quota_and_leaks_nothing(bench: node_bench.Bench) -> None:
    row = node_bench.fault_reboot(bench)
    assert row["same_claims"] == row["pods"] == 3, row
    assert row["same_env_and_preload"] and row["quota_inside"] == "NPU_MEM_QUOTA=1024", row
    assert row["prepared_again"] == 3 and row["missing_specs"] == [], row
    assert row["leaked"] == [], row
    assert row["ok"], row
    figures = ("node_off_seconds", "power_on_to_all_pods_running_seconds", "power_off_to_all_pods_running_seconds")
    off, on, total = (row[k] for k in figures)
    assert 0 < off < total and 0 < on < total, row
