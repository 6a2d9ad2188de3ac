"""Profile ``node``: the whole lab on this machine, installed the way users install it.

In order, each a resource with its own create and delete:

1. ``NodeCluster``: the control plane, the real kubelet, containerd (CDI, the ``ascend`` handler),
   runc, CNI and kube-proxy, with the version's gates on every component (``dralab cluster up
   --real-node --pod-network``); a dralab cluster named ``dralab:clusterName`` (default
   ``dralab-node-chart``), so ``dralab cluster status|kubeconfig|restart`` work on it too;
2. ``NodeImages``: dralab's image built here from the Dockerfile and cert-manager's images,
   imported into the node's containerd (no registry is reachable);
3. cert-manager from its own chart (``dralab.cluster.certmanager``), as pods;
4. the ``ascend`` RuntimeClass;
5. dralab from ``charts/dralab`` with the values every cluster gets plus this node's host paths.

The kubeconfig is a secret output. ``pulumi destroy`` deletes in reverse, and the cluster's
delete fails when anything of it is left on the host.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from dralab.cluster import certmanager, install
from dralab.provision.chart import chart_dir, chart_values, deep_merge
from dralab.pulumi.resources import NodeCluster, NodeImages
from dralab_infra import k8s as objects
from dralab_infra.component import Profile
from dralab_infra.settings import Settings


class NodeProfile(Profile):
    """The real-node cluster, its images, cert-manager, the RuntimeClass and dralab's chart."""

    TYPE = "dralab:profiles:Node"

    def __init__(self, name: str, settings: Settings, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(name, settings, opts)
        cluster = NodeCluster(
            "node-cluster", settings.cluster_name, settings.kubernetes_version, None, opts=self.child()
        )
        images = NodeImages(
            "node-images", cluster.id, install.image_revision(), opts=self.child(depends_on=[cluster])
        )
        provider = k8s.Provider("node", kubeconfig=cluster.kubeconfig, opts=self.child(depends_on=[cluster]))
        manager = k8s.helm.v3.Release(
            "cert-manager",
            name=install.CERT_MANAGER_RELEASE,
            chart=str(certmanager.chart_dir()),
            namespace=install.CERT_MANAGER_NAMESPACE,
            create_namespace=True,
            values=certmanager.helm_values(),
            opts=self.child(provider=provider, depends_on=[images]),
        )
        runtime = objects.ascend_runtime_class(self, provider)
        handle = install.planned_handle(settings.cluster_name)
        values = deep_merge(
            chart_values(backend=settings.backend, lifecycle=settings.lifecycle, extra=settings.chart_values),
            {"runtimeClasses": [], "monitor": {"enabled": True}},  # the RuntimeClass is the resource above
        )
        release = k8s.helm.v3.Release(
            "dralab",
            name=install.DRALAB_RELEASE,
            chart=str(chart_dir()),
            namespace=settings.namespace,
            create_namespace=True,
            values=images.image.apply(lambda image: deep_merge(values, install.cluster_values(handle, image))),
            opts=self.child(provider=provider, depends_on=[manager, runtime, images]),
        )
        self.finish(
            {
                "kubeconfig": pulumi.Output.secret(cluster.kubeconfig),
                "clusterName": settings.cluster_name,
                "server": cluster.server,
                "image": images.image,
                "runtimeClass": runtime.metadata.apply(lambda m: m["name"]),
                "release": release.name,
            }
        )
