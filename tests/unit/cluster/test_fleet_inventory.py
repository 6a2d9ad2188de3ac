"""The fleet inventory generator: sizes, naming, one pool per node, realistic topology."""

from __future__ import annotations

from pathlib import Path

import pytest

from dralab.driver.devices.fake import from_inventory
from dralab.errors import UserError
from dralab.model.inventory import parse_inventory
from dralab.yamlio import load
from dralab_kit.cluster import fleet


@pytest.mark.parametrize("text,nodes,devices", [("50x8", 50, 8), ("fleet:200x8", 200, 8), (" 3 X 2 ", 3, 2)])
def test_parse_size(text: str, nodes: int, devices: int) -> None:
    size = fleet.parse_size(text)
    assert (size.nodes, size.devices) == (nodes, devices)
    assert size.ref == f"fleet:{nodes}x{devices}"


@pytest.mark.parametrize("text,fragment", [("50", "NODESxDEVICES"), ("0x8", "nodes must be"),
                                           ("10x0", "devices per node"), ("10x99", "devices per node")])
def test_parse_size_refuses(text: str, fragment: str) -> None:
    with pytest.raises(UserError, match=fragment):
        fleet.parse_size(text)


def test_inventory_parses_as_the_fake_backend_reads_it() -> None:
    size = fleet.FleetSize(12, 8)
    inv = parse_inventory(load(fleet.inventory_text(size), "fleet"), "fleet")
    assert len(inv.nodes) == 12
    assert [n.name for n in inv.nodes][:2] == ["fleet-000", "fleet-001"]
    assert len({n.name for n in inv.nodes}) == 12  # one pool per node: the pool is the node's name
    for node in inv.nodes:
        assert [d.name for d in node.devices] == [f"gpu-{i}" for i in range(8)]
        assert {d.vendor for d in node.devices} == {"nvidia"}
        assert len({d.model for d in node.devices}) == 1  # a node is homogeneous
        assert node.labels[fleet.FLEET_LABEL] == "true"
    uuids = [d.uuid for n in inv.nodes for d in n.devices]
    assert len(set(uuids)) == len(uuids) == 96


def test_models_rotate_and_topology_is_two_socket() -> None:
    inv = parse_inventory(fleet.inventory(fleet.FleetSize(3, 8)))
    assert [n.devices[0].model for n in inv.nodes] == ["L4", "A100", "H100"]
    devs = inv.nodes[0].devices
    assert [d.numa_node for d in devs] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert [d.pcie_root for d in devs[:4]] == ["pci0000:00", "pci0000:00", "pci0000:10", "pci0000:10"]
    assert from_inventory(devs[2]).attributes == {"resource.kubernetes.io/pcieRoot": "pci0000:10", "numaNode": 0}


def test_inventory_is_deterministic_and_names_pad_to_the_fleet() -> None:
    assert fleet.inventory(fleet.FleetSize(2, 2)) == fleet.inventory(fleet.FleetSize(2, 2))
    assert fleet.node_name(7, 5000) == "fleet-0007"
    assert fleet.is_fleet_ref("fleet:2x2") and not fleet.is_fleet_ref("lab20")


@pytest.mark.parametrize("nodes,shards", [(1, 1), (50, 1), (51, 2), (200, 4), (500, 10)])
def test_a_fleet_is_hosted_fifty_nodes_to_a_process(nodes: int, shards: int) -> None:
    keys = fleet.shard_keys(nodes)
    assert keys == [f"shard-{i}" for i in range(shards)]
    names = [fleet.node_name(i, nodes) for i in range(nodes)]
    hosted = [n for key in keys for n in fleet.shard_of(names, key)]
    assert hosted == names  # every node exactly once, in inventory order


@pytest.mark.parametrize("key,fragment", [("shard-4", "shards 0 to 3"), ("fleet", "write shard-N"),
                                          ("shard-x", "write shard-N")])
def test_an_unknown_shard_is_refused_by_name(key: str, fragment: str) -> None:
    names = [fleet.node_name(i, 200) for i in range(200)]
    with pytest.raises(UserError, match=fragment):
        fleet.shard_of(names, key)


def test_the_node_layer_runs_one_driver_and_one_stand_in_process_per_shard(tmp_path: Path) -> None:
    from dralab_kit.cluster.components import fleet_specs
    from dralab_kit.cluster.layout import Layout

    layout = Layout.of("f", home=tmp_path)
    ports = {"driver": {"shard-0": 1001, "shard-1": 1002}, "kubelet": {"shard-0": 2001, "shard-1": 2002}}
    specs = fleet_specs(layout, ports, None, 60)
    assert sorted(specs) == ["driver/shard-0", "driver/shard-1", "kubelet/shard-0", "kubelet/shard-1"]
    argv = specs["driver/shard-1"].argv
    assert argv[argv.index("--shard") + 1] == "shard-1" and argv[argv.index("--port") + 1] == "1002"
    assert argv[argv.index("--reconcile-seconds") + 1] == "300"  # README "Scale": 300 s from 51 to 500 nodes
    assert "--reconcile-seconds" not in specs["kubelet/shard-0"].argv


@pytest.mark.parametrize(("nodes", "seconds"), [(1, 60.0), (50, 60.0), (51, 300.0), (500, 300.0), (501, 600.0),
                                                (fleet.MAX_NODES, 600.0)])
def test_a_fleets_drivers_reconcile_as_the_chart_table_advises_for_its_size(nodes: int, seconds: float) -> None:
    assert fleet.driver_reconcile_seconds(nodes) == seconds


def test_a_fleet_process_quiets_grpc_idle_wakeups(monkeypatch: pytest.MonkeyPatch) -> None:
    """The deallocated-server check of grpc's sync servers is lengthened in the shard process; a grpc
    without that constant is left alone (only idle cost differs), never broken."""
    import grpc._server

    from dralab_kit.cluster import fleetnode

    monkeypatch.setattr(grpc._server, "_DEALLOCATED_SERVER_CHECK_PERIOD_S", 1.0)
    fleetnode._quiet_grpc_servers()
    assert grpc._server._DEALLOCATED_SERVER_CHECK_PERIOD_S == fleetnode.GRPC_DEALLOCATED_CHECK_SECONDS
    monkeypatch.delattr(grpc._server, "_DEALLOCATED_SERVER_CHECK_PERIOD_S")
    fleetnode._quiet_grpc_servers()
    assert not hasattr(grpc._server, "_DEALLOCATED_SERVER_CHECK_PERIOD_S")
