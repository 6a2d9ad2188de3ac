"""A burst of concurrent pods against a ShareBudget on the local cluster: overshoot must be zero.

The pods select no node, so only admission is exercised and the shared cluster's devices stay
free for the labs running beside this test.
"""

from __future__ import annotations

import pytest

from dralab.model import budget as model
from dralab.util import wait_for
from dralab_kit.bench.pains import budget_burst

pytestmark = pytest.mark.integration

CLASS = "hami-vnpu-core.project-hami.io"
LIMITS = {"huawei.com/Ascend310P": 1, "huawei.com/Ascend310P-memory": "1024", "huawei.com/Ascend310P-core": "1"}


def test_burst_of_pods_never_overshoots_the_budget(cluster, namespace: str) -> None:
    kube = cluster.kube()
    try:
        result = budget_burst(
            kube, namespace, device_class=CLASS, limits=LIMITS, memory_mib=1024, budget_mib=6 * 1024, pods=20
        )
        assert result["errors"] == []
        assert result["admitted"] == result["expected_admitted"] == 6
        assert result["denied"] == 14 and result["claims"] == 6
        assert result["overshoot_bytes"] == 0
        assert "memory budget 6Gi, in use 6Gi, this pod requests 1Gi" in result["sample_denial"]
        path = f"/apis/{model.API_VERSION}/namespaces/{namespace}/{model.PLURAL}/burst"

        def status_caught_up():
            status = (kube.get(path, missing_ok=True) or {}).get("status") or {}
            return status if status.get("claims") == 6 else None

        status = wait_for(status_caught_up, 30, "the budget status to count the six claims", interval=0.2)
        assert status["used"]["memory"] == "6Gi"
        assert status["conditions"][0]["status"] == "False"
    finally:
        kube.close()
