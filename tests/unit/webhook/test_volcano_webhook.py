"""The Volcano Job admission path: dispatch, templates created once, denials, registration entry."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import anyio
import yaml

from dralab.config import parse_config
from dralab.kube.paths import templates_path
from dralab.webhook.registration import webhook_configurations
from dralab.webhook.server import build

JOB = Path(__file__).parent / "fixtures" / "volcano-job.yaml"


def _review(job: dict, uid: str = "u1", dry_run: bool = False) -> dict:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": uid, "kind": {"group": "batch.volcano.sh", "version": "v1alpha1", "kind": "Job"},
        "namespace": "team-a", "operation": "CREATE", "object": job, "dryRun": dry_run}}


def _mutate(webhook, review: dict) -> dict:
    return anyio.run(lambda: webhook.handler.mutate(review))["response"]


def test_job_is_patched_and_its_template_created_once(fake_api) -> None:
    webhook = build(parse_config({}), fake_api, janitor=False)
    job = yaml.safe_load(JOB.read_text())
    first = _mutate(webhook, _review(job))
    assert first["allowed"] is True
    patch = json.loads(base64.b64decode(first["patch"]))
    assert any(op["path"].startswith("/spec/tasks/0/template/spec/resourceClaims") for op in patch)
    (name,) = fake_api.names(templates_path("team-a"))
    assert name.startswith("dralab-ascend310p-")
    # a second Job with the same shapes reuses the template (409 is success)
    assert _mutate(webhook, _review(job, "u2"))["allowed"] is True
    assert fake_api.names(templates_path("team-a")) == [name]


def test_dry_run_creates_nothing(fake_api) -> None:
    webhook = build(parse_config({}), fake_api, janitor=False)
    assert _mutate(webhook, _review(yaml.safe_load(JOB.read_text()), dry_run=True))["allowed"] is True
    assert fake_api.names(templates_path("team-a")) == []


def test_bad_job_is_denied_naming_the_task(fake_api) -> None:
    webhook = build(parse_config({}), fake_api, janitor=False)
    job = yaml.safe_load(JOB.read_text())
    del job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"]["limits"]["huawei.com/Ascend310P"]
    response = _mutate(webhook, _review(job))
    assert response["allowed"] is False and response["status"]["code"] == 400
    assert response["status"]["message"].startswith("spec.tasks[0].template.spec.containers[0]")


def test_template_create_failure_denies(fake_api) -> None:
    fake_api.fail("create", nth=0)
    webhook = build(parse_config({}), fake_api, janitor=False)
    response = _mutate(webhook, _review(yaml.safe_load(JOB.read_text())))
    assert response["allowed"] is False and "ResourceClaimTemplate" in response["status"]["message"]


def test_registration_adds_the_volcano_entry_only_when_asked() -> None:
    args = {"url": "https://127.0.0.1:8443", "service": None, "ca_bundle": b"ca", "own_namespace": "dralab-system"}
    plain, _ = webhook_configurations(parse_config({}), **args)
    assert [h["name"] for h in plain["webhooks"]] == ["mutate.dralab.io"]
    mutating, _ = webhook_configurations(parse_config({"migration": {"volcanoJobs": True}}), **args)
    pod_hook, job_hook = mutating["webhooks"]
    assert job_hook["name"] == "mutate-volcano.dralab.io"
    assert job_hook["rules"][0]["apiGroups"] == ["batch.volcano.sh"] and job_hook["rules"][0]["resources"] == ["jobs"]
    assert job_hook["clientConfig"] == pod_hook["clientConfig"]
    assert job_hook["namespaceSelector"] == pod_hook["namespaceSelector"]
    assert "spec.tasks" in job_hook["matchConditions"][0]["expression"]


def test_a_job_a_share_budget_covers_is_refused(fake_api) -> None:
    """A Volcano Job's pods get their claims from templates, after admission: a budget cannot hold them."""
    from dralab.webhook.controllers.budgets import budgets_path

    webhook = build(parse_config({}), fake_api, janitor=False)
    job = yaml.safe_load(JOB.read_text())
    assert _mutate(webhook, _review(job))["allowed"] is True
    (name,) = fake_api.names(templates_path("team-a"))
    template = fake_api.objects[f"{templates_path('team-a')}/{name}"]
    device_class = template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"]
    fake_api.objects[f"{budgets_path('team-a')}/npus"] = {
        "apiVersion": "dralab.io/v1alpha1", "kind": "ShareBudget",
        "metadata": {"name": "npus", "namespace": "team-a", "generation": 1, "resourceVersion": "1"},
        "spec": {"deviceClassName": device_class, "memory": "64Gi"},
    }
    webhook = build(parse_config({}), fake_api, janitor=False)  # a fresh webhook: no cached budget answer
    denied = _mutate(webhook, _review(job, "u2"))
    assert denied["allowed"] is False and denied["status"]["code"] == 400
    assert f"ShareBudget of namespace team-a for {device_class}: this Volcano Job's claims" in (
        denied["status"]["message"])
