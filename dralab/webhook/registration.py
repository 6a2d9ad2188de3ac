"""The webhook's registration objects, as plain dicts (pure: no I/O).

Failure policies: both webhooks use ``webhook.failurePolicy`` (default ``Fail``: a HAMi pod must
never be admitted unconverted, where it would sit Pending on a resource no node advertises).

Outage scope: a webhook that is down with ``Fail`` blocks every request it is sent, so the webhooks
are sent only what needs them. ``matchConditions`` pass only pods whose containers ask for a resource
in a domain the enabled vendors use (``nvidia.com/``, ``huawei.com/``, ...); only CREATE is registered
(pod resources are immutable, so an UPDATE cannot add HAMi resources: finalizer removals never wait
on dralab); kube-system, cert-manager and dralab's own namespace are never sent.

There is no DELETE webhook: anyone who reaches the webhook can forge a review, so no side effect may
follow from one. Claims are freed by their owner references (set by the janitor), the garbage
collector, and the janitor's reaping.
"""

from __future__ import annotations

import base64
from typing import Any

from dralab.config import Config
from dralab.model.objects import MANAGED_BY

NAME = "dralab-webhook"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
# Never sent to the webhooks, whatever the config says: the control plane's namespace and cert-manager's,
# whose pods must start while dralab is down (the webhook's certificate comes from cert-manager).
ALWAYS_EXCLUDED = ("kube-system", "cert-manager")
MATCH_CONDITION = "requests-accelerators"


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


def resource_domains(cfg: Config) -> list[str]:
    """The resource-name domains (``nvidia.com/``) of every HAMi resource the enabled vendors know."""
    domains = set()
    for vendor in cfg.vendors.enabled_vendors():
        names = [*vendor.resource_templates().values(), *vendor.unsupported, *vendor.ignored]
        names += [name for rs in vendor.resource_sets() for name in rs.names]  # chips renamed by a HAMi config
        for name in names:
            domains.add(name.split("/", 1)[0] + "/" if "/" in name else name)
    return sorted(domains)


def match_expression(domains: list[str]) -> str:
    """CEL over the pod: does any container or init container ask for a resource in ``domains``."""
    test = " || ".join(f'k.startsWith("{d}")' for d in domains) or "false"
    return (
        "(has(object.spec.initContainers) ? object.spec.containers + object.spec.initContainers"
        " : object.spec.containers).exists(c, has(c.resources) && ("
        f"(has(c.resources.limits) && c.resources.limits.exists(k, {test})) || "
        f"(has(c.resources.requests) && c.resources.requests.exists(k, {test}))))"
    )


def match_conditions(cfg: Config) -> list[dict[str, str]]:
    """The ``matchConditions`` of both webhooks: only pods asking for a known vendor's resources."""
    return [{"name": MATCH_CONDITION, "expression": match_expression(resource_domains(cfg))}]


def webhook_configurations(
    cfg: Config, *, url: str | None, service: dict[str, Any] | None, ca_bundle: bytes, own_namespace: str
) -> list[dict[str, Any]]:
    """MutatingWebhookConfiguration and ValidatingWebhookConfiguration ``dralab-webhook``.

    ``url`` (e.g. ``https://127.0.0.1:8443``) or ``service`` (``{namespace, name[, port]}``) says
    where the server is; paths are appended. ``own_namespace`` is never converted.
    """
    wh = cfg.webhook
    excluded = sorted({*wh.exclude_namespaces, *ALWAYS_EXCLUDED, own_namespace})
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
        "matchConditions": match_conditions(cfg),
    }
    labels = dict(MANAGED_BY)
    mutating: dict[str, Any] = {
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
    if cfg.migration.volcano_jobs:  # Volcano Jobs: the same server converts their task templates
        from dralab.webhook.volcano import volcano_webhook

        mutating["webhooks"].append(volcano_webhook(mutating["webhooks"][0]))
    validating = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": NAME, "labels": dict(labels)},
        "webhooks": [
            {
                "name": "validate.dralab.io",
                "clientConfig": _client_config(url, service, "/validate", ca_bundle),
                "rules": [_rule(["CREATE"])],
                "failurePolicy": wh.failure_policy,
                "objectSelector": object_selector,
                **common,
            },
        ],
    }
    return [mutating, validating]
