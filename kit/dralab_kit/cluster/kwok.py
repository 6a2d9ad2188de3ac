"""KWOK's part of the local cluster: the Node objects and the pod lifecycle stages (pure).

Pods on KWOK nodes never run, but KWOK moves them through their phases by "stages". Ours
differ from KWOK's defaults in one place: KWOK starts only pods without ResourceClaims (at once).
A pod that uses claims is started by the kubelet stand-in, which writes its Running status
itself once the DRA driver prepared its claims, as a real kubelet starts containers only after
NodePrepareResources succeeded (one status write per pod: see dralab_kit.cluster.standin.status).
"""

from __future__ import annotations

from typing import Any

import yaml

from dralab.model.inventory import Inventory, InventoryNode
from dralab_kit.cluster.components import KWOK_NODE_ANNOTATION

NODE_LABEL = "dralab.io/kwok-node"
NODE_CAPACITY = {"cpu": "64", "memory": "512Gi", "pods": "1000", "ephemeral-storage": "1Ti"}

_RUNNING_STATUS = """\
{{ $now := Now }}
conditions:
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: Initialized
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: Ready
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: ContainersReady
{{ range .spec.readinessGates }}
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: {{ .conditionType | Quote }}
{{ end }}
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: true
  restartCount: 0
  started: true
  state:
    running:
      startedAt: {{ $now | Quote }}
{{ end }}
initContainerStatuses:
{{ range .spec.initContainers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: true
  restartCount: 0
  {{ if eq .restartPolicy "Always" }}
  started: true
  state:
    running:
      startedAt: {{ $now | Quote }}
  {{ else }}
  state:
    terminated:
      exitCode: 0
      finishedAt: {{ $now | Quote }}
      reason: Completed
      startedAt: {{ $now | Quote }}
  {{ end }}
{{ end }}
hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
podIP: {{ PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) \
( or .metadata.name "" ) ( or .metadata.namespace "" ) | Quote }}
phase: Running
startTime: {{ $now | Quote }}
"""

_COMPLETED_STATUS = """\
{{ $now := Now }}
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: false
  restartCount: 0
  started: false
  state:
    terminated:
      exitCode: 0
      finishedAt: {{ $now | Quote }}
      reason: Completed
      startedAt: {{ $now | Quote }}
{{ end }}
phase: Succeeded
"""

# A node's status as KWOK writes it: every condition KWOK knows (Ready True, the pressures False),
# heartbeat now, in that state since the node was made; addresses and the kubelet port kept or
# filled in. Allocatable, capacity and nodeInfo come with the Node object (:func:`node_manifest`)
# and are written back unchanged.
_NODE_STATUS = """\
{{ $now := Now }}
{{ $since := or .metadata.creationTimestamp $now }}
conditions:
{{ range NodeConditions }}
- type: {{ .type | Quote }}
  status: {{ .status | Quote }}
  reason: {{ .reason | Quote }}
  message: {{ .message | Quote }}
  lastHeartbeatTime: {{ $now | Quote }}
  lastTransitionTime: {{ $since | Quote }}
{{ end }}
addresses:
{{ with .status.addresses }}
{{ YAML . 1 }}
{{ else }}
- type: InternalIP
  address: {{ NodeIP | Quote }}
- type: Hostname
  address: {{ .metadata.name | Quote }}
{{ end }}
{{ with NodePort }}
daemonEndpoints:
  kubeletEndpoint:
    Port: {{ . }}
{{ end }}
{{ with .status.allocatable }}
allocatable:
{{ YAML . 1 }}
{{ end }}
{{ with .status.capacity }}
capacity:
{{ YAML . 1 }}
{{ end }}
{{ with .status.nodeInfo }}
nodeInfo:
{{ YAML . 1 }}
{{ end }}
phase: Running
"""
_NODE_READY = '.status.conditions.[] | select( .type == "Ready" ) | .status'
# With node leases a kubelet reports its status every 5 minutes when nothing changed
# (nodeStatusReportFrequency); KWOK's default stages rewrite it about every 20 s, which at 500 nodes
# is 25 node-status writes a second fanned out to every node watcher, for nothing the lease misses.
NODE_STATUS_REPORT_MS = 300_000

_NOT_DELETING = {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"}
_NOT_STARTED = {"key": ".status.podIP", "operator": "DoesNotExist"}


def _stage(
    name: str, expressions: list[dict[str, Any]], next_: dict[str, Any], kind: str = "Pod", delay_ms: int = 0
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "resourceRef": {"apiGroup": "v1", "kind": kind},
        "selector": {"matchExpressions": expressions},
        "next": next_,
    }
    if delay_ms:
        spec["delay"] = {"durationMilliseconds": delay_ms, "jitterDurationMilliseconds": delay_ms + delay_ms // 10}
    return {"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage", "metadata": {"name": name}, "spec": spec}


def node_stages() -> list[dict[str, Any]]:
    """The node stages: Ready at once (and again whenever the node controller marks it otherwise), then
    a status report every :data:`NODE_STATUS_REPORT_MS` as a kubelet with a lease does."""
    return [
        _stage(
            "dralab-node-initialize",
            [{"key": _NODE_READY, "operator": "NotIn", "values": ["True"]}],
            {"statusTemplate": _NODE_STATUS},
            kind="Node",
        ),
        _stage(
            "dralab-node-report",
            [{"key": _NODE_READY, "operator": "In", "values": ["True"]}],
            {"statusTemplate": _NODE_STATUS},
            kind="Node",
            delay_ms=NODE_STATUS_REPORT_MS,
        ),
    ]


def pod_stages() -> list[dict[str, Any]]:
    """The pod stages: ready without claims (the stand-in starts the others), complete (Jobs), delete."""
    return [
        _stage(
            "dralab-pod-ready",
            [_NOT_DELETING, _NOT_STARTED, {"key": ".spec.resourceClaims", "operator": "DoesNotExist"}],
            {"statusTemplate": _RUNNING_STATUS},
        ),
        _stage(
            "dralab-pod-complete",
            [
                _NOT_DELETING,
                {"key": ".status.phase", "operator": "In", "values": ["Running"]},
                {"key": ".metadata.ownerReferences.[].kind", "operator": "In", "values": ["Job"]},
            ],
            {"statusTemplate": _COMPLETED_STATUS},
        ),
        _stage(
            "dralab-pod-delete",
            [{"key": ".metadata.deletionTimestamp", "operator": "Exists"}],
            {"finalizers": {"empty": True}, "delete": True},
        ),
    ]


def kwok_config() -> str:
    """The file passed to ``kwok --config``: our node and pod stages (KWOK's own defaults for either
    apply only where the file has no stage of that kind)."""
    return yaml.safe_dump_all([*node_stages(), *pod_stages()], sort_keys=False)


def node_manifest(node: InventoryNode, kubelet_version: str) -> dict[str, Any]:
    """A Node object KWOK manages (annotation ``kwok.x-k8s.io/node: fake``), no taints."""
    labels = {
        "kubernetes.io/hostname": node.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": node.arch,
        "type": "kwok",
        NODE_LABEL: "true",
        **node.labels,
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node.name,
            "labels": labels,
            "annotations": {KWOK_NODE_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {},
        "status": {
            "allocatable": dict(NODE_CAPACITY),
            "capacity": dict(NODE_CAPACITY),
            "nodeInfo": {
                "architecture": node.arch,
                "operatingSystem": "linux",
                "kubeletVersion": kubelet_version,
                "kubeProxyVersion": kubelet_version,
                "containerRuntimeVersion": "kwok",
                "kernelVersion": "kwok",
                "osImage": "kwok",
                "bootID": "",
                "machineID": "",
                "systemUUID": "",
            },
        },
    }


def node_manifests(inventory: Inventory, kubelet_version: str) -> list[dict[str, Any]]:
    return [node_manifest(node, kubelet_version) for node in inventory.nodes]
