"""The chart's admin-access objects against the local cluster's real apiserver, scheduler and controllers.

The diagnostics DaemonSet and its ResourceClaimTemplate, rendered by helm, are created in a test
namespace; the DaemonSet and resource-claim controllers make the pod and its claim, and the real
scheduler gives the claim a device a tenant holds. A second tenant then gets exactly the rest of
the device, so the admin claim took none of it. The namespace label is checked twice: by the
apiserver (a template in an unlabelled namespace is refused) and by the chart at install time
(helm's lookup, here through `helm template --dry-run=server`).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from dralab.util import wait_for
from dralab_kit.cluster.api import ClusterHandle
from dralab_kit.provision.chart import chart_dir

from ..helpers import GROUP, VERSION, allocation, claim_pod, resource_claim

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ADMIN_LABEL = "resource.kubernetes.io/admin-access"


@pytest.fixture(scope="module")
def helm() -> Path:
    from dralab_kit.provision.tools import ensure_helm

    return ensure_helm()


def diagnostics_values(device_class_name: str, node: str) -> dict[str, Any]:
    """Only the diagnostics part of the chart, on ``node``, for the test driver's class."""
    return {
        "webhook": {"enabled": False},
        "driver": {"enabled": False},
        "deviceClasses": {"create": False},
        "runtimeClasses": [],
        "diagnostics": {"enabled": True, "device": {"deviceClassName": device_class_name},
                        "nodeSelector": {"kubernetes.io/hostname": node},
                        "image": {"repository": "busybox", "tag": "1.36"}},
    }  # fmt: skip


def helm_template(helm: Path, values: dict[str, Any], namespace: str, *extra: str) -> subprocess.CompletedProcess:
    release = f"diag-{namespace[-5:]}"
    return subprocess.run(
        [str(helm), "template", release, str(chart_dir()), "--namespace", namespace, *extra, "-f", "-"],
        input=yaml.safe_dump(values), capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def rendered(helm: Path, values: dict[str, Any], namespace: str, kinds: set[str]) -> list[dict[str, Any]]:
    out = helm_template(helm, values, namespace)
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d and d["kind"] in kinds]


def label_for_admin_access(k8s_client, namespace: str) -> None:
    client.CoreV1Api(k8s_client).patch_namespace(namespace, {"metadata": {"labels": {ADMIN_LABEL: "true"}}})


def test_the_namespace_label_is_required_by_the_apiserver_and_by_the_chart(
    helm: Path, cluster: ClusterHandle, k8s_client, namespace: str
) -> None:
    values = diagnostics_values("gpu.example.com", cluster.nodes[0])
    (template,) = rendered(helm, values, namespace, {"ResourceClaimTemplate"})
    custom = client.CustomObjectsApi(k8s_client)
    with pytest.raises(client.ApiException) as refused:
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaimtemplates", template,
                                               dry_run="All")  # fmt: skip
    assert refused.value.status in (403, 422)
    assert ADMIN_LABEL in refused.value.body, refused.value.body

    kubeconfig = ("--dry-run=server", "--kubeconfig", str(cluster.kubeconfig))
    stopped = helm_template(helm, values, namespace, *kubeconfig)
    assert stopped.returncode != 0
    assert "templates/validate.yaml" in stopped.stderr, stopped.stderr
    assert f"kubectl label namespace {namespace} {ADMIN_LABEL}=true" in stopped.stderr, stopped.stderr

    label_for_admin_access(k8s_client, namespace)
    assert helm_template(helm, values, namespace, *kubeconfig).returncode == 0
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaimtemplates", template, dry_run="All")


def claims_of(custom, namespace: str, component: str) -> list[dict[str, Any]]:
    return custom.list_namespaced_custom_object(
        GROUP, VERSION, namespace, "resourceclaims", label_selector=f"app.kubernetes.io/component={component}"
    )["items"]


def test_the_diagnostics_pod_gets_a_busy_device_and_takes_none_of_it(
    helm: Path, cluster: ClusterHandle, k8s_client, namespace: str, shared_device: str
) -> None:
    core, apps = client.CoreV1Api(k8s_client), client.AppsV1Api(k8s_client)
    custom = client.CustomObjectsApi(k8s_client)
    label_for_admin_access(k8s_client, namespace)

    def tenant(name: str, memory: str) -> dict[str, Any]:
        claim = resource_claim(name, shared_device, count=1, capacity={"memory": memory, "cores": "50"})
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaims", claim)
        core.create_namespaced_pod(namespace, claim_pod(name, {"resourceClaimName": name}))
        return wait_for(lambda: allocation(custom.get_namespaced_custom_object(
            GROUP, VERSION, namespace, "resourceclaims", name)), 60, f"{name}'s claim allocated")  # fmt: skip

    first = tenant("tenant-a", "16000Mi")
    assert first["devices"]["results"][0]["device"] == "npu-0-0"

    objs = rendered(helm, diagnostics_values(shared_device, cluster.nodes[0]), namespace,
                    {"ResourceClaimTemplate", "DaemonSet"})  # fmt: skip
    for obj in objs:
        if obj["kind"] == "ResourceClaimTemplate":
            custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaimtemplates", obj)
        else:
            apps.create_namespaced_daemon_set(namespace, obj)
    admin = wait_for(
        lambda: [a for c in claims_of(custom, namespace, "diagnostics") if (a := allocation(c))],
        90, "the diagnostics pod's claim allocated",
    )  # fmt: skip
    (result,) = admin[0]["devices"]["results"]
    assert (result["device"], result["driver"], result.get("adminAccess")) == ("npu-0-0", shared_device, True)
    pods = core.list_namespaced_pod(namespace, label_selector="app.kubernetes.io/component=diagnostics").items
    assert [p.spec.node_name for p in pods] == [cluster.nodes[0]]

    # 16000Mi + 5525Mi and 50 + 50 cores are all of npu-0-0: this fits only if the admin claim took nothing
    rest = tenant("tenant-b", "5525Mi")
    assert rest["devices"]["results"][0]["device"] == "npu-0-0"
    assert rest["devices"]["results"][0]["consumedCapacity"] == {"memory": "5525Mi", "cores": "50"}
