"""The webhook's registration objects, as plain dicts (pure: no I/O).

Failure policies: the mutating webhook uses ``webhook.failurePolicy`` (default ``Fail``: a HAMi
pod must never be admitted unconverted, where it would sit Pending on a resource no node
advertises). The validating entry for CREATE/UPDATE uses the same policy. The DELETE entry is
``Ignore``: its cleanup is best effort, since ownerReferences added by the janitor and its
reaping free claims even while the webhook is down, and a pod deletion must never wait on dralab.
"""

from __future__ import annotations

import base64
from typing import Any

from dralab.config import Config
from dralab.model.convert import DRA_LABEL
from dralab.model.objects import MANAGED_BY

NAME = "dralab-webhook"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


def _client_config(url: str | None, service: dict[str, Any] | None, path: str, ca_bundle: bytes) -> dict[str, Any]:
    if (url is None) == (service is None):
        raise ValueError("give exactly one of url and service")
    cfg: dict[str, Any] = {"caBundle": base64.b64encode(ca_bundle).decode()}
    if url is not None:
        cfg["url"] = url.rstrip("/") + path
    else:
        assert service is not None
        svc = {"namespace": service["namespace"], "name": service["name"], "path": path}
        if "port" in service:
            svc["port"] = int(service["port"])
        cfg["service"] = svc
    return cfg


def _rule(operations: list[str]) -> dict[str, Any]:
    return {
        "apiGroups": [""],
        "apiVersions": ["v1"],
        "operations": operations,
        "resources": ["pods"],
        "scope": "Namespaced",
    }


def _selector(own: list[dict[str, Any]], extra: dict[str, Any]) -> dict[str, Any]:
    """dralab's own expressions plus the configured selector (both must match)."""
    out: dict[str, Any] = {"matchExpressions": [*own, *(extra.get("matchExpressions") or [])]}
    if extra.get("matchLabels"):
        out["matchLabels"] = dict(extra["matchLabels"])
    return out


def webhook_configurations(
    cfg: Config, *, url: str | None, service: dict[str, Any] | None, ca_bundle: bytes, own_namespace: str
) -> list[dict[str, Any]]:
    """MutatingWebhookConfiguration and ValidatingWebhookConfiguration ``dralab-webhook``.

    ``url`` (e.g. ``https://127.0.0.1:8443``) or ``service`` (``{namespace, name[, port]}``) says
    where the server is; paths are appended. ``own_namespace`` is never converted.
    """
    wh = cfg.webhook
    excluded = sorted({*wh.exclude_namespaces, "kube-system", own_namespace})
    opt_out = {"key": wh.opt_out_label, "operator": "NotIn", "values": ["false"]}
    namespace_selector = _selector(
        [{"key": NAMESPACE_NAME_LABEL, "operator": "NotIn", "values": excluded}, opt_out], wh.namespace_selector
    )
    object_selector = _selector([dict(opt_out)], wh.object_selector)
    common = {
        "admissionReviewVersions": ["v1"],
        "sideEffects": "NoneOnDryRun",
        "timeoutSeconds": 10,
        "matchPolicy": "Equivalent",
        "namespaceSelector": namespace_selector,
    }
    labels = dict(MANAGED_BY)
    mutating = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": NAME, "labels": labels},
        "webhooks": [
            {
                "name": "mutate.dralab.io",
                "clientConfig": _client_config(url, service, "/mutate", ca_bundle),
                "rules": [_rule(["CREATE"])],
                "failurePolicy": wh.failure_policy,
                "reinvocationPolicy": "IfNeeded",
                "objectSelector": object_selector,
                **common,
            }
        ],
    }
    validating = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": NAME, "labels": dict(labels)},
        "webhooks": [
            {
                "name": "validate.dralab.io",
                "clientConfig": _client_config(url, service, "/validate", ca_bundle),
                "rules": [_rule(["CREATE", "UPDATE"])],
                "failurePolicy": wh.failure_policy,
                "objectSelector": object_selector,
                **common,
            },
            {
                "name": "cleanup.dralab.io",
                "clientConfig": _client_config(url, service, "/validate", ca_bundle),
                "rules": [_rule(["DELETE"])],
                "failurePolicy": "Ignore",
                "objectSelector": {"matchLabels": {DRA_LABEL: "true"}},
                **common,
            },
        ],
    }
    return [mutating, validating]
