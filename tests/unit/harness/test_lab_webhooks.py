"""Lab 20's webhook assertions hold for the configurations dralab itself generates, and fail for broken ones.

The lab checks the registered objects by content (rules, failurePolicy, caBundle, namespace
selector). Matching those expectations here against ``dralab.webhook.registration`` keeps the
lab and the code in step: a change to either shows up in the unit tier, not only on a cluster.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from dralab.config import default_config
from dralab.webhook.registration import webhook_configurations
from harness import match
from harness.loader import resolve_lab
from harness.schema import load_lab

CA = b"-----BEGIN CERTIFICATE-----\n" + b"A" * 600 + b"\n-----END CERTIFICATE-----\n"


def _expectations() -> dict[str, Any]:
    lab = load_lab(resolve_lab("lab20-ascend-hami-dra"))
    out = {}
    for op in lab.step("components").ops:
        resource = str(op.body.get("resource", ""))
        if op.kind == "assert" and "WebhookConfiguration/" in resource:
            out[resource.split("/")[0]] = op.body["match"]
    assert set(out) == {"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}
    return out


def _generated() -> dict[str, dict[str, Any]]:
    objs = webhook_configurations(
        default_config(), url="https://127.0.0.1:9443", service=None, ca_bundle=CA, own_namespace="dralab-system"
    )
    return {o["kind"]: o for o in objs}


def test_lab20_webhook_expectations_hold_for_what_dralab_registers() -> None:
    generated = _generated()
    for kind, expected in _expectations().items():
        assert match.match(expected, generated[kind]) == [], kind


@pytest.mark.parametrize(
    ("kind", "breakage"),
    [
        ("MutatingWebhookConfiguration", lambda w: w[0].update(failurePolicy="Ignore")),
        ("MutatingWebhookConfiguration", lambda w: w[0]["clientConfig"].update(caBundle="")),
        ("MutatingWebhookConfiguration", lambda w: w[0]["rules"][0].update(resources=["services"])),
        ("MutatingWebhookConfiguration", lambda w: w[0].update(namespaceSelector={})),
        ("ValidatingWebhookConfiguration", lambda w: w[0]["rules"][0].update(operations=["UPDATE"])),
        ("ValidatingWebhookConfiguration", lambda w: w[0].update(failurePolicy="Ignore")),
        ("ValidatingWebhookConfiguration", lambda w: w[0]["clientConfig"].pop("caBundle")),
        ("ValidatingWebhookConfiguration", lambda w: w[0].update(namespaceSelector={})),
    ],
    ids=["mutate-ignore", "mutate-no-ca", "mutate-rules", "mutate-all-namespaces", "validate-no-create",
         "validate-ignore", "validate-no-ca", "validate-all-namespaces"],
)  # fmt: skip
def test_lab20_webhook_expectations_catch_a_broken_configuration(kind: str, breakage: Any) -> None:
    broken = copy.deepcopy(_generated()[kind])
    breakage(broken["webhooks"])
    problems = match.match(_expectations()[kind], broken)
    assert problems and problems[0].startswith("webhooks")
