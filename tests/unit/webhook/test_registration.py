"""Registration objects: paths, operations, failure policies and scoping."""

from __future__ import annotations

import base64

import pytest

from dralab.config import default_config, parse_config
from dralab.webhook.registration import webhook_configurations


def test_url_registration() -> None:
    mutating, validating = webhook_configurations(
        default_config(), url="https://127.0.0.1:9443/", service=None, ca_bundle=b"CA", own_namespace="dralab-system"
    )
    assert mutating["kind"] == "MutatingWebhookConfiguration" and mutating["metadata"]["name"] == "dralab-webhook"
    assert validating["kind"] == "ValidatingWebhookConfiguration" and validating["metadata"]["name"] == "dralab-webhook"
    (mw,) = mutating["webhooks"]
    assert mw["clientConfig"] == {"caBundle": base64.b64encode(b"CA").decode(), "url": "https://127.0.0.1:9443/mutate"}
    assert mw["rules"][0]["operations"] == ["CREATE"] and mw["rules"][0]["resources"] == ["pods"]
    assert mw["failurePolicy"] == "Fail" and mw["sideEffects"] == "NoneOnDryRun"
    ops = sorted(op for w in validating["webhooks"] for op in w["rules"][0]["operations"])
    assert ops == ["CREATE"]  # no UPDATE (adds no safety), no DELETE (forged reviews must not delete)
    assert {w["clientConfig"]["url"] for w in validating["webhooks"]} == {"https://127.0.0.1:9443/validate"}


def test_scoping_excludes_system_own_and_opted_out() -> None:
    cfg = parse_config({"webhook": {"excludeNamespaces": ["monitoring"], "failurePolicy": "Ignore"}})
    service = {"namespace": "dralab", "name": "dralab-webhook", "port": 443}
    (mutating, _) = webhook_configurations(cfg, url=None, service=service, ca_bundle=b"x", own_namespace="dralab")
    (mw,) = mutating["webhooks"]
    assert mw["clientConfig"]["service"] == {
        "namespace": "dralab",
        "name": "dralab-webhook",
        "path": "/mutate",
        "port": 443,
    }
    exprs = mw["namespaceSelector"]["matchExpressions"]
    names = next(e for e in exprs if e["key"] == "kubernetes.io/metadata.name")
    assert names["operator"] == "NotIn"
    assert names["values"] == ["cert-manager", "dralab", "kube-system", "monitoring"]
    assert {"key": "dralab.io/convert", "operator": "NotIn", "values": ["false"]} in exprs
    assert mw["objectSelector"]["matchExpressions"] == [
        {"key": "dralab.io/convert", "operator": "NotIn", "values": ["false"]}
    ]
    assert mw["failurePolicy"] == "Ignore"


def test_exactly_one_destination() -> None:
    with pytest.raises(ValueError):
        webhook_configurations(default_config(), url=None, service=None, ca_bundle=b"", own_namespace="x")


def test_configured_selectors_are_added_to_dralabs_own() -> None:
    cfg = parse_config(
        {
            "webhook": {
                "namespaceSelector": {"matchLabels": {"accelerators": "shared"}},
                "objectSelector": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gpu"]}]},
            }
        }
    )
    mutating, validating = webhook_configurations(cfg, url="https://h", service=None, ca_bundle=b"", own_namespace="x")
    (mw,) = mutating["webhooks"]
    assert mw["namespaceSelector"]["matchLabels"] == {"accelerators": "shared"}
    assert len(mw["namespaceSelector"]["matchExpressions"]) == 2
    assert mw["objectSelector"]["matchExpressions"][1] == {"key": "tier", "operator": "In", "values": ["gpu"]}
    assert validating["webhooks"][0]["objectSelector"] == mw["objectSelector"]


def test_bad_selector_config_is_a_clear_error() -> None:
    from dralab.errors import UserError

    with pytest.raises(UserError, match=r"webhook\.objectSelector must be a label selector"):
        parse_config({"webhook": {"objectSelector": {"labels": {"a": "b"}}}})
