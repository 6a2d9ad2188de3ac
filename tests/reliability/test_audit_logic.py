"""The reliability suite's own logic: leak audits, burst figures, workloads and the report (no cluster)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

from dralab.config import default_config
from dralab.model.convert import Converter
from dralab.model.inventory import parse_inventory
from dralab_kit.bench import concurrency as conc
from dralab_kit.bench import report
from dralab_kit.faults import audit, workloads

pytestmark = pytest.mark.integration

DRIVER = "ascend.project-hami.io"


def claim(ns: str, name: str, uid: str, device: str = "npu-0-0", memory: str = "512Mi", cores: str = "2",
          allocated: bool = True, reserved: bool = True) -> dict:
    obj: dict = {"metadata": {"namespace": ns, "name": name, "uid": uid}, "status": {}}
    if allocated:
        obj["status"]["allocation"] = {"devices": {"results": [{
            "request": "npu", "driver": DRIVER, "pool": "bench-node", "device": device,
            "consumedCapacity": {"memory": memory, "cores": cores}}]}}
    if reserved:
        obj["status"]["reservedFor"] = [{"resource": "pods", "name": "p", "uid": "pod-uid"}]
    return obj


NPU = {"memory": {"value": "21525Mi"}, "cores": {"value": "100"}}
SLICES = [{"spec": {"driver": DRIVER, "pool": {"name": "bench-node"},
                    "devices": [{"name": f"npu-{i}-0", "capacity": NPU} for i in range(2)]}}]


def pod(ns: str, name: str, claims: list[str], phase: str = "Running", templated: list[str] | None = None) -> dict:
    return {
        "metadata": {"namespace": ns, "name": name, "uid": f"uid-{name}"},
        "spec": {"resourceClaims": [{"name": c, "resourceClaimName": c} for c in claims]
                 + [{"name": f"t{i}", "resourceClaimTemplateName": "tmpl"} for i, _ in enumerate(templated or [])]},
        "status": {"phase": phase, "resourceClaimStatuses": [{"name": f"t{i}", "resourceClaimName": t}
                                                             for i, t in enumerate(templated or [])]},
    }


def test_a_claim_without_a_live_pod_is_leaked_and_so_is_its_capacity() -> None:
    claims = [claim("a", "held", "u1"), claim("a", "orphan", "u2", memory="1Gi", cores="5")]
    pods = [pod("a", "p1", ["held"])]
    assert audit.leaked_claims(claims, pods) == ["a/orphan"]
    leaks = audit.capacity_leaks(claims, pods, SLICES)
    assert len(leaks) == 1
    assert leaks[0]["device"] == f"{DRIVER}/bench-node/npu-0-0"
    assert leaks[0]["leaked"] == {"cores": 5, "memory": 2**30}


def test_terminal_pods_hold_nothing_but_pods_being_deleted_still_do() -> None:
    claims = [claim("a", "c1", "u1"), claim("a", "c2", "u2")]
    done = pod("a", "done", ["c1"], phase="Succeeded")
    deleting = pod("a", "going", ["c2"])
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert audit.leaked_claims(claims, [done, deleting]) == ["a/c1"]


def test_template_claims_are_found_through_the_pod_status() -> None:
    claims = [claim("a", "gen-abc", "u1")]
    assert audit.leaked_claims(claims, [pod("a", "p", [], templated=["gen-abc"])]) == []


def test_same_name_in_another_namespace_does_not_hold_the_claim() -> None:
    assert audit.leaked_claims([claim("a", "c", "u1")], [pod("b", "p", ["c"])]) == ["a/c"]


def test_an_unallocated_claim_consumes_nothing() -> None:
    claims = [claim("a", "pending", "u1", allocated=False)]
    assert audit.capacity_leaks(claims, [], SLICES) == []
    assert audit.leaked_claims(claims, []) == ["a/pending"]


def test_a_leaked_exclusive_claim_leaks_the_whole_device() -> None:
    orphan = claim("a", "orphan", "u1", device="npu-1-0")
    del orphan["status"]["allocation"]["devices"]["results"][0]["consumedCapacity"]
    leaks = audit.capacity_leaks([orphan], [], SLICES)
    assert [leak["device"] for leak in leaks] == [f"{DRIVER}/bench-node/npu-1-0"]
    assert leaks[0]["leaked"] == {"cores": 100, "memory": 21525 * 2**20}


def test_overcommit_is_flagged_against_the_slice() -> None:
    slices = [{"spec": {"driver": DRIVER, "pool": {"name": "bench-node"}, "devices": [
        {"name": "npu-0-0", "capacity": {"memory": {"value": "21525Mi"}, "cores": {"value": "100"}}}]}}]
    fits = [claim("a", "c1", "u1", cores="60"), claim("a", "c2", "u2", cores="40")]
    assert audit.overcommitted(slices, fits) == []
    assert audit.overcommitted(slices, [*fits, claim("a", "c3", "u3", cores="1")]) == [
        f"{DRIVER}/bench-node/npu-0-0"]


def test_node_audit_finds_stale_and_missing_cdi_specs() -> None:
    claims = [claim("a", "live", "uid-live"), claim("a", "gone", "uid-gone")]
    pods = [pod("a", "p", ["live"])]
    files = [f"k8s.{DRIVER}-npu_common.yaml", f"k8s.{DRIVER}-npu_uid-gone.yaml"]
    assert audit.node_audit(files, claims, pods) == {"stale_cdi_specs": 1, "missing_cdi_specs": 1}
    files.append(f"k8s.{DRIVER}-npu_uid-live.yaml")
    files.remove(f"k8s.{DRIVER}-npu_uid-gone.yaml")
    assert audit.node_audit(files, claims, pods) == {"stale_cdi_specs": 0, "missing_cdi_specs": 0}


def test_audit_is_clean_only_without_any_finding() -> None:
    assert audit.Audit().clean
    assert not audit.Audit(node={"stale_cdi_specs": 1}).clean
    assert not audit.Audit(leaked_claims=["a/b"]).clean


def test_rollout_is_complete_only_when_every_replica_is_new_and_available() -> None:
    dep = {"metadata": {"generation": 2}, "status": {"observedGeneration": 2, "updatedReplicas": 3,
                                                     "availableReplicas": 3, "replicas": 3}}
    assert workloads.rolled_out(dep, 3)
    dep["status"]["replicas"] = 4  # an old pod is still there
    assert not workloads.rolled_out(dep, 3)
    assert not workloads.rolled_out(None, 3)


def test_the_benchmark_inventory_is_a_valid_inventory_of_eight_devices() -> None:
    inv = parse_inventory(yaml.safe_load(yaml.safe_dump(conc.inventory_doc())))
    assert [len(n.devices) for n in inv.nodes] == [8]
    assert conc.capacity_pods() >= max(conc.SIZES_FULL)


@pytest.mark.parametrize("factory", [lambda: conc.sharing_pod("p"), lambda: conc.sharing_pod(generate_name="g-")])
def test_the_sharing_pod_is_converted_to_one_claim_of_its_size(factory) -> None:
    cfg = default_config()
    conv = Converter(cfg.vendors, "claim", cfg.webhook.opt_out_label).convert(factory(), namespace="ns",
                                                                               request_uid="u")
    assert len(conv.objects) == 1
    req = conv.objects[0]["spec"]["devices"]["requests"][0]["exactly"]["capacity"]["requests"]
    assert req == {"memory": str(conc.POD_MEMORY_MIB * 2**20), "cores": str(conc.POD_CORES)}


def test_summaries_use_every_pod_and_the_time_the_bursts_took() -> None:
    bursts = [conc.Burst(n=2, latencies=[0.1, 0.3], running=[0.2, 0.4], completion_s=0.5, admitted=[0.05, 0.1]),
              conc.Burst(n=2, latencies=[0.2, 0.2], running=[], completion_s=0.5, failures=1, first_error="x")]
    row = conc.summarize(bursts)
    assert row["p50_s"] == 0.2 and row["p99_s"] == 0.3
    assert row["pods_per_s"] == 4.0
    assert row["failures"] == 1 and row["first_error"] == "x"
    assert row["admitted_p99_s"] == 0.1
    assert conc.summarize([conc.Burst(n=1)])["p50_s"] is None


def test_verdict_compares_the_largest_burst_with_ten() -> None:
    cols = {"n": [1, 10, 200], "pods_per_s": [5.0, 100.0, 79.0]}
    v = conc.verdict(cols)
    assert v["largest_n"] == 200 and v["ratio_largest_to_10"] == 0.79
    assert not v["flat"] and v["meets_rate"]
    assert conc.verdict({"n": [1, 10, 200], "pods_per_s": [5.0, 100.0, None]})["flat"] is False


def _results() -> dict:
    cols = {"n": [1, 10], "p50_s": [0.1, 0.5], "p99_s": [0.1, 0.9], "pods_per_s": [10.0, 20.0],
            "admitted_p50_s": [0.05, 0.25],
            "completion_s": [0.1, 0.5], "running_p50_s": [0.2, 0.6], "running_p99_s": [0.2, 1.0], "failures": [0, 0]}
    return {
        "concurrency": {**cols, "baseline": dict(cols), "verdict": conc.verdict(cols), "measured_at": "T",
                        "machine": {"cpus": 2}, "scheduler_qps": {"local": [500, 1000]}},
        "faults": {"scenarios": [{"name": "s1", "passed": True, "leaked_claims": 0, "leaked_capacity": 0,
                                  "detail": {"pods": 3, "final_audit": {}}},
                                 {"name": "s2", "passed": False, "leaked_claims": 2, "leaked_capacity": 1,
                                  "detail": {"error": "a|b"}}],
                   "passed": 1, "claim_grace_period_s": 10, "baseline": {"leaked_claims": 0}},
        "fuzz": {"targets": {"t": {"cases": 5, "passed": False, "problems": {"http_500": 2},
                                   "examples": {"http_500": "x`y"}}}},
        "other": {"measured_at": "T2"},
    }


def test_the_report_states_every_figure_and_verdict() -> None:
    text = report.render(_results(), {"concurrency": "results/concurrency.png"})
    assert "| faults | s1: no leaked claim or capacity | 0 / 0 | 0 / 0 | met |" in text
    assert "| faults | s2: no leaked claim or capacity | 2 / 1 | 0 / 0 | NOT met |" in text
    assert "| s2 | NOT met | 2 | 1 |" in text
    assert "| 10 | 0.5 | 0.9 | 0.25 | 0.5 | 20 | 0.6 | 0 |" in text
    assert "| fuzz | t: contract holds for every case | 2 of 5 broke it | 0 | NOT met |" in text
    assert "http_500: 2" in text
    assert "![concurrency](results/concurrency.png)" in text
    assert "### other" in text and "_Measured T2 (unknown run)" in text
    assert "a/b" in text  # a pipe inside a figure does not break the table


def test_the_report_says_what_was_not_measured() -> None:
    text = report.render({})
    assert text.count("Not measured: run `dralab bench") == len(report.ORDER)


def test_report_command_writes_the_file_and_refuses_broken_json(tmp_path: Path) -> None:
    from click.testing import CliRunner

    results = tmp_path / "results"
    results.mkdir()
    for name, data in _results().items():
        (results / f"{name}.json").write_text(json.dumps(data))
    out = tmp_path / "REPORT.md"
    run = CliRunner().invoke(report.report, ["--results", str(results), "--out", str(out)])
    assert run.exit_code == 0, run.output
    assert out.read_text().startswith("# dralab benchmark report")
    (results / "bad.json").write_text("{")
    run = CliRunner().invoke(report.report, ["--results", str(results), "--out", str(out)])
    assert run.exit_code != 0 and "bad.json is not valid JSON" in str(run.exception)


def test_nan_free_json_for_empty_series() -> None:
    row = conc.summarize([conc.Burst(n=3, failures=3)])
    assert all(not (isinstance(v, float) and math.isnan(v)) for v in row.values())
