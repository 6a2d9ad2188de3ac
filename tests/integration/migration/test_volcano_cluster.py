"""Volcano Jobs through the real apiserver: the project's Job CRD, dralab's webhook, templates created."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from dralab.kube import Kube, KubeError
from dralab.kube.paths import templates_path
from dralab.util import wait_for
from dralab.webhook.volcano import volcano_webhook

pytestmark = pytest.mark.integration

JOB = Path(__file__).parents[2] / "unit" / "webhook" / "fixtures" / "volcano-job.yaml"
ADMISSION = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"


@pytest.fixture(scope="module")
def api(cluster) -> Any:
    kube = Kube.from_kubeconfig(cluster.kubeconfig)
    yield kube
    kube.close()


def jobs_path(namespace: str, name: str | None = None) -> str:
    base = f"/apis/batch.volcano.sh/v1alpha1/namespaces/{namespace}/jobs"
    return f"{base}/{name}" if name else base


@pytest.fixture
def volcano_webhook_for(api: Kube, namespace: str):
    """dralab's Volcano webhook entry, registered for this test's namespace only (the server is the cluster's)."""
    pod_hook = api.get(f"{ADMISSION}/dralab-webhook")["webhooks"][0]
    hook = volcano_webhook(pod_hook)
    hook["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
    name = f"dralab-volcano-{namespace}"[:63]
    api.create(ADMISSION, {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
                           "metadata": {"name": name}, "webhooks": [hook]})
    yield
    api.delete(f"{ADMISSION}/{name}")


def _job(namespace: str) -> dict[str, Any]:
    job = yaml.safe_load(JOB.read_text())
    job["metadata"]["namespace"] = namespace
    return job


def test_job_tasks_get_claim_templates(api: Kube, namespace: str, volcano_webhook_for: None) -> None:
    wait_for(lambda: api.get("/apis/batch.volcano.sh/v1alpha1"), 60, "the Volcano Job CRD served")

    def converted_on_dry_run() -> dict[str, Any] | None:
        try:
            out = api.create(jobs_path(namespace), _job(namespace), dry_run=True)
        except KubeError as exc:
            # 404: the CRD's resource is not served yet; 500: the webhook is (re)starting
            if exc.status in (404, 500):
                return None
            raise
        spec = out["spec"]["tasks"][0]["template"]["spec"]
        return out if spec.get("resourceClaims") else None

    wait_for(converted_on_dry_run, 60, "the Volcano webhook registered and answering")
    assert api.list(templates_path(namespace))["items"] == []  # a dry run creates no template

    stored = api.create(jobs_path(namespace), _job(namespace))
    tasks = stored["spec"]["tasks"]
    names = set()
    for task in tasks[:2]:
        spec = task["template"]["spec"]
        assert spec["containers"][0]["resources"] == {"claims": [{"name": "main-ascend310p"}]}
        names.add(spec["resourceClaims"][0]["resourceClaimTemplateName"])
        assert task["template"]["metadata"]["labels"]["hami.io/dra"] == "true"
    assert "resourceClaims" not in tasks[2]["template"]["spec"]
    (name,) = names
    template = api.get(templates_path(namespace, name))
    request = template["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert request["capacity"]["requests"] == {"cores": "25", "memory": str(4096 * 2**20)}


def test_job_denied_with_the_task_field(api: Kube, namespace: str, volcano_webhook_for: None) -> None:
    wait_for(lambda: api.get("/apis/batch.volcano.sh/v1alpha1"), 60, "the Volcano Job CRD served")
    bad = copy.deepcopy(_job(namespace))
    bad["spec"]["tasks"][1]["template"]["spec"]["containers"][0]["resources"]["limits"][
        "huawei.com/Ascend310P-core"] = "150"

    def denied() -> str | None:
        try:
            api.create(jobs_path(namespace), bad, dry_run=True)
        except KubeError as exc:
            return exc.message if exc.status == 400 else None
        return None  # admitted unconverted: the registration has not reached the apiserver yet

    message = wait_for(denied, 60, "the bad Job denied")
    assert "spec.tasks[1].template.spec.containers[0].resources.limits[huawei.com/Ascend310P-core]" in message
