"""The one table of well-known kinds: apiVersion, resource (plural) and scope of each (pure).

What dralab, its cluster and its labs name without asking the apiserver: the local cluster's
objects (``dralab_kit.cluster.objects``), lab references that leave out ``apiVersion``
(``harness.resources``). Anything else goes through :class:`dralab.kube.discovery.Discovery`,
which asks the cluster; a kind the table lacks is an error that says so, never a guess.
"""

from __future__ import annotations

from dataclasses import dataclass

from dralab.kube.paths import segment


@dataclass(frozen=True)
class Kind:
    api_version: str
    resource: str  # the plural in the URL path
    namespaced: bool


# kind -> its apiVersion, resource and scope; one entry per kind (no kind is served twice here)
KINDS: dict[str, Kind] = {
    "Pod": Kind("v1", "pods", True),
    "Namespace": Kind("v1", "namespaces", False),
    "Node": Kind("v1", "nodes", False),
    "Event": Kind("v1", "events", True),
    "ConfigMap": Kind("v1", "configmaps", True),
    "Secret": Kind("v1", "secrets", True),
    "Service": Kind("v1", "services", True),
    "ServiceAccount": Kind("v1", "serviceaccounts", True),
    "PersistentVolume": Kind("v1", "persistentvolumes", False),
    "Deployment": Kind("apps/v1", "deployments", True),
    "DaemonSet": Kind("apps/v1", "daemonsets", True),
    "ReplicaSet": Kind("apps/v1", "replicasets", True),
    "Job": Kind("batch/v1", "jobs", True),
    "ResourceClaim": Kind("resource.k8s.io/v1", "resourceclaims", True),
    "ResourceClaimTemplate": Kind("resource.k8s.io/v1", "resourceclaimtemplates", True),
    "ResourceSlice": Kind("resource.k8s.io/v1", "resourceslices", False),
    "DeviceClass": Kind("resource.k8s.io/v1", "deviceclasses", False),
    "RuntimeClass": Kind("node.k8s.io/v1", "runtimeclasses", False),
    "MutatingWebhookConfiguration": Kind("admissionregistration.k8s.io/v1", "mutatingwebhookconfigurations", False),
    "ValidatingWebhookConfiguration": Kind("admissionregistration.k8s.io/v1", "validatingwebhookconfigurations",
                                           False),
    "Lease": Kind("coordination.k8s.io/v1", "leases", True),
    "ClusterRole": Kind("rbac.authorization.k8s.io/v1", "clusterroles", False),
    "ClusterRoleBinding": Kind("rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
    "CustomResourceDefinition": Kind("apiextensions.k8s.io/v1", "customresourcedefinitions", False),
    "StorageClass": Kind("storage.k8s.io/v1", "storageclasses", False),
    "PriorityClass": Kind("scheduling.k8s.io/v1", "priorityclasses", False),
}
CLUSTER_SCOPED = frozenset(name for name, kind in KINDS.items() if not kind.namespaced)


def group_path(api_version: str) -> str:
    """``/api/v1`` for the core group, ``/apis/<group>/<version>`` for the others."""
    return "/api/v1" if api_version == "v1" else f"/apis/{api_version}"


def known(api_version: str, kind: str) -> Kind:
    """The table's entry for ``kind`` at ``api_version``; ValueError naming the fix when it has none."""
    entry = KINDS.get(kind)
    if entry is None or entry.api_version != api_version:
        raise ValueError(f"no REST path known for {api_version} {kind}: add it to dralab.kube.kinds.KINDS "
                         "or look it up with dralab.kube.discovery.Discovery")
    return entry


def collection_path(api_version: str, kind: str, namespace: str | None = None) -> str:
    """The collection URL path of a known kind (``namespace`` required for namespaced kinds)."""
    entry = known(api_version, kind)
    base = group_path(api_version)
    if entry.namespaced:
        if not namespace:
            raise ValueError(f"{kind} is namespaced: a namespace is required")
        base += f"/namespaces/{segment(namespace)}"
    return f"{base}/{entry.resource}"
