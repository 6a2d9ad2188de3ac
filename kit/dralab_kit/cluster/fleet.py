"""A fleet's device inventory: NODES simulated nodes with DEVICES shareable fake GPUs each (pure).

``dralab cluster up --fleet 50x8`` writes this inventory (the format of ``dralab/model/inventories``,
read by the fake backend) and runs the fleet's drivers and kubelet stand-ins in a few processes, one
per :data:`SHARD_NODES` nodes and role (:mod:`dralab_kit.cluster.fleetnode`). Nodes are homogeneous,
as real fleets are bought, and the models rotate node by node so type selection has something to
choose between. On each node the devices sit on PCIe roots of two devices and the first half on NUMA
node 0, the second on NUMA node 1 (a two-socket host). Everything is derived from the node's and
device's position: the same ``NODESxDEVICES`` gives the same inventory, uuids included.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any

from dralab.errors import UserError

FLEET_PREFIX = "fleet:"
NODE_PREFIX = "fleet-"
FLEET_LABEL = "dralab.io/fleet"
ZONES = 3
SHARD_NODES = 50  # simulated nodes per process of the node layer (see shard_keys)
SHARD_PREFIX = "shard-"
DEVICES_PER_ROOT = 2
MAX_NODES = 5000
MAX_DEVICES = 16
# The chart's ``driver.reconcileSeconds`` that README "Scale" advises, by fleet size (up to N nodes); a
# fleet's drivers run with it. Each reconcile GETs every prepared claim: at 60 s, a 500-node fleet filled
# to 4,000 claims made 67 GETs a second, 6.6 claim GETs per pod in its 10-minute fill against 2.0 at 50 nodes.
RECONCILE_SECONDS_BY_NODES = ((50, 60.0), (500, 300.0), (MAX_NODES, 600.0))
# kube-controller-manager's --node-monitor-grace-period on a fleet (the default is 50 s). KWOK renews every
# simulated node's Lease from the same cores the control plane saturates in a fill, and its renewals reach the
# controller late: a 500-node fleet on v1.37.2 had 234 NodeNotReady events in one fill and 214 in the next
# (nodes tainted mid-phase, 13 pods evicted), which say nothing of dralab or of a fleet whose kubelets run on
# their own machines. Longer than any phase, so a node goes NotReady only if its Lease stops for good.
NODE_GRACE_SECONDS = 900
_NAMESPACE = uuid.UUID("6f1c2a52-1d0e-4c53-9a55-0d5f1e7c2b11")  # fixed: uuids are stable across runs


@dataclass(frozen=True)
class Model:
    """One GPU model as the inventory (and so the slice) describes it."""

    model: str
    product_name: str
    memory: str


MODELS = (
    Model("L4", "NVIDIA L4", "23034Mi"),
    Model("A100", "NVIDIA A100-SXM4-40GB", "40960Mi"),
    Model("H100", "NVIDIA H100 80GB HBM3", "81559Mi"),
)


@dataclass(frozen=True)
class FleetSize:
    """How big a fleet is."""

    nodes: int
    devices: int

    @property
    def ref(self) -> str:
        """How a cluster records it (``fleet:50x8``)."""
        return f"{FLEET_PREFIX}{self.nodes}x{self.devices}"


def parse_size(text: str) -> FleetSize:
    """``50x8`` (or ``fleet:50x8``) -> FleetSize; a clear error for anything else."""
    raw = text.strip().removeprefix(FLEET_PREFIX)
    match = re.fullmatch(r"(\d+)\s*[xX]\s*(\d+)", raw)
    if not match:
        raise UserError(f"fleet size {text!r}: write NODESxDEVICES, e.g. 50x8 (50 nodes with 8 devices each)")
    nodes, devices = int(match.group(1)), int(match.group(2))
    if not 1 <= nodes <= MAX_NODES:
        raise UserError(f"fleet size {text!r}: nodes must be 1 to {MAX_NODES}, not {nodes}")
    if not 1 <= devices <= MAX_DEVICES:
        raise UserError(f"fleet size {text!r}: devices per node must be 1 to {MAX_DEVICES}, not {devices}")
    return FleetSize(nodes, devices)


def is_fleet_ref(ref: str | None) -> bool:
    return bool(ref) and str(ref).startswith(FLEET_PREFIX)


def node_name(index: int, nodes: int) -> str:
    """``fleet-007`` of a fleet of up to 999 nodes: zero-padded so names sort as the nodes are numbered."""
    return f"{NODE_PREFIX}{index:0{max(3, len(str(nodes - 1)))}d}"


def shard_keys(nodes: int) -> list[str]:
    """The node layer's processes for a fleet of ``nodes``: ``shard-0`` .. one per :data:`SHARD_NODES` nodes.

    One process per role hosting every node stalled at 500 nodes: about 4,200 threads (each node's
    gRPC servers, watches and loops), some 300 of them runnable at once, queued on one interpreter
    lock, so the driver's own apiserver reads timed out unread. Shards of 50 nodes keep each
    interpreter's queue short; the kernel spreads the processes over the cores.
    """
    return [f"{SHARD_PREFIX}{i}" for i in range(-(-nodes // SHARD_NODES))]


def shard_of(names: list[str], key: str) -> list[str]:
    """The nodes shard ``key`` hosts: a contiguous block of :data:`SHARD_NODES`, in inventory order."""
    if not key.startswith(SHARD_PREFIX) or not key.removeprefix(SHARD_PREFIX).isdigit():
        raise UserError(f"fleet shard {key!r}: write {SHARD_PREFIX}N, N from 0 to {len(shard_keys(len(names))) - 1}")
    index = int(key.removeprefix(SHARD_PREFIX))
    block = names[index * SHARD_NODES:(index + 1) * SHARD_NODES]
    if not block:
        raise UserError(f"fleet shard {key!r}: a fleet of {len(names)} nodes has shards 0 to "
                        f"{len(shard_keys(len(names))) - 1}")
    return block


def driver_reconcile_seconds(nodes: int) -> float:
    """How often a fleet of ``nodes``' drivers reconcile (:data:`RECONCILE_SECONDS_BY_NODES`)."""
    return next(seconds for most, seconds in RECONCILE_SECONDS_BY_NODES if nodes <= most)


def model_of(node_index: int) -> Model:
    return MODELS[node_index % len(MODELS)]


def device(node: str, node_index: int, index: int, per_node: int) -> dict[str, Any]:
    """One GPU of one node, in the inventory's format."""
    model = model_of(node_index)
    return {
        "vendor": "nvidia",
        "name": f"gpu-{index}",
        "uuid": f"GPU-{uuid.uuid5(_NAMESPACE, f'{node}/{index}')}",
        "productName": model.product_name,
        "model": model.model,
        "memory": model.memory,
        "cores": 100,
        "physicalID": index,
        "index": index,
        "pcieRoot": f"pci0000:{(index // DEVICES_PER_ROOT) * 0x10:02x}",
        "numaNode": 0 if index < (per_node + 1) // 2 else 1,
    }


def inventory(size: FleetSize) -> dict[str, Any]:
    """The fleet's inventory document (``{nodes: [{name, labels, devices}]}``)."""
    nodes = []
    for i in range(size.nodes):
        name = node_name(i, size.nodes)
        nodes.append(
            {
                "name": name,
                "labels": {
                    FLEET_LABEL: "true",
                    "topology.kubernetes.io/zone": f"zone-{i % ZONES}",
                    "nvidia.com/gpu.product": model_of(i).model,
                },
                "devices": [device(name, i, d, size.devices) for d in range(size.devices)],
            }
        )
    return {"nodes": nodes}


def inventory_text(size: FleetSize) -> str:
    """The inventory as the YAML file a cluster keeps (one flow mapping per device: small and greppable)."""
    import yaml

    head = f"# generated by `dralab cluster up --fleet {size.nodes}x{size.devices}` (dralab_kit.cluster.fleet)\n"
    return head + yaml.safe_dump(inventory(size), sort_keys=False, default_flow_style=None, width=200)
