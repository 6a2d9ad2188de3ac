"""Attacks 4 and 9 (chart part): the chart's webhook configurations keep the outage scope small, the
webhook's RBAC has only the verbs it uses, an admission policy lets it delete only claims dralab manages,
and the driver runs unprivileged with the fake backend."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from dralab.config import parse_config
from dralab.webhook.registration import webhook_configurations
from dralab_kit.provision.chart import chart_dir, config_from_values, merged_values


@pytest.fixture(scope="module")
def helm() -> Path:
    from dralab_kit.provision.tools import built_tool

    path = built_tool("helm")
    if path is None:
        pytest.skip("needs helm built from its Go module: run `make tools` once")
    return path


def render(helm: Path, values: dict[str, Any] | None = None, namespace: str = "dralab-system") -> list[dict]:
    out = subprocess.run([str(helm), "template", "dralab", str(chart_dir()), "--namespace", namespace, "-f", "-"],
                         input=yaml.safe_dump(values or {}), capture_output=True, text=True, check=True, timeout=120)
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def kinds(objs: list[dict], kind: str) -> list[dict]:
    return [o for o in objs if o["kind"] == kind]


@pytest.mark.parametrize("values", [{}, {"vendors": {"enabled": ["ascend"]}}])
def test_chart_webhooks_equal_dralabs_registration(helm: Path, values: dict) -> None:
    """Scope (matchConditions, CREATE only, excluded namespaces) is what dralab generates, not a copy."""
    objs = render(helm, values)
    ref = webhook_configurations(
        parse_config(config_from_values(merged_values(values))), url=None,
        service={"namespace": "dralab-system", "name": "dralab-webhook", "port": 443}, ca_bundle=b"ca",
        own_namespace="dralab-system",
    )
    for want in ref:
        (got,) = kinds(objs, want["kind"])
        assert [w["name"] for w in got["webhooks"]] == [w["name"] for w in want["webhooks"]]
        for g, w in zip(got["webhooks"], want["webhooks"], strict=True):
            for key in ("rules", "matchConditions", "namespaceSelector", "objectSelector", "failurePolicy"):
                assert g[key] == w[key], (w["name"], key)


def test_webhook_rbac_has_only_the_verbs_it_uses(helm: Path) -> None:
    objs = render(helm)
    (role,) = [r for r in kinds(objs, "ClusterRole") if r["metadata"]["name"] == "dralab-webhook"]
    granted = {(res, verb) for rule in role["rules"] for res in rule["resources"] for verb in rule["verbs"]}
    used = {("pods", v) for v in ("get", "list", "watch")} | {
        ("resourceclaims", v) for v in ("get", "list", "watch", "create", "patch", "delete")
    } | {("resourceclaimtemplates", "create")}
    extra = {g for g in granted if g not in used and g[0] not in ("sharebudgets", "sharebudgets/status")}
    assert not extra, f"verbs the webhook never uses: {sorted(extra)}"


def test_admission_policy_limits_the_webhook_to_managed_claims(helm: Path) -> None:
    objs = render(helm)
    sa = "system:serviceaccount:dralab-system:dralab-webhook"
    policies = [p for p in kinds(objs, "ValidatingAdmissionPolicy")
                if any(sa in c["expression"] for c in p["spec"].get("matchConditions") or [])
                and any("resourceclaims" in r["resources"] for r in p["spec"]["matchConstraints"]["resourceRules"])]
    assert len(policies) == 1, "one policy must bind the webhook's service account on resourceclaims"
    policy = policies[0]
    rules = policy["spec"]["matchConstraints"]["resourceRules"]
    assert any("DELETE" in r["operations"] for r in rules)
    text = " ".join(v["expression"] for v in policy["spec"]["validations"])
    assert "app.kubernetes.io/managed-by" in text and "oldObject" in text
    bindings = [b for b in kinds(objs, "ValidatingAdmissionPolicyBinding")
                if b["spec"]["policyName"] == policy["metadata"]["name"]]
    assert len(bindings) == 1 and bindings[0]["spec"]["validationActions"] == ["Deny"]


def test_driver_is_unprivileged_with_the_default_fake_backend(helm: Path) -> None:
    objs = render(helm)
    (ds,) = kinds(objs, "DaemonSet")
    ctx = ds["spec"]["template"]["spec"]["containers"][0]["securityContext"]
    assert ctx["privileged"] is False
    assert ctx["allowPrivilegeEscalation"] is False and ctx["capabilities"]["drop"] == ["ALL"]


def test_driver_with_fake_backend_stays_unprivileged_even_if_asked(helm: Path) -> None:
    objs = render(helm, {"driver": {"backend": "fake", "privileged": True}})
    (ds,) = kinds(objs, "DaemonSet")
    assert ds["spec"]["template"]["spec"]["containers"][0]["securityContext"]["privileged"] is False


@pytest.mark.integration
def test_admission_policy_denies_the_webhook_deleting_unmanaged_claims(
    helm: Path, cluster, kube, namespace: str
) -> None:
    """The chart's RBAC and policy applied to the real apiserver; requests impersonate the webhook's account."""
    import uuid

    from dralab.kube import Kube, KubeError
    from dralab.kube.paths import claims_path
    from dralab.util import wait_for

    release = f"sec-{uuid.uuid4().hex[:6]}"
    out = subprocess.run([str(helm), "template", release, str(chart_dir()), "--namespace", namespace],
                         capture_output=True, text=True, check=True, timeout=120)
    objs = [d for d in yaml.safe_load_all(out.stdout) if d]
    webhook = f"{release}-dralab-webhook"
    wanted = [o for o in objs if o["metadata"]["name"].startswith(webhook) and o["kind"] in (
        "ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")]
    assert len(wanted) == 4, [(o["kind"], o["metadata"]["name"]) for o in wanted]
    plural = {"ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
              "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
              "ValidatingAdmissionPolicy": "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies",
              "ValidatingAdmissionPolicyBinding":
                  "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"}
    spec = {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}
    for name, labels in (("managed", {"app.kubernetes.io/managed-by": "dralab"}), ("foreign", {})):
        kube.create(claims_path(namespace), {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                                             "metadata": {"name": name, "labels": labels}, "spec": spec})
    made = []
    as_webhook = Kube(kube.config, headers={"Impersonate-User": f"system:serviceaccount:{namespace}:{webhook}"})
    try:
        for obj in wanted:
            kube.create(plural[obj["kind"]], obj)
            made.append(f"{plural[obj['kind']]}/{obj['metadata']['name']}")

        def dry_delete(name: str) -> KubeError | None:
            try:
                # with a body the apiserver reads dryRun from the DeleteOptions, not the query
                as_webhook.request("DELETE", claims_path(namespace, name),
                                   body={"kind": "DeleteOptions", "apiVersion": "v1", "dryRun": ["All"]})
            except KubeError as exc:
                return exc
            return None

        def policy_denies() -> KubeError | None:
            err = dry_delete("foreign")
            return err if err is not None and "managed-by=dralab" in err.message else None

        try:
            denied = wait_for(policy_denies, 30, "the policy to deny the webhook deleting an unmanaged claim")
        except TimeoutError:
            raise AssertionError(f"not denied by the policy; last answer: {dry_delete('foreign')!r}") from None
        assert denied.status in (403, 422)
        assert dry_delete("managed") is None  # RBAC allows it and the policy lets it through
    finally:
        as_webhook.close()
        for path in reversed(made):
            kube.delete(path)
