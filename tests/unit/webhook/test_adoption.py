"""Adopting HAMi-DRA's claims: each fingerprint rule, each plan rule, and one pass against the fake API."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from dralab.config import parse_config
from dralab.kube.paths import claims_path
from dralab.model.vendors import load_vendor_table
from dralab.webhook.controllers import adoption
from dralab.webhook.controllers.adoption import AdoptionSettings, fingerprint, hami_dra_claim_name, plan
from dralab.webhook.metrics import Metrics

NOW = 1_767_225_600.0
TABLE = load_vendor_table()
SETTINGS = AdoptionSettings(grace_seconds=30.0)
ASCEND_SEL = (
    'device.driver == "ascend.project-hami.io" && device.attributes["ascend.project-hami.io"].type == "HAMivNPUCore"'
)
NVIDIA_SEL = 'device.attributes["hami-core-gpu.project-hami.io"].type == "hami-gpu"'


def hami_claim(
    name: str,
    *,
    ns: str = "ns",
    cls: str = "hami-vnpu-core.project-hami.io",
    selector: str = ASCEND_SEL,
    age: float = 60.0,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    reserved_for: list[str] | None = None,
    **meta_extra: Any,
) -> dict[str, Any]:
    """A claim the way HAMi-DRA creates it: no labels, no owner, one request with the vendor's type selector."""
    created = dt.datetime.fromtimestamp(NOW - age, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    meta: dict[str, Any] = {"name": name, "namespace": ns, "uid": f"c-{name}", "creationTimestamp": created,
                            "resourceVersion": "5", **meta_extra}
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    claim: dict[str, Any] = {
        "metadata": meta,
        "spec": {"devices": {"requests": [{"name": "npu", "exactly": {
            "deviceClassName": cls, "allocationMode": "ExactCount", "count": 1,
            "selectors": [{"cel": {"expression": selector}}],
        }}]}},
    }
    if reserved_for:
        claim["status"] = {"reservedFor": [{"resource": "pods", "name": "x", "uid": u} for u in reserved_for]}
    return claim


def hami_pod(name: str, uid: str, *claims: str, container: str = "app", dra_label: bool = True) -> dict[str, Any]:
    labels = {"hami.io/dra": "true"} if dra_label else {}
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": uid, "labels": labels},
        "spec": {
            "containers": [{"name": container}],
            "resourceClaims": [{"name": c, "resourceClaimName": c} for c in claims],
        },
    }


# -- HAMi-DRA's name scheme ---------------------------------------------------------------------


def test_name_scheme_short() -> None:
    assert hami_dra_claim_name("ns", "pod", "app", "ascend310p") == "ns-pod-app-ascend310p"
    assert hami_dra_claim_name("ns", "pod", "app", "") == "ns-pod-app"


def test_name_scheme_cut_to_63_with_a_hash() -> None:
    name = hami_dra_claim_name("a-rather-long-namespace", "a-rather-long-pod-name-0123456789", "app", "nvidia")
    assert len(name) == 63 and name[-9] == "-" and all(c in "0123456789abcdef" for c in name[-8:])
    assert name.startswith("a-rather-long-namespace-a-rather-long-pod-name")


# -- fingerprint rules ---------------------------------------------------------------------------


def test_fingerprint_matches_a_hami_dra_claim() -> None:
    mark = fingerprint(hami_claim("ns-p-app-ascend310p"), TABLE, SETTINGS)
    assert mark is not None and mark.vendor == "ascend"


def test_fingerprint_matches_nvidia_selector_without_driver_clause() -> None:
    claim = hami_claim("ns-p-app-nvidia", cls="hami-core-gpu.project-hami.io", selector=NVIDIA_SEL)
    assert fingerprint(claim, TABLE, SETTINGS).vendor == "nvidia"


def test_fingerprint_matches_a_cut_name() -> None:
    name = hami_dra_claim_name("ns", "p" * 60, "app", "ascend310p")
    assert fingerprint(hami_claim(name), TABLE, SETTINGS) is not None


@pytest.mark.parametrize(
    ("why", "claim"),
    [
        ("dralab's own", hami_claim("ns-p-app-ascend310p", labels={"app.kubernetes.io/managed-by": "dralab"})),
        ("already owned", hami_claim("ns-p-app-ascend310p", ownerReferences=[{"kind": "Pod", "uid": "u"}])),
        ("other class", hami_claim("ns-p-app-ascend310p", cls="gpu.example.com")),
        ("other selector", hami_claim("ns-p-app-ascend310p", selector='device.driver == "x"')),
        ("name outside the namespace", hami_claim("other-p-app-ascend310p")),
        ("no vendor suffix", hami_claim("ns-shared-claim")),
    ],
)
def test_fingerprint_rejects(why: str, claim: dict[str, Any]) -> None:
    assert fingerprint(claim, TABLE, SETTINGS) is None, why


def test_fingerprint_with_configured_labels_and_annotations() -> None:
    settings = AdoptionSettings(match_labels={"team": "ml"}, match_annotations={"created-by": "hami-dra"})
    plain = hami_claim("ns-p-app-ascend310p")
    marked = hami_claim("ns-p-app-ascend310p", labels={"team": "ml"}, annotations={"created-by": "hami-dra"})
    assert fingerprint(plain, TABLE, settings) is None
    assert fingerprint(marked, TABLE, settings) is not None


def test_fingerprint_follows_the_enabled_vendors() -> None:
    nvidia_only = load_vendor_table(enabled=["nvidia"])
    assert fingerprint(hami_claim("ns-p-app-ascend310p"), nvidia_only, SETTINGS) is None


# -- plan rules ----------------------------------------------------------------------------------


def test_claim_of_a_live_hami_dra_pod_is_adopted_by_it() -> None:
    out = plan([hami_claim("ns-p-app-ascend310p")], [hami_pod("p", "u1", "ns-p-app-ascend310p")],
               TABLE, SETTINGS, NOW)
    assert [(c["metadata"]["name"], p["metadata"]["uid"]) for c, p in out.adopt] == [("ns-p-app-ascend310p", "u1")]
    assert out.reap == []


def test_claim_referenced_by_a_pod_without_the_dra_label_is_left_alone() -> None:
    out = plan([hami_claim("ns-p-app-ascend310p")], [hami_pod("p", "u1", "ns-p-app-ascend310p", dra_label=False)],
               TABLE, SETTINGS, NOW)
    assert out.adopt == [] and out.reap == []


def test_old_orphan_is_reaped_young_one_waits() -> None:
    out = plan([hami_claim("ns-gone-app-ascend310p", age=60), hami_claim("ns-new-app-ascend310p", age=10)],
               [], TABLE, SETTINGS, NOW)
    assert [c["metadata"]["name"] for c in out.reap] == ["ns-gone-app-ascend310p"]
    assert out.next_check == pytest.approx(20.0)


def test_orphan_reserved_for_a_live_pod_is_held_not_reaped() -> None:
    claim = hami_claim("ns-gone-app-ascend310p", reserved_for=["u7"])
    other = hami_pod("unlabelled", "u7", dra_label=False)
    out = plan([claim], [other], TABLE, SETTINGS, NOW)
    assert out.reap == [] and [c["metadata"]["name"] for c in out.held] == ["ns-gone-app-ascend310p"]


def test_orphan_reserved_for_a_gone_pod_is_reaped() -> None:
    out = plan([hami_claim("ns-gone-app-ascend310p", reserved_for=["dead"])], [], TABLE, SETTINGS, NOW)
    assert len(out.reap) == 1


def test_claims_being_deleted_are_left_alone() -> None:
    claim = hami_claim("ns-gone-app-ascend310p", deletionTimestamp="2026-01-01T00:00:00Z")
    assert plan([claim], [], TABLE, SETTINGS, NOW).reap == []


def test_a_user_claim_that_is_not_hami_dra_shaped_is_never_reaped() -> None:
    user = hami_claim("ns-shared-claim", age=3600)
    assert plan([user], [], TABLE, SETTINGS, NOW).reap == []


def test_adoption_patch_makes_it_a_managed_owned_claim() -> None:
    patch = adoption.adoption_patch(hami_claim("ns-p-app-ascend310p"), hami_pod("p", "u1"))
    meta = patch["metadata"]
    assert meta["resourceVersion"] == "5"
    assert meta["ownerReferences"][0]["uid"] == "u1" and meta["ownerReferences"][0]["kind"] == "Pod"
    assert meta["labels"]["app.kubernetes.io/managed-by"] == "dralab"
    assert meta["labels"]["dralab.io/lifecycle"] == "claim"
    assert meta["labels"]["dralab.io/adopted-from"] == "hami-dra"


# -- configuration --------------------------------------------------------------------------------


def test_adoption_is_on_in_migration_mode_and_off_otherwise() -> None:
    assert parse_config({}).migration.adopts is False
    assert parse_config({"migration": {"enabled": True}}).migration.adopts is True
    assert parse_config({"migration": {"enabled": True, "adoptClaims": False}}).migration.adopts is False
    assert parse_config({"migration": {"adoptClaims": True}}).migration.adopts is True


def test_build_adopter_follows_the_config(fake_api) -> None:
    assert adoption.build_adopter(parse_config({}), fake_api) is None
    cfg = parse_config({"migration": {"enabled": True, "claimLabels": {"team": "ml"}, "graceSeconds": 5}})
    adopter = adoption.build_adopter(cfg, fake_api)
    assert adopter is not None and adopter.settings == AdoptionSettings({"team": "ml"}, {}, 5.0)
    assert adoption.build_adopter(cfg, None) is None


def test_bad_migration_settings_are_refused() -> None:
    from dralab.errors import UserError

    with pytest.raises(UserError, match="graceSeconds"):
        parse_config({"migration": {"graceSeconds": -1}})
    with pytest.raises(UserError, match="unknown key"):
        parse_config({"migration": {"adopt": True}})


# -- one pass against the fake API ----------------------------------------------------------------


def test_reconcile_adopts_and_reaps_after_checking_live_pods(fake_api) -> None:
    path = claims_path("ns")
    claims = [hami_claim("ns-p-app-ascend310p"), hami_claim("ns-gone-app-ascend310p"),
              hami_claim("ns-late-app-ascend310p")]
    for c in claims:
        fake_api.objects[f"{path}/{c['metadata']['name']}"] = c
    # "late": its pod exists but is not in the adopter's cache yet: must not be deleted
    fake_api.objects["/api/v1/namespaces/ns/pods/late"] = hami_pod("late", "u9", "ns-late-app-ascend310p")
    metrics = Metrics()
    adopter = adoption.Adopter(fake_api, TABLE, SETTINGS, metrics, clock=lambda: NOW)
    adopter.claims.items = {("ns", c["metadata"]["name"]): c for c in claims}
    adopter.pods.items = {("ns", "p"): hami_pod("p", "u1", "ns-p-app-ascend310p")}
    adopter.reconcile_once()
    assert fake_api.names(path) == ["ns-late-app-ascend310p", "ns-p-app-ascend310p"]
    adopted = fake_api.objects[f"{path}/ns-p-app-ascend310p"]["metadata"]
    assert adopted["ownerReferences"][0]["uid"] == "u1"
    assert adopted["labels"]["dralab.io/adopted-from"] == "hami-dra"
    assert (adopter.adopted, adopter.reaped) == (1, 1)
    assert b"dralab_janitor_claims_reaped_total 1.0" in metrics.render()
