"""Profile ``local``: the local cluster (``dralab cluster up``) gets API objects only.

dralab's webhook and driver run there as host processes started by the cluster, so no chart.
"""

from __future__ import annotations

import os

import pulumi
import pulumi_kubernetes as k8s

from dralab.errors import UserError
from dralab_infra import k8s as objects
from dralab_infra.component import Profile
from dralab_infra.settings import Settings


def local_kubeconfig(settings: Settings) -> str:
    """The kubeconfig path: ``dralab:kubeconfig``, else ``$KUBECONFIG`` (``dralab infra`` sets it), else the
    kubeconfig of the local cluster ``dralab:clusterName``."""
    if settings.kubeconfig:
        return settings.kubeconfig
    if os.environ.get("KUBECONFIG"):
        return os.environ["KUBECONFIG"]
    kubeconfig: str | None = None
    try:
        from dralab_kit.cluster.api import get_cluster
    except ImportError:  # no kit installed: no local clusters to look up
        pass
    else:
        handle = get_cluster(settings.cluster_name)
        if handle is not None:
            kubeconfig = str(handle.kubeconfig)
    if kubeconfig is None:
        raise UserError(
            f"no local cluster named {settings.cluster_name!r}: run `dralab cluster up` first, "
            "or set dralab:kubeconfig to a kubeconfig file"
        )
    return kubeconfig


class LocalProfile(Profile):
    """The local cluster's API objects: namespaces, the ``ascend`` RuntimeClass, the DeviceClasses."""

    TYPE = "dralab:profiles:Local"

    def __init__(self, name: str, settings: Settings, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(name, settings, opts)
        kubeconfig = local_kubeconfig(settings)
        provider = k8s.Provider("local", kubeconfig=kubeconfig, opts=self.child())
        namespaces = objects.namespaces(self, settings, provider)
        runtime = objects.ascend_runtime_class(self, provider)
        classes = objects.dralab_device_classes(self, settings, provider)
        self.finish(
            {
                "kubeconfigPath": kubeconfig,
                "namespaces": sorted(namespaces),
                "runtimeClass": runtime.metadata.apply(lambda m: m["name"]),
                "deviceClasses": [c.metadata.apply(lambda m: m["name"]) for c in classes],
            }
        )
