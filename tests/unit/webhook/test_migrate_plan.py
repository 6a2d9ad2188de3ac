"""``dralab migrate plan``: every topic of the read-only plan, and apply against the fake API."""

from __future__ import annotations

from typing import Any

from dralab.kube.paths import claims_path
from dralab.migrate.apply import apply_plan
from dralab.migrate.plan import Snapshot, build_plan, render_text
from dralab.model.vendors import load_vendor_table
from dralab.webhook.controllers.adoption import AdoptionSettings
from tests.unit.webhook.test_adoption import NOW, hami_claim, hami_pod

TABLE = load_vendor_table()
SETTINGS = AdoptionSettings(grace_seconds=30.0)


def _hook(name: str, service: str, resources: tuple[str, ...] = ("pods",), ns: str = "hami-system") -> dict[str, Any]:
    return {
        "name": name,
        "clientConfig": {"service": {"name": service, "namespace": ns}},
        "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": list(resources)}],
        "failurePolicy": "Ignore",
    }


def _webhook_config(name: str, *hooks: dict[str, Any], dralab: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if dralab:
        meta["labels"] = {"app.kubernetes.io/managed-by": "dralab"}
    return {"metadata": meta, "webhooks": list(hooks)}


def _snapshot() -> Snapshot:
    device_plugin_pod = {
        "metadata": {"name": "old", "namespace": "ns", "uid": "u0"},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
    }
    return Snapshot(
        pods=[device_plugin_pod, hami_pod("p", "u1", "ns-p-app-ascend310p")],
        claims=[hami_claim("ns-p-app-ascend310p"), hami_claim("ns-gone-app-ascend310p"),
                hami_claim("ns-mine-app-ascend310p", labels={"app.kubernetes.io/managed-by": "dralab"}),
                hami_claim("ns-unrelated", cls="other.example.com")],
        device_classes=[
            {"metadata": {"name": "hami-vnpu-core.project-hami.io"},
             "spec": {"selectors": [{"cel": {"expression": 'device.driver == "x"'}}]}},
            {"metadata": {"name": "gpu-extended"},
             "spec": {"extendedResourceName": "nvidia.com/gpu", "selectors": []}},
        ],
        mutating=[_webhook_config("hami-dra-webhook", _hook("mutate.hami.io", "hami-dra-webhook")),
                  _webhook_config("dralab", _hook("mutate.dralab.io", "dralab-webhook"), dralab=True),
                  _webhook_config("cert-manager",
                                  _hook("x.cert-manager.io", "cert-manager", ("secrets",), "cert-manager"))],
        validating=[_webhook_config("hami-dra-validate", _hook("validate.hami.io", "hami-dra-webhook"))],
    )


def test_plan_lists_every_topic() -> None:
    plan = build_plan(_snapshot(), TABLE, SETTINGS, NOW).as_dict()
    assert plan["podsWithHamiResources"][0]["pod"] == "ns/old"
    assert plan["podsWithHamiResources"][0]["fields"] == ["spec.containers[0].resources.limits[nvidia.com/gpu]"]
    assert plan["hamiDraPods"] == [{"pod": "ns/p", "claims": ["ns-p-app-ascend310p"]}]
    fates = {c["claim"]: (c["origin"], c["fate"].split(":")[0]) for c in plan["claims"]}
    assert fates == {
        "ns/ns-p-app-ascend310p": ("hami-dra", "adopt"),
        "ns/ns-gone-app-ascend310p": ("hami-dra", "delete"),
        "ns/ns-mine-app-ascend310p": ("dralab", "kept (dralab's janitor owns it)"),
    }
    assert {w["name"] for w in plan["webhooks"]} == {"hami-dra-webhook", "dralab", "hami-dra-validate"}
    assert plan["summary"] == {"podsWithHamiResources": 1, "hamiDraPods": 1, "claims": 3, "claimsToAdopt": 1,
                               "claimsToDelete": 1, "conflicts": 3}


def test_plan_names_the_conflicts() -> None:
    conflicts = build_plan(_snapshot(), TABLE, SETTINGS, NOW).conflicts
    assert any("hami-dra-webhook" in c and "both mutate" in c for c in conflicts)
    assert any("gpu-extended" in c and "extendedResourceName nvidia.com/gpu" in c for c in conflicts)
    assert any("hami-vnpu-core.project-hami.io exists (not dralab's)" in c for c in conflicts)


def test_plan_actions_and_text() -> None:
    plan = build_plan(_snapshot(), TABLE, SETTINGS, NOW)
    kinds = sorted((a["action"], a.get("claim") or a.get("name")) for a in plan.actions)
    assert kinds == [("adopt-claim", "ns/ns-p-app-ascend310p"), ("delete-claim", "ns/ns-gone-app-ascend310p"),
                     ("delete-webhook-configuration", "hami-dra-validate"),
                     ("delete-webhook-configuration", "hami-dra-webhook")]
    text = render_text(plan)
    assert "adopt-claim ns/ns-p-app-ascend310p (owner ns/p)" in text and "conflicts:" in text


def test_no_dralab_webhook_means_no_double_mutation_conflict() -> None:
    snap = _snapshot()
    snap.mutating = snap.mutating[:1]
    assert not any("both mutate" in c for c in build_plan(snap, TABLE, SETTINGS, NOW).conflicts)


def test_apply_adopts_deletes_and_keeps_webhooks_unless_asked(fake_api) -> None:
    snap = _snapshot()
    path = claims_path("ns")
    for c in snap.claims:
        fake_api.objects[f"{path}/{c['metadata']['name']}"] = c
    fake_api.objects["/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/hami-dra-webhook"] = (
        snap.mutating[0]
    )
    plan = build_plan(snap, TABLE, SETTINGS, NOW)
    lines = apply_plan(fake_api, plan, snap)
    assert "adopted ns/ns-p-app-ascend310p (owner ns/p)" in lines
    assert "deleted ns/ns-gone-app-ascend310p" in lines
    assert "kept MutatingWebhookConfiguration/hami-dra-webhook (pass --remove-hami-webhooks)" in lines
    assert "ns-gone-app-ascend310p" not in fake_api.names(path)
    owner = fake_api.objects[f"{path}/ns-p-app-ascend310p"]["metadata"]["ownerReferences"][0]
    assert owner["uid"] == "u1"
    lines = apply_plan(fake_api, plan, snap, remove_webhooks=True)
    assert "deleted MutatingWebhookConfiguration/hami-dra-webhook" in lines
