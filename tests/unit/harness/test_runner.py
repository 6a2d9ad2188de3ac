"""The runner on an in-memory cluster: failures fail, collectors and cleanup run, skips say why."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from harness.resources import Ref
from harness.results import ERROR, FAILED, PARTIAL, PASSED, SKIPPED
from harness.runner import LAB_LABEL, LabRunner
from harness.testing import FakeCluster, refusal

SLICE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceSlice",
    "metadata": {"name": "node-a-slice"},
    "spec": {"driver": "d.example", "nodeName": "node-a",
             "devices": [{"name": "dev-0", "attributes": {"uuid": {"string": "UUID-0"}}}]},
}  # fmt: skip

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "${pod}", "annotations": {"use-uuid": "${uuid}"}},
    "spec": {"containers": [{"name": "c", "image": "busybox"}]},
}

CAPTURE = {"capture": {"resource": {"kind": "ResourceSlice", "fieldSelector": "spec.driver=d.example"},
                       "values": {"uuid": "items[0].spec.devices[name=dev-0].attributes.uuid.string"}}}  # fmt: skip


def _run(runner: LabRunner) -> list[Any]:
    results = [runner.run_step(step) for step in runner.lab.steps]
    runner.finish()
    return results


def test_captures_substitute_into_later_manifests(write_lab, make_env, cluster: FakeCluster) -> None:
    cluster.apply(SLICE)
    lab = write_lab(
        [
            {"id": "discover", "try": [CAPTURE]},
            {"id": "deploy", "try": [{"apply": {"file": "pod.yaml", "vars": {"pod": "p1"}}},
                                     {"assert": {"resource": "Pod/p1",
                                                 "match": {"metadata": {"annotations": {"use-uuid": "UUID-0"}}}}}]},
        ],
        files={"pod.yaml": POD},
    )  # fmt: skip
    runner = LabRunner(lab, make_env(), "run-1")
    first, second = (runner.run_step(s) for s in lab.steps)
    assert (first.status, second.status) == (PASSED, PASSED), (first.reason, second.reason)
    pod = cluster.get(Ref("v1", "Pod", name="p1", namespace=runner.ctx.namespace))
    assert pod["metadata"]["annotations"]["use-uuid"] == "UUID-0"
    assert "uuid = UUID-0" in first.ops[0].summary
    result = runner.finish()
    assert result.captured == {"uuid": "UUID-0"}


def test_a_failing_assertion_fails_the_step_runs_catch_and_finally_and_skips_the_rest(
    write_lab, make_env, cluster: FakeCluster
) -> None:
    lab = write_lab(
        [
            {"id": "make", "try": [{"apply": {"objects": [{"apiVersion": "v1", "kind": "ConfigMap",
                                                          "metadata": {"name": "cm"}, "data": {"k": "v"}}]}}]},
            {"id": "check", "try": [{"assert": {"resource": "ConfigMap/cm", "match": {"data": {"k": "other"}}},
                                     "timeout": "0.2s"}],
             "catch": [{"describe": {"resource": "ConfigMap"}}],
             "finally": [{"apply": {"object": {"apiVersion": "v1", "kind": "ConfigMap",
                                               "metadata": {"name": "finally-ran"}}}}]},
            {"id": "later", "try": [{"assert": {"resource": "ConfigMap/cm", "match": {}}}]},
        ],
        catch=[{"events": {}}],
    )  # fmt: skip
    runner = LabRunner(lab, make_env(), "run-2")
    ns = None
    make, check, later = (runner.run_step(s) for s in lab.steps)
    ns = runner.ctx.namespace
    assert make.status == PASSED
    assert check.status == FAILED
    assert 'data.k: expected "other", got "v"' in check.reason
    assert "not true after 0.2s" in check.reason
    assert [d.kind for d in check.diagnostics] == ["describe", "events"]
    assert "k: v" in check.diagnostics[0].text
    assert cluster.get(Ref("v1", "ConfigMap", name="finally-ran", namespace=ns)) is not None
    assert later.status == SKIPPED
    assert later.reason == "step 'check' failed earlier"


def test_errors_from_the_cluster_fail_the_step_as_errors(write_lab, make_env, cluster: FakeCluster) -> None:
    def refuse(_cluster: FakeCluster, obj: dict) -> None:
        if obj["kind"] == "Pod":
            raise refusal(403, "admission webhook denied the request: no")

    cluster.on_apply.append(refuse)
    lab = write_lab([{"id": "deploy", "try": [{"apply": {"file": "pod.yaml", "vars": {"pod": "p", "uuid": "u"}}}]},
                     {"id": "after", "try": [{"events": {}}]}], files={"pod.yaml": POD})  # fmt: skip
    runner = LabRunner(lab, make_env(), "run-3")
    deploy, after = _run(runner)
    assert deploy.status == FAILED
    assert "was refused: admission webhook denied the request: no" in deploy.reason
    assert after.status == SKIPPED


def test_expect_error_passes_when_the_cluster_refuses(write_lab, make_env, cluster: FakeCluster) -> None:
    def refuse(_cluster: FakeCluster, obj: dict) -> None:
        if obj["kind"] == "Pod":
            raise refusal(400, "gpumem-percentage cannot be expressed")

    cluster.on_apply.append(refuse)
    lab = write_lab([{"id": "deny", "try": [{"apply": {"file": "pod.yaml", "vars": {"pod": "p", "uuid": "u"},
                                                       "expectError": "cannot be expressed"}}]}],
                    files={"pod.yaml": POD})  # fmt: skip
    (deny,) = _run(LabRunner(lab, make_env(), "run-4"))
    assert deny.status == PASSED
    assert "refused as expected" in deny.ops[0].summary


def test_unknown_variable_at_run_time_is_an_error_not_a_crash(write_lab, make_env) -> None:
    lab = write_lab([{"id": "s", "try": [{"assert": {"resource": "ConfigMap/${name}", "match": {}}}]}],
                    vars={"name": "x"})  # fmt: skip
    runner = LabRunner(lab, make_env(), "run-5")
    runner.ctx.vars.pop("name")
    (step,) = _run(runner)
    assert step.status == ERROR
    assert "unknown variable ${name}" in step.reason


def test_capabilities_skip_steps_and_operations_with_the_reason(write_lab, make_env) -> None:
    lab = write_lab(
        [
            {"id": "hw", "requires": ["hardware"], "try": [{"events": {}}]},
            {"id": "mixed", "try": [{"events": {}}, {"exec-in-pod": {"pod": "p", "command": "true"},
                                                     "requires": ["container-exec"]}]},
            {"id": "only-exec", "try": [{"exec-in-pod": {"pod": "p", "command": "true"},
                                         "requires": ["container-exec"]}]},
            {"id": "after", "try": [{"events": {}}]},
        ]
    )  # fmt: skip
    hw, mixed, only_exec, after = _run(LabRunner(lab, make_env(capabilities=("node-files",)), "run-6"))
    assert hw.status == SKIPPED and "lacks hardware" in hw.reason
    assert mixed.status == PARTIAL and [o.status for o in mixed.ops] == [PASSED, SKIPPED]
    assert mixed.reason == "not on profile memory: try[1].exec-in-pod (needs container-exec)"
    assert only_exec.status == SKIPPED and "needs container-exec, which profile memory lacks" in only_exec.reason
    assert after.status == PASSED  # a capability skip does not stop the lab


def test_lab_not_for_this_profile_skips_every_step_without_touching_the_cluster(
    write_lab, make_env, cluster: FakeCluster
) -> None:
    lab = write_lab([{"id": "a", "try": [{"events": {}}]}], profiles=["kind"])
    (step,) = _run(LabRunner(lab, make_env(), "run-7"))
    assert step.status == SKIPPED
    assert step.reason == "lab demo runs on profiles kind, not on memory"
    assert not [c for c in cluster.calls if c[0] == "apply"]


def test_namespace_is_ephemeral_labelled_and_leftovers_are_removed(write_lab, make_env, cluster: FakeCluster) -> None:
    import socket

    gone = f"{socket.gethostname()}:99999999"  # no such process: a leftover
    alive = f"{socket.gethostname()}:1"  # a live process: another run in progress
    for name, who in (("lab-old", gone), ("lab-busy", alive)):
        meta = {"name": name, "labels": {LAB_LABEL: "demo"}, "annotations": {"dralab.io/owner": who}}
        cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": meta})
    lab = write_lab([{"id": "a", "try": [{"events": {}}]}], namespace={"prefix": "demo-ns", "labels": {"x": "y"}})
    runner = LabRunner(lab, make_env(), "run-8")
    runner.run_step(lab.steps[0])
    ns = runner.ctx.namespace
    assert ns.startswith("demo-ns-") and len(ns) == len("demo-ns-") + 5
    obj = cluster.get(Ref("v1", "Namespace", name=ns))
    assert obj["metadata"]["labels"] == {"x": "y", LAB_LABEL: "demo", "dralab.io/run": "run-8"}
    assert cluster.get(Ref("v1", "Namespace", name="lab-old")) is None
    assert cluster.get(Ref("v1", "Namespace", name="lab-busy")) is not None
    assert obj["metadata"]["annotations"]["dralab.io/owner"].endswith(f":{os.getpid()}")
    result = runner.finish()
    assert cluster.get(Ref("v1", "Namespace", name=ns)) is None
    assert result.cleanup[-1].summary == f"namespace {ns} deleted"


def test_cleanup_runs_after_a_failure_and_deletes_applied_objects(write_lab, make_env, cluster: FakeCluster) -> None:
    lab = write_lab(
        [{"id": "a", "try": [{"apply": {"object": {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}}},
                             {"assert": {"resource": "Node/n1", "match": {"spec": {"x": 1}}}, "timeout": 0.1}]}],
        cleanup=[{"apply": {"object": {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "cleanup-ran"}}}}],
    )  # fmt: skip
    runner = LabRunner(lab, make_env(), "run-9")
    (step,) = _run(runner)
    assert step.status == FAILED
    assert cluster.get(Ref("v1", "Node", name="n1")) is None  # applied objects are deleted at the end
    assert cluster.get(Ref("v1", "Node", name="cleanup-ran")) is None  # ... including what cleanup created
    assert [o.kind for o in runner.result.cleanup][:1] == ["apply"]


def test_wait_for_polls_until_a_controller_acts_and_measure_records_the_time(
    write_lab, make_env, cluster: FakeCluster
) -> None:
    polls = {"n": 0}

    def controller(c: FakeCluster) -> None:
        polls["n"] += 1
        for key, obj in list(c.objects.items()):
            if key[1] == "ConfigMap" and polls["n"] >= 3:
                obj.setdefault("data", {})["ready"] = "yes"

    cluster.on_read.append(controller)
    lab = write_lab([{"id": "a", "proves": ["r"], "try": [
        {"apply": {"object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}}}, "mark": "t0"},
        {"wait-for": {"resource": "ConfigMap/cm", "match": {"data": {"ready": "yes"}}}, "timeout": 5,
         "measure": {"since": "t0", "as": "ready_seconds"}, "evidence": "ready"}]}],
        proved=[{"id": "r", "claim": "it gets ready", "evidence": "data.ready"}])  # fmt: skip
    runner = LabRunner(lab, make_env(), "run-10")
    (step,) = _run(runner)
    assert step.status == PASSED, step.reason
    assert polls["n"] >= 3
    assert 0 <= runner.result.metrics["ready_seconds"] < 5
    row = runner.result.proved[0]
    assert row.status == PASSED
    assert row.live[0]["label"] == "ready" and row.live[0]["excerpt"] == {"data": {"ready": "yes"}}


def test_expect_pending_needs_the_event_and_an_unscheduled_pod(write_lab, make_env, cluster: FakeCluster) -> None:
    lab = write_lab([{"id": "p", "try": [
        {"apply": {"object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "c"}, "spec": {}}}},
        {"expect-pending": {"pod": "c", "message": "cannot allocate all claims"}, "timeout": 2}]}])  # fmt: skip
    emitted = {"done": False}

    def scheduler(c: FakeCluster) -> None:
        pods = [o for k, o in c.objects.items() if k[1] == "Pod"]
        if pods and not emitted["done"]:
            emitted["done"] = True
            ns = pods[0]["metadata"]["namespace"]
            c.add_event(ns, "Pod", "c", "FailedScheduling", "0/1 nodes are available: 1 cannot allocate all claims.")

    cluster.on_read.append(scheduler)
    (step,) = _run(LabRunner(lab, make_env(), "run-11"))
    assert step.status == PASSED, step.reason
    assert step.ops[1].excerpt["event"]["reason"] == "FailedScheduling"


def test_expect_pending_fails_when_the_pod_is_scheduled(write_lab, make_env, cluster: FakeCluster) -> None:
    lab = write_lab([{"id": "p", "try": [
        {"apply": {"object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "c"},
                              "spec": {"nodeName": "n"}}}},
        {"expect-pending": {"pod": "c"}, "timeout": 1}]}])  # fmt: skip
    (step,) = _run(LabRunner(lab, make_env(), "run-12"))
    assert step.status == FAILED
    assert "was scheduled to n" in step.reason


def _claim(cluster: FakeCluster, ns: str, uid_holder: dict) -> None:
    obj = cluster.apply({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                         "metadata": {"name": "claim-a", "namespace": ns}})  # fmt: skip
    uid_holder["uid"] = obj["metadata"]["uid"]
    cluster.set_status(Ref("resource.k8s.io/v1", "ResourceClaim", name="claim-a", namespace=ns), {"allocation": {
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                                                  "values": ["node-a"]}]}]}}})  # fmt: skip


def _write_cdi(node_dir: Path, uid: str) -> None:
    (node_dir / "cdi").mkdir(parents=True, exist_ok=True)
    spec = {"cdiVersion": "0.6.0", "kind": "k8s.d.example/npu",
            "devices": [{"name": uid, "containerEdits": {"env": ["NPU_MEM_QUOTA=8192", "NPU_PRIORITY=50"],
                                                         "deviceNodes": [{"path": "/dev/davinci0"}]}}],
            "containerEdits": {"env": ["COMMON=1"]}}  # fmt: skip
    (node_dir / "cdi" / f"k8s.d.example-npu_{uid}.yaml").write_text(json.dumps(spec))
    record = {"call": "NodePrepareResources", "claims": [{"name": "claim-a", "uid": uid}], "time": "t1",
              "cdiDeviceIDs": [f"k8s.d.example/npu={uid}"], "error": None}  # fmt: skip
    (node_dir / "kubelet-records.jsonl").write_text(json.dumps(record) + "\n")


def test_read_cdi_reads_the_claims_spec_and_captures(write_lab, make_env, cluster: FakeCluster, tmp_path: Path) -> None:
    lab = write_lab([{"id": "cdi", "try": [{"read-cdi": {"claim": "claim-a", "capture": {"quota": "env.NPU_MEM_QUOTA"},
                                                         "expect": {"env": {"NPU_PRIORITY": "50", "COMMON": "1"},
                                                                    "deviceNodes": ["/dev/davinci0"],
                                                                    "prepared": True}}}]}])  # fmt: skip
    env = make_env()
    runner = LabRunner(lab, env, "run-13")
    runner.start()
    holder: dict = {}
    _claim(cluster, runner.ctx.namespace, holder)
    _write_cdi(tmp_path / "nodes" / "node-a", holder["uid"])
    (step,) = _run(runner)
    assert step.status == PASSED, step.reason
    assert runner.result.captured["quota"] == "8192"
    assert step.ops[0].excerpt["files"] == [f"k8s.d.example-npu_{holder['uid']}.yaml"]


def test_read_cdi_absent_waits_for_the_spec_to_go(write_lab, make_env, cluster: FakeCluster, tmp_path: Path) -> None:
    node = tmp_path / "nodes" / "node-a"
    _write_cdi(node, "u-1")
    lab = write_lab([{"id": "gone", "try": [{"read-cdi": {"uid": "u-1", "node": "node-a", "absent": True},
                                             "timeout": 0.3}]}])  # fmt: skip
    (step,) = _run(LabRunner(lab, make_env(), "run-14"))
    assert step.status == FAILED
    assert "still on node node-a" in step.reason


def test_read_cdi_without_node_files_is_a_clear_error(write_lab, make_env) -> None:
    lab = write_lab([{"id": "c", "try": [{"read-cdi": {"uid": "u", "node": "n"}}]}])
    (step,) = _run(LabRunner(lab, make_env(capabilities=()), "run-15"))
    assert step.status == ERROR
    assert "needs the 'node-files' capability, which profile memory lacks" in step.reason


def test_run_with_claim_env_matches_the_probe_result(
    write_lab, make_env, cluster: FakeCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys
    import types

    seen = {}

    def run_probe(env: dict, vendor: str, steps: list[int] | None = None) -> dict:
        seen.update(env=env, vendor=vendor, steps=steps)
        return {"total_mib": int(env["NPU_MEM_QUOTA"]), "refused": {"request_mib": 2050, "used_mib": 6150}}

    fake = types.ModuleType("dralab.vcore")
    fake.run_probe = run_probe  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "dralab.vcore", fake)
    import dralab

    monkeypatch.setattr(dralab, "vcore", fake, raising=False)
    lab = write_lab([{"id": "probe", "try": [{"run-with-claim-env": {
        "claim": "claim-a", "vendor": "ascend", "steps": [2050, 2050, 2050, 2050],
        "expect": {"total_mib": 8192, "refused": {"used_mib": 6150}}}}]}])  # fmt: skip
    env = make_env(capabilities=("node-files", "host-probe"))
    runner = LabRunner(lab, env, "run-16")
    runner.start()
    holder: dict = {}
    _claim(cluster, runner.ctx.namespace, holder)
    _write_cdi(tmp_path / "nodes" / "node-a", holder["uid"])
    (step,) = _run(runner)
    assert step.status == PASSED, step.reason
    assert seen["vendor"] == "ascend" and seen["steps"] == [2050] * 4
    assert seen["env"]["NPU_MEM_QUOTA"] == "8192" and seen["env"]["COMMON"] == "1"


def test_exec_in_pod_runs_kubectl_and_parses_env(
    write_lab, make_env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import stat

    args_file = tmp_path / "kubectl-args"
    kubectl = tmp_path / "bin" / "kubectl"
    kubectl.parent.mkdir()
    kubectl.write_text(f'#!/bin/sh\necho "$@" > {args_file}\nprintf "NPU_MEM_QUOTA=8192\\nNPU_PRIORITY=50\\n"\n')
    kubectl.chmod(kubectl.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{kubectl.parent}:/usr/bin:/bin")
    lab = write_lab([{"id": "env", "try": [{"exec-in-pod": {
        "pod": "a", "container": "app", "command": "env", "parse": "env",
        "expect": {"exitCode": 0, "stdout": {"NPU_MEM_QUOTA": "8192"}}, "capture": {"prio": "stdout.NPU_PRIORITY"}},
        "requires": ["container-exec"]}]}])  # fmt: skip
    runner = LabRunner(lab, make_env(capabilities=("container-exec",)), "run-17")
    (step,) = _run(runner)
    assert step.status == PASSED, step.reason
    assert runner.result.captured == {"prio": "50"}
    assert args_file.read_text().split() == ["exec", "-n", runner.result.namespace, "a", "-c", "app", "--", "sh",
                                             "-c", "env"]  # fmt: skip


def test_namespaces_without_an_owner_are_stale_after_a_day() -> None:
    from harness.runner import is_stale

    old = {"metadata": {"creationTimestamp": "2026-01-01T00:00:00Z"}}
    assert is_stale(old, now=1767225600 + 2 * 86400)
    assert not is_stale(old, now=1767225600 + 3600)
    assert not is_stale({"metadata": {"deletionTimestamp": "x"}})
