"""``dralab bench node``'s pure parts: the objects it applies, its summary and its report section."""

from __future__ import annotations

from dralab_kit.bench.models.node import NodeResult
from dralab_kit.bench.node import summary
from dralab_kit.bench.sections.node import section
from dralab_kit.faults.target import claim_obj, pod_obj


def test_claim_pods_use_the_local_image_and_their_own_claim() -> None:
    pod = pod_obj("p1", "p1")
    assert pod["spec"]["containers"][0]["image"] == "dralab.local/lab:1.0"
    assert pod["spec"]["resourceClaims"] == [{"name": "npu", "resourceClaimName": "p1"}]
    assert "resourceClaims" not in pod_obj("p2", None)["spec"]
    request = claim_obj("p1")["spec"]["devices"]["requests"][0]["exactly"]
    assert request["capacity"]["requests"] == {"memory": "1Gi", "cores": "5"}


def test_summary_uses_nearest_rank_percentiles() -> None:
    values = [float(v) for v in range(1, 21)]
    assert summary(values) == {"n": 20, "p50": 10.0, "p99": 20.0, "min": 1.0, "max": 20.0}


def test_node_section_shows_latency_memory_faults_and_the_lab() -> None:
    res = {
        "kubelet": "v1.35.4",
        "containerd": "v2.2.9",
        "bring_up_seconds": 40.0,
        "pods": 20,
        "claim_apply_to_running_seconds": {"n": 20, "p50": 1.1, "p99": 2.0, "max": 2.0},
        "plain_apply_to_running_seconds": {"n": 20, "p50": 0.9, "p99": 1.5, "max": 1.5},
        "memory_idle": {"kubelet_mib": 76.0, "containerd_mib": 52.0, "shims_mib": 0.0},
        "memory_with_pods": {"kubelet_mib": 90.0, "containerd_mib": 60.0, "shims": 20, "shims_mib": 330.0},
        "faults": [{"name": "kubelet_restart", "passed": True, "leaked_claims": 0, "leaked_capacity": 0,
                    "detail": {"containers_kept": 3, "final_audit": {"leaked_claims": []}}},
                   {"name": "driver_killed_during_prepare", "passed": False, "leaked_claims": 1, "leaked_capacity": 0,
                    "detail": {}}],
        "lab20": {"status": "passed", "replay_wall_seconds": 45.0, "target_seconds": 60.0, "within_target": True,
                  "steps_seconds": 10.0},
    }  # fmt: skip
    text = "\n".join(section(NodeResult.model_validate(res)))
    assert "| pod with its own claim | 20 | 1.1 | 2 | 2 |" in text.replace(".0 ", " ")
    assert "shims (20)" in text
    assert "| kubelet_restart | met | 0 | 0 | containers_kept 3 |" in text
    assert "| driver_killed_during_prepare | NOT met | 1 | 0 |" in text
    assert "Lab 20 on the node: passed" in text and "met" in text


def test_node_section_says_how_long_a_reboot_kept_the_pods_away() -> None:
    reboot = {"pods": 3, "power_off_to_all_pods_running_seconds": 31.5, "node_off_seconds": 2.5,
              "power_on_to_node_healthy_seconds": 12.0, "power_on_to_all_pods_running_seconds": 29.0,
              "same_claims": 3, "same_env_and_preload": True, "leaked": []}
    row = {"name": "reboot", "passed": True, "leaked_claims": 0, "leaked_capacity": 0, "detail": reboot}
    text = "\n".join(section(NodeResult.model_validate({"bring_up_seconds": 44.0, "faults": [row]})))
    assert "| reboot | met |" in text
    assert "power-off to all 3 pods Running again 31.5 s, of which the node was off 2.5 s" in text
    assert "cold bring-up 44 s" in text and "leaked traces: 0 (met)" in text
    assert "Reboot" not in "\n".join(section(NodeResult.model_validate({"faults": [{"name": "kubelet_restart"}]})))


def test_a_node_result_from_before_the_one_fault_engine_reads_its_faults_as_rows() -> None:
    old = {"faults": {"reboot": {"ok": True, "pods": 3}, "kubelet_restart": {"ok": False, "containers_kept": 2}}}
    rows = NodeResult.model_validate(old).faults
    assert [(r.name, r.passed, r.detail) for r in rows] == [
        ("reboot", True, {"pods": 3}), ("kubelet_restart", False, {"containers_kept": 2})]
