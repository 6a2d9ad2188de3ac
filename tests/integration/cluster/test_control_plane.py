"""The local cluster's control plane: version, feature gate, nodes, bootstrap objects, health."""

from __future__ import annotations

import re

import pytest
from kubernetes import client

from dralab.config import default_config
from dralab.model.inventory import load_inventory
from dralab.model.objects import device_classes
from dralab_kit.cluster import api
from dralab_kit.cluster.build import K8S_VERSION
from dralab_kit.cluster.components import CONTROL_PLANE

pytestmark = pytest.mark.integration


def test_version_is_1_35(k8s_client):
    info = client.VersionApi(k8s_client).get_code()
    assert re.fullmatch(r"v1\.35\.\d+", info.git_version), info.git_version
    assert info.git_version == K8S_VERSION
    assert (info.major, info.minor) == ("1", "35")


def test_consumable_capacity_gate_is_on(cluster):
    metrics = api.apiserver_metrics(cluster)
    lines = [ln for ln in metrics.splitlines() if ln.startswith("kubernetes_feature_enabled{")]
    gate = [ln for ln in lines if 'name="DRAConsumableCapacity"' in ln]
    assert gate, "kubernetes_feature_enabled has no DRAConsumableCapacity series"
    assert gate[0].rstrip().endswith(" 1"), gate[0]


def test_gate_on_every_component_command_line(cluster):
    for component in ("apiserver", "controller-manager", "scheduler"):
        argv = cluster.state["components"][component]["argv"]
        assert "--feature-gates=DRAConsumableCapacity=true" in argv, component


def test_inventory_nodes_are_ready_kwok_nodes(cluster, k8s_client):
    core = client.CoreV1Api(k8s_client)
    for inv_node in load_inventory(cluster.devices).nodes:
        node = core.read_node(inv_node.name)
        ready = {c.type: c.status for c in node.status.conditions}.get("Ready")
        assert ready == "True"
        assert node.metadata.annotations["kwok.x-k8s.io/node"] == "fake"
        assert node.metadata.labels["kubernetes.io/arch"] == inv_node.arch
        assert not node.spec.taints


def test_device_classes_and_runtime_class_exist(k8s_client):
    custom = client.CustomObjectsApi(k8s_client)
    names = {
        item["metadata"]["name"]
        for item in custom.list_cluster_custom_object("resource.k8s.io", "v1", "deviceclasses")["items"]
    }
    expected = {dc["metadata"]["name"] for dc in device_classes(default_config().vendors)}
    assert expected <= names
    rc = client.NodeV1Api(k8s_client).read_runtime_class("ascend")
    assert rc.handler == "ascend"


def test_every_component_running_and_healthy(cluster):
    rows = {row.name: row for row in api.status(cluster.name)}
    for component in ("etcd", "apiserver", "controller-manager", "scheduler", "kwok"):
        assert rows[component].state == "running", rows[component]
        assert rows[component].healthy is True, rows[component]
    for node in cluster.nodes:
        assert rows[f"kubelet/{node}"].state == "running"
    for name in cluster.components():
        assert cluster.log_path(name).is_file(), f"no log for {name}"


def test_ensure_cluster_reuses_the_running_cluster(cluster):
    # dralab's own processes restart when their source changes (a developer's working tree), so
    # only the control plane is compared
    before = {name: api.get_cluster(cluster.name).state["components"][name]["pid"] for name in CONTROL_PLANE}
    again = api.ensure_cluster(cluster.name)
    assert {name: again.state["components"][name]["pid"] for name in CONTROL_PLANE} == before
    assert again.kubeconfig == cluster.kubeconfig
