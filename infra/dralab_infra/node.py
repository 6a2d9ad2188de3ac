"""Profile ``node``: the whole lab on this machine, installed the way users install it.

In order, each a resource with its own create and delete:

1. ``NodeCluster``: the control plane, the real kubelet, containerd (CDI, the ``ascend`` handler),
   runc, CNI and kube-proxy, with the version's gates on every component (``dralab cluster up
   --real-node --pod-network``); a dralab cluster named ``dralab:clusterName`` (default
   ``dralab-node-chart``), so ``dralab cluster status|kubeconfig|restart`` work on it too;
2. ``NodeImages``: dralab's image built here from the Dockerfile and cert-manager's images,
   imported into the node's containerd (no registry is reachable);
3. cert-manager from its own chart (``dralab_kit.cluster.certmanager``), as pods;
4. dralab from ``charts/dralab`` with the values every cluster gets plus this node's host paths; the
   chart makes the ``ascend`` RuntimeClass (``runtimeClasses``), which the node's containerd serves.

The kubeconfig is a secret output. ``pulumi destroy`` deletes in reverse, and the cluster's
delete fails when anything of it is left on the host.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from dralab_infra.component import Profile
from dralab_infra.settings import Settings
from dralab_kit.cluster import certmanager, install
from dralab_kit.provision.chart import chart_dir, deep_merge, default_values
from dralab_kit.pulumi.resources import NodeCluster, NodeImages
from harness.profile import load_profile


class NodeProfile(Profile):
    """The real-node cluster, its images, cert-manager and dralab's chart (with the RuntimeClass)."""

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
        handle = install.planned_handle(settings.cluster_name)
        # the node-chart harness profile's values, so that its replays find the release as they would install it
        values = deep_merge(load_profile("node-chart").deploy["values"], settings.chart_values)
        release = k8s.helm.v3.Release(
            "dralab",
            name=install.DRALAB_RELEASE,
            chart=str(chart_dir()),
            namespace=settings.namespace,
            create_namespace=True,
            values=images.image.apply(lambda image: deep_merge(values, install.cluster_values(handle, image))),
            opts=self.child(provider=provider, depends_on=[manager, images]),
        )
        self.finish(
            {
                "kubeconfig": pulumi.Output.secret(cluster.kubeconfig),
                "clusterName": settings.cluster_name,
                "server": cluster.server,
                "image": images.image,
                "runtimeClasses": [c["name"] for c in values.get("runtimeClasses", default_values()["runtimeClasses"])],
                "release": release.name,
            }
        )
