"""Attack 4: outage scope. With the webhook down, only pods asking for accelerator resources the vendor
table knows are held up; every other pod, finalizer removals (UPDATE) and the namespaces dralab itself
needs (its own, kube-system, cert-manager) keep working.
"""

from __future__ import annotations

import base64
import uuid

import pytest

from dralab.config import parse_config
from dralab.kube import KubeError
from dralab.kube.paths import pods_path
from dralab.webhook.registration import webhook_configurations

from ._webhook import gpu_pod

OWN = "dralab-system"


def _configs(**webhook):
    return webhook_configurations(parse_config({"webhook": webhook}), url="https://127.0.0.1:1", service=None,
                                  ca_bundle=b"x", own_namespace=OWN)


def test_every_webhook_has_match_conditions_on_known_vendor_resources() -> None:
    for configuration in _configs():
        for hook in configuration["webhooks"]:
            conditions = hook.get("matchConditions") or []
            assert conditions, hook["name"]
            text = " ".join(c["expression"] for c in conditions)
            for domain in ("nvidia.com/", "huawei.com/", "hygon.com/"):
                assert domain in text, (hook["name"], domain)


def test_disabled_vendor_is_not_matched() -> None:
    cfg = parse_config({"vendors": {"enabled": ["ascend"]}})
    mutating, _ = webhook_configurations(cfg, url="https://127.0.0.1:1", service=None, ca_bundle=b"x",
                                         own_namespace=OWN)
    text = mutating["webhooks"][0]["matchConditions"][0]["expression"]
    assert "huawei.com/" in text and "nvidia.com/" not in text


def test_updates_go_to_no_webhook() -> None:
    for configuration in _configs():
        for hook in configuration["webhooks"]:
            for rule in hook["rules"]:
                assert rule["operations"] == ["CREATE"], hook["name"]


def test_dralab_and_cert_manager_namespaces_are_excluded() -> None:
    for configuration in _configs():
        for hook in configuration["webhooks"]:
            names = next(e for e in hook["namespaceSelector"]["matchExpressions"]
                         if e["key"] == "kubernetes.io/metadata.name")
            assert names["operator"] == "NotIn"
            assert {OWN, "kube-system", "cert-manager"} <= set(names["values"])


def _register_dead_webhooks(kube, namespace: str, suffix: str) -> list[tuple[str, str]]:
    """dralab's registration pointed at a closed port, scoped to ``namespace`` and renamed, so the shared
    cluster's real registration and other tests are untouched. Mutating webhooks run in name order: this
    one runs before the cluster's real dralab webhook would have converted the pod."""
    cfg = parse_config({"webhook": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}}})
    made = []
    for obj in webhook_configurations(cfg, url="https://127.0.0.1:1", service=None,
                                      ca_bundle=base64.b64decode(base64.b64encode(b"not a ca")), own_namespace=OWN):
        obj["metadata"]["name"] = f"a-sec-{suffix}"  # sorts before dralab-webhook: called before it converts
        for hook in obj["webhooks"]:
            hook["name"] = f"{suffix}.{hook['name']}"
        plural = "mutatingwebhookconfigurations" if obj["kind"].startswith("Mutating") else \
            "validatingwebhookconfigurations"
        path = f"/apis/admissionregistration.k8s.io/v1/{plural}"
        kube.create(path, obj)
        made.append((path, obj["metadata"]["name"]))
    return made


@pytest.mark.integration
def test_webhook_outage_holds_up_only_accelerator_pods(kube, namespace: str) -> None:
    suffix = uuid.uuid4().hex[:8]
    made = _register_dead_webhooks(kube, namespace, suffix)
    try:
        plain = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "plain"},
                 "spec": {"containers": [{"name": "c", "image": "busybox",
                                          "resources": {"limits": {"cpu": "100m", "memory": "64Mi"}}}]}}
        created = kube.create(pods_path(namespace), plain)
        assert created["metadata"]["name"] == "plain"
        # a finalizer removal is an UPDATE: it must not need the webhook either
        kube.patch(pods_path(namespace, "plain"), {"metadata": {"finalizers": ["example.com/x"]}})
        kube.patch(pods_path(namespace, "plain"), {"metadata": {"finalizers": None}})
        with pytest.raises(KubeError) as err:
            kube.create(pods_path(namespace), gpu_pod("accel"))
        assert "failed calling webhook" in err.value.message
    finally:
        for path, name in made:
            kube.delete(f"{path}/{name}")
