"""Cluster-scoped API objects every dralab deployment needs, as plain dicts (no I/O).

The local cluster, the Pulumi program and the tests all create these from here, so a DeviceClass
looks the same wherever it comes from. The Helm chart renders the same shape in its templates.
"""

from __future__ import annotations

from typing import Any

from dralab.model.vendors import Vendor, VendorTable

MANAGED_BY = {"app.kubernetes.io/managed-by": "dralab"}


def device_class(vendor: Vendor) -> dict[str, Any]:
    """The DeviceClass of ``vendor``: its driver and shareable type, as Lab 20 Step 3 shows."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": vendor.device_class, "labels": dict(MANAGED_BY)},
        "spec": {"selectors": [{"cel": {"expression": vendor.class_selector()}}]},
    }


def device_classes(table: VendorTable) -> list[dict[str, Any]]:
    """One DeviceClass per enabled vendor (vendors sharing a class name yield it once)."""
    seen: dict[str, dict[str, Any]] = {}
    for vendor in table.enabled_vendors():
        seen.setdefault(vendor.device_class, device_class(vendor))
    return list(seen.values())


def runtime_class(name: str = "ascend", handler: str = "ascend") -> dict[str, Any]:
    """The RuntimeClass Lab 20's pods name (``runtimeClassName: ascend``)."""
    return {
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": {"name": name, "labels": dict(MANAGED_BY)},
        "handler": handler,
    }
