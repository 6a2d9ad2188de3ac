"""API objects every profile creates: namespaces, the RuntimeClass, DeviceClasses, cert-manager, the chart.

Object shapes come from dralab.model.objects and dralab_kit.provision.chart, the same code the local
cluster and the harness use.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from dralab.config import DEFAULT_CONFIG_YAML
from dralab.model.objects import device_classes, runtime_class
from dralab.model.vendors import load_vendor_table
from dralab.versions import CERT_MANAGER_REPO
from dralab_infra.component import Profile
from dralab_infra.settings import Settings
from dralab_kit.provision.chart import chart_dir, chart_values

OPT_OUT_LABEL = "dralab.io/convert"  # dralab's default webhook.optOutLabel


def _opts(
    owner: Profile, provider: k8s.Provider, depends_on: list[pulumi.Resource] | None = None
) -> pulumi.ResourceOptions:
    return owner.child(provider=provider, depends_on=depends_on or [])


def namespaces(owner: Profile, settings: Settings, provider: k8s.Provider) -> dict[str, k8s.core.v1.Namespace]:
    """dralab's own namespace (never converted, privileged for the driver) and the lab namespaces."""
    own = {
        OPT_OUT_LABEL: "false",
        "pod-security.kubernetes.io/enforce": "privileged",
        "app.kubernetes.io/managed-by": "dralab",
    }
    out = {
        settings.namespace: k8s.core.v1.Namespace(
            f"ns-{settings.namespace}",
            metadata={"name": settings.namespace, "labels": own},
            opts=_opts(owner, provider),
        )
    }
    for ns in settings.namespaces:
        if ns.name in out:
            continue
        out[ns.name] = k8s.core.v1.Namespace(
            f"ns-{ns.name}",
            metadata={"name": ns.name, "labels": {**ns.labels, "app.kubernetes.io/managed-by": "dralab"}},
            opts=_opts(owner, provider),
        )
    return out


def ascend_runtime_class(owner: Profile, provider: k8s.Provider) -> k8s.node.v1.RuntimeClass:
    """The ``ascend`` RuntimeClass Lab 20's pods name; its handler is set up by kind or the playbooks."""
    obj = runtime_class()
    return k8s.node.v1.RuntimeClass(
        "runtimeclass-ascend", metadata=obj["metadata"], handler=obj["handler"], opts=_opts(owner, provider)
    )


def dralab_device_classes(
    owner: Profile, settings: Settings, provider: k8s.Provider
) -> list[k8s.resource.v1.DeviceClass]:
    """One DeviceClass per enabled vendor (the chart makes them where the chart is installed)."""
    enabled = list(settings.vendors) if settings.vendors is not None else None
    if enabled is None:
        from dralab import yamlio

        enabled = yamlio.load(DEFAULT_CONFIG_YAML, "<defaults>")["vendors"]["enabled"]
    out = []
    for obj in device_classes(load_vendor_table(enabled=enabled)):
        name = obj["metadata"]["name"]
        out.append(
            k8s.resource.v1.DeviceClass(
                f"deviceclass-{name}", metadata=obj["metadata"], spec=obj["spec"], opts=_opts(owner, provider)
            )
        )
    return out


def cert_manager(
    owner: Profile, settings: Settings, provider: k8s.Provider, depends_on: list[pulumi.Resource]
) -> k8s.helm.v3.Release:
    """cert-manager from its Helm repository, CRDs included (``crds.enabled``; installCRDs is deprecated)."""
    return k8s.helm.v3.Release(
        "cert-manager",
        name="cert-manager",
        chart="cert-manager",
        version=settings.cert_manager_version,
        repository_opts={"repo": CERT_MANAGER_REPO},
        namespace="cert-manager",
        create_namespace=True,
        values={"crds": {"enabled": True}},
        wait_for_jobs=True,
        opts=_opts(owner, provider, depends_on),
    )


def dralab_release(
    owner: Profile,
    settings: Settings,
    provider: k8s.Provider,
    depends_on: list[pulumi.Resource],
    devices: dict[str, Any] | None = None,
) -> k8s.helm.v3.Release:
    """The dralab chart from this checkout, values built by dralab_kit.provision.chart.chart_values."""
    values = chart_values(
        backend=settings.backend,
        vendors=list(settings.vendors) if settings.vendors is not None else None,
        lifecycle=settings.lifecycle,
        image=settings.image,
        devices=devices,
        extra=settings.chart_values,
    )
    return k8s.helm.v3.Release(
        "dralab",
        name="dralab",
        chart=str(chart_dir()),
        namespace=settings.namespace,
        values=values,
        opts=_opts(owner, provider, depends_on),
    )
