"""The profiles that install dralab from its chart install the same values; only what depends on the
cluster differs, and that is added at deploy time (``install.cluster_values``)."""

from __future__ import annotations

from harness.environment import deploy_values
from harness.profile import load_profile


def test_kind_and_node_chart_install_the_same_values() -> None:
    kind, node = load_profile("kind"), load_profile("node-chart")
    assert kind.deploy_method == node.deploy_method == "helm"
    assert kind.deploy["chart"] == node.deploy["chart"]
    assert kind.deploy["namespace"] == node.deploy["namespace"]
    assert kind.deploy["values"] == node.deploy["values"]


def test_cluster_values_come_last_and_only_add() -> None:
    node = load_profile("node-chart")
    cluster = {"image": {"repository": "dralab.local/dralab", "tag": "t", "pullPolicy": "Never"},
               "driver": {"cdiDir": "/x/cdi"}}
    values = deploy_values(node, {"DRALAB_IMAGE": "ghcr.io/o/dralab:v1"}, cluster)
    assert values["image"]["repository"] == "dralab.local/dralab"  # the image imported into this node wins
    assert values["driver"] == {"backend": "fake", "cdiDir": "/x/cdi"}  # merged, the profile's backend kept
    assert values["monitor"] == {"enabled": True}


def test_node_chart_is_a_pod_network_cluster() -> None:
    node = load_profile("node-chart")
    assert node.cluster["realNode"] is True and node.cluster["podNetwork"] is True
    assert node.source == "local"
