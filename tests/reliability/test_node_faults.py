"""The fault engine's ``node`` scenarios on a real kubelet + containerd, on a cluster of the suite's own
(``rel-reboot``): ``dralab bench node`` runs them all and records their figures; here the reboot runs
alone, through the same engine and final leak audit, and must come back whole.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dralab_kit.bench.faults import grace_for
from dralab_kit.cluster import api
from dralab_kit.faults.context import Ctx
from dralab_kit.faults.engine import names_for, run_scenario
from tests.integration.node.conftest import ensure_node_binaries

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("rel-reboot")]  # one cluster, one worker

NAME = "rel-reboot"


@pytest.fixture(scope="module")
def ctx() -> Iterator[Ctx]:
    ensure_node_binaries()
    try:
        # the cluster runs the shipped configuration, so its grace period
        c = Ctx(api.ensure_cluster(NAME, real_node=True), quick=True, grace=grace_for(quick=False))
        yield c
        c.close()
    finally:
        api.down(NAME, keep_logs=False)


def test_the_node_profile_runs_the_engines_scenarios_and_the_local_ones_share_the_driver_fault() -> None:
    node, local = names_for("node"), names_for("local")
    assert node == ["driver_killed_during_prepare", "kubelet_restart", "containerd_restart",
                    "cdi_wiped_kubelet_restart", "reboot"]
    assert "driver_killed_during_prepare" in local and "reboot" not in local


def test_reboot_brings_the_pods_back_with_their_claims_and_quota_and_leaks_nothing(ctx: Ctx) -> None:
    result = run_scenario(ctx, "reboot")
    assert result["leaked_claims"] == result["leaked_capacity"] == 0, result
    row = result["detail"]
    assert row["same_claims"] == row["pods"] == 3, row
    assert row["same_env_and_preload"] and row["quota_inside"] == "NPU_MEM_QUOTA=1024", row
    assert row["prepared_again"] == 3 and row["missing_specs"] == [], row
    assert row["leaked"] == [], row
    assert result["passed"], result
    figures = ("node_off_seconds", "power_on_to_all_pods_running_seconds", "power_off_to_all_pods_running_seconds")
    off, on, total = (row[k] for k in figures)
    assert 0 < off < total and 0 < on < total, row
