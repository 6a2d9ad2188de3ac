"""The webhook's own CA injection: only caBundle, per webhook, nothing when current (pure parts and a fake API)."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from dralab.errors import UserError
from dralab.webhook.controllers.cainject import CAInjector, Target, ca_patch, read_ca

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


class FakeAPI:
    def __init__(self, objects: dict[str, dict[str, Any]]) -> None:
        self.objects = objects
        self.patches: list[tuple[str, Any, str]] = []

    def get(self, path: str, missing_ok: bool = False) -> dict[str, Any] | None:
        return self.objects.get(path)

    def patch(self, path: str, body: Any, kind: str = "merge") -> dict[str, Any]:
        self.patches.append((path, body, kind))
        for hook in body["webhooks"]:
            for live in self.objects[path]["webhooks"]:
                if live["name"] == hook["name"]:
                    live["clientConfig"].update(hook["clientConfig"])
        return self.objects[path]


def test_inject_once_patches_stale_configurations_then_nothing(tmp_path: Path) -> None:
    (tmp_path / "ca.crt").write_bytes(CA)
    mutating, validating = Target.parse("mutating/d"), Target.parse("validating/d")
    api = FakeAPI({mutating.path: config(None), validating.path: config(B64)})
    injector = CAInjector(api, tmp_path / "ca.crt", [mutating, validating, Target.parse("validating/absent")])
    assert injector.inject_once() == 1
    assert [(p, k) for p, _, k in api.patches] == [(mutating.path, "strategic")]
    assert api.objects[mutating.path]["webhooks"][0]["matchConditions"]  # kept
    assert injector.inject_once() == 0  # current: no call at all
