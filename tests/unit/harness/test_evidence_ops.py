"""Operations whose evidence could fail: delete of what is not there, Unprepare recorded, device capacity."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.ops import capacity_view
from harness.results import FAILED, PASSED
from harness.runner import LabRunner
from harness.testing import FakeCluster

CM = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}}


def _run(runner: LabRunner) -> list[Any]:
    results = [runner.run_step(step) for step in runner.lab.steps]
    runner.finish()
    return results


def test_delete_of_a_missing_object_fails_unless_missing_ok(write_lab, make_env) -> None:
    lab = write_lab([
        {"id": "make", "try": [{"apply": {"object": CM}}]},
        {"id": "ok", "try": [{"delete": {"resource": "ConfigMap/cm"}}]},
        {"id": "tolerated", "try": [{"delete": {"resource": "ConfigMap/cm", "missingOk": True}},
                                    {"delete": {"resource": {"kind": "Pod"}, "missingOk": True}}]},
        {"id": "again", "try": [{"delete": {"resource": "ConfigMap/cm"}}]},
    ])  # fmt: skip
    make, ok, tolerated, again = _run(LabRunner(lab, make_env(), "run-d"))
    assert (make.status, ok.status, tolerated.status) == (PASSED, PASSED, PASSED), tolerated.reason
    assert again.status == FAILED
    assert "nothing to delete: ConfigMap cm in demo-" in again.reason and "missingOk: true" in again.reason


def test_delete_of_an_empty_list_fails_unless_missing_ok(write_lab, make_env) -> None:
    lab = write_lab([{"id": "none", "try": [{"delete": {"resource": {"kind": "Pod"}}}]}])
    (step,) = _run(LabRunner(lab, make_env(), "run-e"))
    assert step.status == FAILED and "nothing to delete: no Pod" in step.reason


def _records(node_dir: Path, uid: str, calls: list[str]) -> None:
    node_dir.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"call": c, "claims": [{"uid": uid}], "time": f"t{i}", "error": None})
             for i, c in enumerate(calls)]  # fmt: skip
    (node_dir / "kubelet-records.jsonl").write_text("\n".join(lines) + "\n")


def test_read_cdi_absent_also_needs_the_unprepare_record(write_lab, make_env, tmp_path: Path) -> None:
    steps = [{"id": "gone", "try": [{"read-cdi": {"uid": "u-1", "node": "node-a", "absent": True,
                                                  "expect": {"unprepared": True}}, "timeout": 0.3}]}]  # fmt: skip
    node = tmp_path / "nodes" / "node-a"
    _records(node, "u-1", ["NodePrepareResources"])  # spec gone, but no Unprepare: a wipe, not a release
    (step,) = _run(LabRunner(write_lab(steps), make_env(), "run-u1"))
    assert step.status == FAILED and "unprepared: expected true, got false" in step.reason
    _records(node, "u-1", ["NodePrepareResources", "NodeUnprepareResources"])
    (step,) = _run(LabRunner(write_lab(steps), make_env(), "run-u2"))
    assert step.status == PASSED, step.reason
    assert step.ops[0].excerpt["unprepared"] is True


def _slice(devices: list[tuple[str, str, str]]) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
            "spec": {"driver": "d.example", "nodeName": "node-a", "pool": {"name": "node-a"},
                     "devices": [{"name": n, "capacity": {"memory": {"value": m}, "cores": {"value": c}}}
                                 for n, m, c in devices]}}  # fmt: skip


def _allocated(name: str, ns: str, device: str, consumed: dict[str, str] | None) -> dict[str, Any]:
    result: dict[str, Any] = {"driver": "d.example", "pool": "node-a", "device": device, "request": "r"}
    if consumed is not None:
        result["consumedCapacity"] = consumed
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name, "namespace": ns},
            "status": {"allocation": {"devices": {"results": [result]}}}}  # fmt: skip


def test_capacity_view_sums_consumed_capacity_per_device() -> None:
    slices = [_slice([("dev-0", "21525Mi", "100"), ("dev-1", "21525Mi", "100")])]
    claims = [
        _allocated("a", "ns1", "dev-0", {"memory": "8Gi", "cores": "50"}),
        _allocated("b", "ns2", "dev-0", {"memory": "8589934592", "cores": "30"}),
        _allocated("x", "ns1", "dev-1", None),  # exclusive: the whole device
        {"kind": "ResourceClaim", "metadata": {"name": "pending", "namespace": "n"}},  # not allocated
    ]
    view = capacity_view(slices, claims, "d.example")
    dev0 = view["devices"]["dev-0"]
    assert dev0["consumed"] == {"memory": str(16 * 2**30), "cores": "80"}
    assert dev0["free"] == {"memory": str(21525 * 2**20 - 16 * 2**30), "cores": "20"}
    assert dev0["claims"] == ["ns1/a", "ns2/b"]
    assert view["devices"]["dev-1"]["free"] == {"memory": "0", "cores": "0"}
    assert view["overcommitted"] == []
    claims.append(_allocated("c", "ns3", "dev-0", {"memory": "1Gi", "cores": "30"}))
    assert capacity_view(slices, claims, "d.example")["overcommitted"] == ["dev-0"]


def test_device_capacity_waits_for_the_expected_accounting(write_lab, make_env, cluster: FakeCluster) -> None:
    cluster.apply(_slice([("dev-0", "21525Mi", "100")]))
    cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    cluster.apply(_allocated("a", "other", "dev-0", {"memory": "8Gi", "cores": "50"}))
    lab = write_lab([{"id": "cap", "try": [{"device-capacity": {
        "driver": "d.example", "capture": {"free_cores": "devices.dev-0.free.cores"},
        "expect": {"devices": {"dev-0": {"free": {"memory": {"$quantity": "13333Mi"}, "cores": "50"},
                                         "claims": ["other/a"]}}}}, "evidence": "capacity back"}]}])  # fmt: skip
    runner = LabRunner(lab, make_env(), "run-c")
    (step,) = _run(runner)
    assert step.status == PASSED, step.reason
    assert runner.result.captured["free_cores"] == "50"
    assert step.ops[0].excerpt["devices"]["dev-0"]["claims"] == ["other/a"]
    cluster.apply(_allocated("b", "other", "dev-0", {"memory": "8Gi", "cores": "50"}))
    lab = write_lab(
        [
            {
                "id": "cap",
                "try": [
                    {
                        "device-capacity": {
                            "driver": "d.example",
                            "expect": {"devices": {"dev-0": {"free": {"cores": "50"}}}},
                        },
                        "timeout": 0.2,
                    }
                ],
            }
        ]
    )
    (step,) = _run(LabRunner(lab, make_env(), "run-c2"))  # fmt: skip
    assert step.status == FAILED and 'free.cores: expected "50", got "0"' in step.reason


def test_the_labs_cleanup_tolerates_what_is_already_gone(write_lab, make_env) -> None:
    lab = write_lab(
        [{"id": "a", "try": [{"events": {}}]}],
        cleanup=[
            {"delete": {"resource": {"kind": "Pod"}}},
            {"delete": {"resource": "ConfigMap/x", "missingOk": False}},
        ],
    )
    runner = LabRunner(lab, make_env(), "run-cl")
    _run(runner)
    first, second = runner.result.cleanup[:2]
    assert first.status == PASSED, first.error
    assert second.status == "error" and "nothing to delete" in second.error
