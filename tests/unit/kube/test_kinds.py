"""The one kind table: the paths it gives, and the kit's tables derived from it."""

from __future__ import annotations

import pytest

from dralab.kube import kinds
from dralab_kit.cluster.objects import object_path
from harness import resources


def test_paths_of_namespaced_and_cluster_scoped_kinds() -> None:
    assert kinds.collection_path("v1", "Pod", "lab") == "/api/v1/namespaces/lab/pods"
    assert kinds.collection_path("resource.k8s.io/v1", "ResourceSlice") == "/apis/resource.k8s.io/v1/resourceslices"
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "a", "namespace": "n"}}
    assert object_path(claim) == "/apis/resource.k8s.io/v1/namespaces/n/resourceclaims/a"


def test_unknown_kinds_and_missing_namespaces_name_the_fix() -> None:
    with pytest.raises(ValueError, match=r"no REST path known for v1 Widget: add it to dralab\.kube\.kinds\.KINDS"):
        kinds.collection_path("v1", "Widget")
    with pytest.raises(ValueError, match="no REST path known for apps/v2 Deployment"):  # the table's version only
        kinds.collection_path("apps/v2", "Deployment", "x")
    with pytest.raises(ValueError, match="Pod is namespaced: a namespace is required"):
        kinds.collection_path("v1", "Pod")


def test_the_labs_tables_are_the_kind_tables() -> None:
    assert {name: k.api_version for name, k in kinds.KINDS.items()} == resources.KNOWN_KINDS
    assert resources.CLUSTER_SCOPED is kinds.CLUSTER_SCOPED
    assert {"Node", "ResourceSlice", "DeviceClass"} <= kinds.CLUSTER_SCOPED
    assert not {"Pod", "ResourceClaim", "Lease"} & kinds.CLUSTER_SCOPED
