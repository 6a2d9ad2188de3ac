"""The simulated node layer of a fleet: nodes' drivers and stand-ins, a shard of nodes per process.

A local cluster runs one ``dralab driver run`` and one kubelet stand-in per KWOK node; at 500 nodes
that is 1,000 Python interpreters on a small machine. A fleet (``dralab cluster up --fleet``)
runs instead, per shard of :data:`dralab_kit.cluster.fleet.SHARD_NODES` nodes (``shard-0``, ...):

- ``driver/shard-N``: one :class:`dralab.driver.runner.DriverProcess` per node, in one process: the
  driver's own slice publisher (one pool per node), gRPC servers on each node's sockets, claim
  status writes. Backends come from one parsed inventory. The claim cache is off by default: each
  node's cache watches *every* claim (the apiserver cannot select claims by node), so N caches in
  one process decode every claim event N times; Prepare then GETs its claims, as ``--no-claim-cache``.
  Each driver reconciles every :func:`dralab_kit.cluster.fleet.driver_reconcile_seconds` (the chart
  value README "Scale" advises for the fleet's size).
- ``kubelet/shard-N``: one :class:`dralab_kit.cluster.standin.runner.StandIn` per node, in one process,
  each calling its node's driver through the real gRPC sockets. This process is the simulation, not
  dralab: benches report its CPU and memory apart.

Run as ``python -m dralab_kit.cluster.fleetnode driver|kubelet --cluster NAME --shard shard-N --port PORT``.
"""

from __future__ import annotations

import argparse
import signal
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dralab.util import get_logger
from dralab_kit.cluster.layout import Layout

if TYPE_CHECKING:
    from dralab.model.vendors import VendorTable

log = get_logger("dralab.fleetnode")
# Registry scans and socket probes per node. Every probe is a connection the node's driver accepts:
# at 2 s, 200 nodes' probes cost their drivers 33 ms/s at rest. A driver that restarts is seen
# within this period (a kubelet sees it at once, through inotify).
STANDIN_PLUGIN_SECONDS = 10.0
# grpc's sync server wakes its serving thread this often only to notice a server that was garbage
# collected without stop() (grpc._server._DEALLOCATED_SERVER_CHECK_PERIOD_S, 1 s). A node has two
# servers; a shard process has a hundred, and their once-a-second wakeups, queued on one
# interpreter lock, were half of 200 nodes' driver CPU at rest (244 -> 128 ms/s). Every server
# here is stopped explicitly, so the check never has anything to find.
GRPC_DEALLOCATED_CHECK_SECONDS = 60.0
STANDIN_RESYNC_SECONDS = 120.0  # pod LISTs besides the watch: 10 s each made 500 nodes' 27 LISTs/s (README, Scale)


def _shard(layout: Layout, shard: str, table: VendorTable | None = None) -> list[Any]:
    """The inventory's nodes this process hosts."""
    from dralab.model.inventory import load_inventory
    from dralab_kit.cluster.fleet import shard_of

    nodes = load_inventory(str(layout.config_dir / "inventory.yaml"), table).nodes
    hosted = set(shard_of([n.name for n in nodes], shard))
    return [n for n in nodes if n.name in hosted]


def _quiet_grpc_servers() -> None:
    """Lengthen grpc's deallocated-server check (see :data:`GRPC_DEALLOCATED_CHECK_SECONDS`); a grpc
    without that module constant is left as it is, with a warning: only the idle cost differs."""
    import grpc._server

    if not hasattr(grpc._server, "_DEALLOCATED_SERVER_CHECK_PERIOD_S"):
        log.warning("grpc has no _DEALLOCATED_SERVER_CHECK_PERIOD_S: servers keep their 1 s idle wakeups")
        return
    grpc._server._DEALLOCATED_SERVER_CHECK_PERIOD_S = GRPC_DEALLOCATED_CHECK_SECONDS


def run_drivers(layout: Layout, shard: str, port: int, config: str | None, claim_cache: bool,
                stop: threading.Event, reconcile_seconds: float = 60.0) -> None:
    """Start the shard's nodes' drivers, serve /healthz /readyz /metrics (its nodes together), wait for ``stop``."""
    from dralab.config import load_config
    from dralab.driver.devices.fake import HEALTH_FILE, FakeBackend, from_inventory
    from dralab.driver.metrics import DriverMetrics, StatusServer
    from dralab.driver.runner import DriverProcess, RunOptions

    _quiet_grpc_servers()
    table = load_config(config).vendors
    metrics = DriverMetrics()
    drivers: list[DriverProcess] = []
    for node in _shard(layout, shard, table):
        state_dir = layout.driver_state_dir(node.name)
        options = RunOptions(
            node=node.name,
            backend="fake",
            kubeconfig=str(layout.kubeconfig),
            plugin_dir=str(layout.plugins_dir(node.name)),
            registry_dir=str(layout.registry_dir(node.name)),
            cdi_dir=str(layout.cdi_dir(node.name)),
            state_dir=str(state_dir),
            config=config,
            claim_cache=claim_cache,
            reconcile_seconds=reconcile_seconds,
        )
        backend = FakeBackend(
            node=node.name,
            devices=[from_inventory(d) for d in node.devices],
            table=table,
            dev_root=state_dir / "dev",
            health_file=state_dir / HEALTH_FILE,
        )
        drivers.append(DriverProcess(options, metrics=metrics, backend=backend).start())
    log.info("fleet drivers started", extra={"fields": {"shard": shard, "nodes": len(drivers)}})

    def started() -> tuple[bool, str]:
        return bool(drivers), f"{len(drivers)} nodes started"

    def ready() -> tuple[bool, str]:
        """Every node's pool published and its driver registered with the stand-in (no socket probes:
        hundreds of gRPC round trips per probe would be the probe's own load)."""
        for d in drivers:
            for s in d.served:
                if s.publisher is not None and not s.publisher.published.is_set():
                    return False, f"{d.options.node}: slices not yet published"
                if not s.server.registration.registered.is_set():
                    return False, f"{d.options.node}: not registered with the kubelet yet"
        return bool(drivers), f"{len(drivers)} nodes published and registered"

    status = StatusServer(metrics, started, ready, port)
    status.start()
    try:
        stop.wait()
    finally:
        status.stop()
        for d in drivers:
            d.stop()


class _AllReady:
    """What the stand-in's HTTP server reads: ``ready`` once every node's stand-in is."""

    def __init__(self) -> None:
        self.ready = threading.Event()


def run_standins(layout: Layout, shard: str, port: int, stop: threading.Event) -> None:
    """One stand-in per node of the shard, each on threads of its own, until ``stop``."""
    from prometheus_client import CollectorRegistry

    from dralab.kube import Kube
    from dralab_kit.cluster.standin.main import _server
    from dralab_kit.cluster.standin.runner import StandIn

    nodes = [n.name for n in _shard(layout, shard)]
    standins = []
    for node in nodes:
        node_dir: Path = layout.node_dir(node)
        (node_dir / "registry").mkdir(parents=True, exist_ok=True)
        kube = Kube.from_kubeconfig(str(layout.kubeconfig), user_agent="dralab-standin")
        standins.append(StandIn(node, kube, node_dir, plugin_seconds=STANDIN_PLUGIN_SECONDS,
                                resync_seconds=STANDIN_RESYNC_SECONDS))
    for s in standins:
        threading.Thread(target=s.run, name=f"standin-{s.node}", daemon=True).start()
    marker = _AllReady()
    server = _server(port, CollectorRegistry(), [marker])  # type: ignore[list-item]
    try:
        while not stop.is_set() and not all(s.ready.is_set() for s in standins):
            stop.wait(0.2)
        marker.ready.set()
        log.info("fleet stand-ins ready", extra={"fields": {"shard": shard, "nodes": len(standins)}})
        stop.wait()
    finally:
        for s in standins:
            s.stop()
        server.shutdown()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="dralab-fleetnode", description=__doc__)
    parser.add_argument("role", choices=["driver", "kubelet"])
    parser.add_argument("--cluster", required=True, help="the local cluster's name (its folder under DRALAB_HOME)")
    parser.add_argument("--shard", required=True, help="which block of nodes this process hosts (shard-0, ...)")
    parser.add_argument("--port", type=int, required=True, help="/healthz, /readyz, /metrics")
    parser.add_argument("--config", help="dralab config file (driver)")
    parser.add_argument("--claim-cache", action="store_true", help="each node's driver watches every claim")
    parser.add_argument("--reconcile-seconds", type=float, default=60.0,
                        help="how often each node's driver checks its prepared claims (the driver's flag)")
    args = parser.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    layout = Layout.of(args.cluster)
    if args.role == "driver":
        run_drivers(layout, args.shard, args.port, args.config, args.claim_cache, stop, args.reconcile_seconds)
    else:
        run_standins(layout, args.shard, args.port, stop)


if __name__ == "__main__":
    main()
