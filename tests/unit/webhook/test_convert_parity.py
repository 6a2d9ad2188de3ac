"""`dralab convert` decides as the webhook does: every held-in conversion case through both paths.

The CLI path is the real command (``dralab.cli.main``: exit code, stdout, stderr); the webhook path is
the admission handler of :func:`dralab.webhook.server.build` over the same config file. Both must
allow or deny alike, deny with the same message, and (when allowed) produce the same object.
"""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from dralab.cli import main
from dralab.config import load_config
from dralab.model import jsonpatch
from dralab.model.volcano import is_job
from dralab.webhook.cli import BUDGETS_NOTE
from dralab.webhook.server import build
from tests.unit.model.test_hami_dra_cases import CASES, build_job, build_pod

HAMI_RENAMED = Path(__file__).parents[1] / "model" / "fixtures" / "hami" / "hami-dra-renamed.yaml"


def _container(i: int, limits: dict[str, Any]) -> dict[str, Any]:
    return {"name": f"c{i}", "image": "busybox", "resources": {"limits": dict(limits)}}


def _pod(name: str, containers: int = 1, namespace: str = "team-a", **limits: Any) -> dict[str, Any]:
    limits = limits or {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1024"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"containers": [_container(i, limits) for i in range(containers)]}}


def _renamed_pod(limits: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "renamed", "namespace": "team-a"},
            "spec": {"containers": [_container(0, limits)]}}


# (id, object, config document, HAMi device config or None): beyond the HAMi-DRA cases, the settings
# `dralab convert` used to ignore (maxClaimsPerPod, the HAMi config, excluded namespaces, names)
EXTRA: list[tuple[str, dict[str, Any], dict[str, Any], Path | None]] = [
    ("200-containers-default-cap", _pod("wide", 200), {}, None),
    ("17-containers-default-cap", _pod("wide", 17), {}, None),
    ("16-containers-default-cap", _pod("wide", 16), {}, None),
    ("3-containers-cap-2", _pod("wide", 3), {"webhook": {"maxClaimsPerPod": 2}}, None),
    ("2-containers-cap-2", _pod("wide", 2), {"webhook": {"maxClaimsPerPod": 2}}, None),
    ("template-lifecycle-over-cap", _pod("wide", 3), {"webhook": {"lifecycle": "template", "maxClaimsPerPod": 2}},
     None),
    ("excluded-namespace", _pod("sys", 200, namespace="kube-system"), {}, None),
    ("configured-excluded-namespace", _pod("sys", 200, namespace="batch"),
     {"webhook": {"excludeNamespaces": ["batch"]}}, None),
    ("bad-pod-name", _pod("Bad_Name"), {}, None),
    ("bad-namespace", _pod("p", namespace="Team_A"), {}, None),
    ("opted-out", {**_pod("out", 200), "metadata": {"name": "out", "namespace": "team-a",
                                                     "labels": {"dralab.io/convert": "false"}}}, {}, None),
    ("hami-config-renamed", _renamed_pod({"corp.example/npu-310p": "1", "corp.example/npu-310p-memory": "2048"}),
     {}, HAMI_RENAMED),
    ("hami-config-percentage-denied",
     _renamed_pod({"corp.example/vgpu": "1", "corp.example/vgpu-memory-pct": "50"}), {}, HAMI_RENAMED),
    ("hami-config-cap", {**_renamed_pod({}), "spec": {"containers": [
        _container(i, {"corp.example/npu-310p": "1"}) for i in range(3)]}},
     {"webhook": {"maxClaimsPerPod": 2}}, HAMI_RENAMED),
    ("hami-config-old-name-ignored", _renamed_pod({"nvidia.com/gpu": "1"}), {}, HAMI_RENAMED),
]


def _case_config(case: dict[str, Any]) -> dict[str, Any]:
    doc: dict[str, Any] = {"migration": {"volcanoJobs": True}}  # as registered for Jobs (the webhook sees them)
    if case.get("config"):
        doc["vendors"] = {k: v for k, v in case["config"].items() if k in ("overrides", "enabled")}
    if case.get("lifecycle"):
        doc["webhook"] = {"lifecycle": case["lifecycle"]}
    return doc


PARAMS = [
    pytest.param(build_job(c["job"]) if "job" in c else build_pod(c["pod"]), _case_config(c), None, id=c["id"])
    for c in CASES
] + [pytest.param(obj, doc, hami, id=name) for name, obj, doc, hami in EXTRA]


def _review(obj: dict[str, Any]) -> dict[str, Any]:
    kind = ({"group": "batch.volcano.sh", "version": "v1alpha1", "kind": "Job"} if is_job(obj)
            else {"group": "", "version": "v1", "kind": "Pod"})
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "parity-1", "kind": kind, "namespace": obj["metadata"]["namespace"], "operation": "CREATE",
        "object": copy.deepcopy(obj), "dryRun": False}}


def webhook_decides(obj: dict[str, Any], config: Path, hami: Path | None) -> tuple[bool, str, dict[str, Any]]:
    """(allowed, message, the object as admitted) from the webhook's admission handler."""
    hook = build(load_config(config, hami), None, janitor=False)  # no API: converts, creates nothing
    response = anyio.run(lambda: hook.handler.mutate(_review(obj)))["response"]
    if not response["allowed"]:
        return False, response["status"]["message"], {}
    patch = json.loads(base64.b64decode(response["patch"])) if "patch" in response else []
    return True, "", jsonpatch.apply(copy.deepcopy(obj), patch)


def cli_decides(obj: dict[str, Any], config: Path, hami: Path | None, capsys: pytest.CaptureFixture[str],
                tmp_path: Path) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``dralab convert -f FILE --config CONFIG [--hami-config HAMI]``."""
    pod_file = tmp_path / "input.yaml"
    pod_file.write_text(yaml.safe_dump(obj, sort_keys=False))
    argv = ["convert", "-f", str(pod_file), "--config", str(config)]
    if hami is not None:
        argv += ["--hami-config", str(hami)]
    capsys.readouterr()
    with pytest.raises(SystemExit) as done:
        main(argv)
    out = capsys.readouterr()
    return int(done.value.code or 0), out.out, out.err


@pytest.mark.parametrize(("obj", "doc", "hami"), PARAMS)
def test_cli_and_webhook_decide_alike(obj: dict[str, Any], doc: dict[str, Any], hami: Path | None,
                                      tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "dralab.yaml"
    config.write_text(yaml.safe_dump(doc))
    allowed, message, admitted = webhook_decides(obj, config, hami)
    code, out, err = cli_decides(obj, config, hami, capsys, tmp_path)
    meta = obj["metadata"]
    what = "Volcano Job" if is_job(obj) else "pod"
    if not allowed:
        assert code != 0 and out == "", f"the webhook denies ({message}) but dralab convert exits {code}"
        assert err.strip().splitlines()[-1] == f"error: {what} {meta['namespace']}/{meta['name']}: {message}"
        return
    assert code == 0, f"the webhook allows but dralab convert refuses: {err}"
    first = next(iter(yaml.safe_load_all(out)))
    assert first == admitted, "dralab convert prints another object than the webhook admits"


def test_200_containers_are_refused_as_the_webhook_refuses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's case: the preview printed 200 claims and exited 0 where the webhook denies."""
    config = tmp_path / "dralab.yaml"
    config.write_text("{}\n")
    code, out, err = cli_decides(_pod("wide", 200), config, None, capsys, tmp_path)
    assert code == 2 and out == ""
    assert "200" in err and "webhook.maxClaimsPerPod" in err and "at most" not in out


def test_budgets_not_consulted_is_noted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "dralab.yaml"
    config.write_text("{}\n")
    code, _, err = cli_decides(_pod("one"), config, None, capsys, tmp_path)
    assert code == 0 and f"note: {BUDGETS_NOTE}" in err


def test_volcano_job_is_left_alone_unless_the_webhook_is_registered_for_jobs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = build_job({"name": "j", "namespace": "team-a", "tasks": [
        {"name": "main", "containers": [{"limits": {"nvidia.com/gpu": 1}}]}]})
    config = tmp_path / "dralab.yaml"
    config.write_text("migration: {volcanoJobs: false}\n")
    code, out, err = cli_decides(job, config, None, capsys, tmp_path)
    assert code == 0 and list(yaml.safe_load_all(out)) == [job]
    assert "migration.volcanoJobs: true" in err
    config.write_text("migration: {volcanoJobs: true}\n")
    code, out, _ = cli_decides(job, config, None, capsys, tmp_path)
    assert code == 0 and [d["kind"] for d in yaml.safe_load_all(out)] == ["Job", "ResourceClaimTemplate"]
