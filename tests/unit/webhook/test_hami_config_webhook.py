"""The webhook built from a HAMi device config: renamed resources are registered, sent and converted."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import anyio

from dralab.config import load_config
from dralab.webhook.registration import resource_domains
from dralab.webhook.server import build

RENAMED = Path(__file__).parents[1] / "model" / "fixtures" / "hami" / "hami-dra-renamed.yaml"


def test_registration_sends_pods_with_the_renamed_resources() -> None:
    cfg = load_config(None, RENAMED)
    assert "corp.example/" in resource_domains(cfg)
    assert cfg.migration.adopts  # a HAMi config means migration mode


def test_webhook_converts_a_renamed_ascend_pod(fake_api) -> None:
    webhook = build(load_config(None, RENAMED), fake_api, janitor=False)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team"},
           "spec": {"containers": [{"name": "app", "resources": {"limits": {
               "corp.example/npu-310p": "1", "corp.example/npu-310p-memory": "2048"}}}]}}
    review = {"request": {"uid": "u1", "kind": {"group": "", "version": "v1", "kind": "Pod"}, "namespace": "team",
                          "operation": "CREATE", "object": pod}}
    response = anyio.run(lambda: webhook.handler.mutate(review))["response"]
    assert response["allowed"] is True
    patch = json.loads(base64.b64decode(response["patch"]))
    assert any(op["path"].startswith("/spec/resourceClaims") for op in patch)
    (claim,) = [o for p, o in fake_api.objects.items() if "/resourceclaims/" in p]
    exactly = claim["spec"]["devices"]["requests"][0]["exactly"]
    assert exactly["deviceClassName"] == "corp-npu.example"
    assert exactly["capacity"]["requests"]["memory"] == str(2048 * 2**20)
