"""The webhook's own CA injection: only caBundle, per webhook, nothing when current (pure parts and a fake API)."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from dralab.errors import UserError
from dralab.webhook.controllers.cainject import CAInjector, Target, ca_patch, read_ca
from dralab_kit.fixtures.fakeapi import FakeKube

CA = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
B64 = base64.b64encode(CA).decode()


def config(*bundles: str | None) -> dict[str, Any]:
    hooks = []
    for i, bundle in enumerate(bundles):
        client: dict[str, Any] = {"service": {"name": "w", "namespace": "ns"}}
        if bundle is not None:
            client["caBundle"] = bundle
        hooks.append({"name": f"h{i}.dralab.io", "clientConfig": client,
                      "matchConditions": [{"name": "m", "expression": "true"}]})
    return {"metadata": {"name": "dralab-webhook"}, "webhooks": hooks}


def test_the_patch_names_each_stale_webhook_and_carries_only_the_bundle() -> None:
    patch = ca_patch(config(None, B64, "b2xk"), CA)
    assert patch == {"webhooks": [
        {"name": "h0.dralab.io", "clientConfig": {"caBundle": B64}},
        {"name": "h2.dralab.io", "clientConfig": {"caBundle": B64}},
    ]}
    # matchConditions, rules and selectors are never in it: a strategic merge keyed by name keeps them
    assert "matchConditions" not in str(patch)


def test_nothing_to_patch_when_every_webhook_has_the_ca() -> None:
    assert ca_patch(config(B64, B64), CA) is None


@pytest.mark.parametrize("text", ["mutating", "webhooks/x", "validating/", "/x"])
def test_a_bad_target_says_how_to_write_one(text: str) -> None:
    with pytest.raises(UserError, match="mutating/NAME or validating/NAME"):
        Target.parse(text)


def test_targets_map_to_their_paths() -> None:
    assert Target.parse("validating/dralab-webhook").path == (
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/dralab-webhook")


def test_a_missing_or_empty_ca_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="cannot be read"):
        read_ca(tmp_path / "ca.crt")
    (tmp_path / "ca.crt").write_text("")
    with pytest.raises(UserError, match="no PEM certificate"):
        read_ca(tmp_path / "ca.crt")


def test_inject_once_patches_stale_configurations_then_nothing(tmp_path: Path) -> None:
    (tmp_path / "ca.crt").write_bytes(CA)
    mutating, validating = Target.parse("mutating/d"), Target.parse("validating/d")
    api = FakeKube({mutating.path: config(None), validating.path: config(B64)})
    injector = CAInjector(api, tmp_path / "ca.crt", [mutating, validating, Target.parse("validating/absent")])
    assert injector.inject_once() == 1
    assert [(c.path, c.patch) for c in api.calls if c.verb == "patch"] == [(mutating.path, "strategic")]
    assert api.objects[mutating.path]["webhooks"][0]["matchConditions"]  # kept
    calls = len(api.calls)
    assert injector.inject_once() == 0  # current: no patch at all
    assert [c.verb for c in api.calls[calls:]] == ["get", "get", "get"]
