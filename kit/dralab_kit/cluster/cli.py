"""``dralab cluster``: build, start and operate the local Kubernetes 1.35 cluster."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from dralab_kit.cluster.layout import DEFAULT_NAME

if TYPE_CHECKING:
    from rich.console import Console

Command = TypeVar("Command", bound=Callable[..., Any])

_name_option = click.option("--name", default=DEFAULT_NAME, show_default=True, help="cluster name")


def _console() -> Console:  # rich is imported lazily: `dralab cluster --help` stays fast
    from rich.console import Console

    return Console(stderr=True)


@click.group(short_help="Build, start and operate the local Kubernetes 1.35 cluster.")
def cluster() -> None:
    """Build, start and operate the local Kubernetes 1.35 cluster (KWOK nodes, DRAConsumableCapacity on).

    \b
    Example:
      dralab cluster build          # once per machine: Go >= 1.25 and the Go module proxy
      dralab cluster up             # Lab 20's host: aio-node74-arm with two 310P3
      kubectl --kubeconfig "$(dralab cluster kubeconfig)" get nodes
      dralab cluster down
    """


def kubernetes_option(func: Command) -> Command:
    """``--kubernetes VERSION``, one of the supported versions (also the fleet benches')."""
    from dralab.versions import KUBERNETES_VERSION, SUPPORTED_KUBERNETES_VERSIONS

    return click.option(
        "--kubernetes", "kubernetes", default=KUBERNETES_VERSION, show_default=True, metavar="VERSION",
        help=f"the Kubernetes version: {', '.join(SUPPORTED_KUBERNETES_VERSIONS)}",
    )(func)


@cluster.command()
@click.option("--force", is_flag=True, help="rebuild binaries that are already built")
@click.option(
    "--real-node", is_flag=True, help="also build the kubelet, containerd, runc and the CNI plugins (profile node)"
)
@kubernetes_option
def build(force: bool, real_node: bool, kubernetes: str) -> None:
    """Build kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, etcd and kwok.

    Binaries land in ${DRALAB_CACHE:-~/.cache/dralab}/bin/<version>/; built ones are skipped.
    --real-node adds kubelet, containerd, ctr, containerd-shim-runc-v2, runc (needs gcc and
    libseccomp-dev) and the CNI plugins bridge, host-local and loopback.

    \b
    Example:
      dralab cluster build
      dralab cluster build --real-node
      dralab cluster build --kubernetes v1.37.2
    """
    from dralab_kit.cluster import build as b

    console = _console()
    for result in b.build(force=force, real_node=real_node, version=kubernetes):
        if result.built:
            console.print(f"built {', '.join(result.built)} in {result.seconds:.1f}s")
        if result.skipped:
            console.print(f"already built: {', '.join(result.skipped)}")
    console.print(f"binaries in {b.bin_dir(kubernetes)}")


@cluster.command()
@_name_option
@click.option("--devices", default=None, help="device inventory: a YAML file or a shipped name (default lab20)")
@click.option(
    "--fleet",
    default=None,
    help="simulate NODESxDEVICES (e.g. 50x8): that many KWOK nodes with shareable fake GPUs, their drivers in one "
    "process and their kubelet stand-ins in another (instead of --devices)",
)
@click.option("--config", "config", default=None, type=click.Path(dir_okay=False), help="dralab config file")
@click.option(
    "--real-node",
    is_flag=True,
    help="run the inventory's first node as a real kubelet + containerd + runc (build with --real-node first)",
)
@click.option(
    "--pod-network",
    is_flag=True,
    default=None,
    help="with --real-node: Services for pods (kube-proxy) and an apiserver address pods reach; dralab itself is "
    "then installed from its chart, not started as host processes (profile node-chart)",
)
@click.option(
    "--feature-gates",
    default=None,
    help="more control-plane gates for the components this start launches, e.g. DRAExtendedResource=true",
)
@kubernetes_option
def up(
    name: str, devices: str | None, fleet: str | None, config: str | None, real_node: bool, pod_network: bool | None,
    feature_gates: str | None, kubernetes: str,
) -> None:
    """Bring the cluster up (or reuse it when it runs) and wait until it is ready.

    \b
    Example:
      dralab cluster up
      dralab cluster up --name big --devices dralab/model/inventories/nvidia-gpus.yaml
      dralab cluster up --name dralab-node --real-node    # the `node` profile's cluster
      dralab cluster up --name k137 --kubernetes v1.37.2
      dralab cluster up --name fleet --fleet 50x8   # 50 simulated nodes, 8 GPUs each
      dralab cluster up --name dralab-node --real-node --pod-network   # for the chart (dralab infra up --profile node)
    """
    from dralab_kit.cluster.api import ensure_cluster

    if fleet:
        from dralab_kit.cluster.fleet import parse_size

        if devices:
            raise click.UsageError("--fleet generates the device inventory: give --fleet or --devices, not both")
        devices = parse_size(fleet).ref
    if feature_gates:
        import os

        from dralab_kit.cluster.components import EXTRA_GATES_ENV
        from dralab_kit.cluster.components import feature_gates as gates

        os.environ[EXTRA_GATES_ENV] = feature_gates
        gates()  # a malformed gate fails here, before anything starts
    console = _console()
    with console.status("bringing the cluster up") as spinner:

        def say(msg: str) -> None:
            spinner.update(msg)
            console.print(msg)

        handle = ensure_cluster(name, devices=devices, config=config, say=say, real_node=real_node,
                                kubernetes=kubernetes, pod_network=pod_network)
    click.echo(str(handle.kubeconfig))


@cluster.command()
@_name_option
@click.option("--all", "all_", is_flag=True, help="take down every cluster under DRALAB_HOME")
@click.option("--purge-logs", is_flag=True, help="delete the logs too")
def down(name: str, all_: bool, purge_logs: bool) -> None:
    """Stop every process the cluster started and delete its state (logs are kept).

    \b
    Example:
      dralab cluster down
      dralab cluster down --all
    """
    from dralab_kit.cluster.api import down as do_down
    from dralab_kit.cluster.api import list_clusters

    names = list_clusters() if all_ else [name]
    for cluster_name in names:
        count = do_down(cluster_name, keep_logs=not purge_logs)
        click.echo(f"cluster {cluster_name}: stopped {count} processes")


@cluster.command()
@_name_option
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
def status(name: str, as_json: bool) -> None:
    """Show each component's process and health; exits 1 when one is unhealthy or crashed.

    \b
    Example:
      dralab cluster status
    """
    import json
    from dataclasses import asdict

    from dralab_kit.cluster.api import status as get_status

    rows = get_status(name)
    bad = [r for r in rows if r.state == "crashed" or r.healthy is False]
    if as_json:
        click.echo(json.dumps([asdict(r) for r in rows], indent=2))
    else:
        from rich.table import Table

        table = Table(title=f"cluster {name}")
        for col in ("component", "state", "pid", "healthy", "rss MiB", "detail"):
            table.add_column(col)
        for r in rows:
            healthy = {True: "yes", False: "NO", None: "-"}[r.healthy]
            table.add_row(r.name, r.state, str(r.pid or "-"), healthy, f"{r.rss / 2**20:.0f}", r.detail)
        from rich.console import Console

        Console().print(table)
    if bad:
        sys.exit(1)


@cluster.command()
@_name_option
def kubeconfig(name: str) -> None:
    """Print the path of the cluster's admin kubeconfig.

    \b
    Example:
      export KUBECONFIG=$(dralab cluster kubeconfig)
    """
    from dralab.errors import UserError
    from dralab_kit.cluster.api import get_cluster

    handle = get_cluster(name)
    if handle is None:
        raise UserError(f"cluster {name} is not up; run `dralab cluster up --name {name}`")
    click.echo(str(handle.kubeconfig))


def _component_command(verb: str, helptext: str) -> click.Command:
    @cluster.command(name=verb, help=helptext)
    @_name_option
    @click.argument("component")
    def command(name: str, component: str) -> None:
        from dralab_kit.cluster import api

        if verb == "stop":
            was = api.stop(name, component)
            click.echo(f"{component} stopped" if was else f"{component} was not running")
        elif verb == "start":
            api.start(name, component)
            click.echo(f"{component} running")
        else:
            api.restart(name, component)
            click.echo(f"{component} restarted")

    return command


_COMPONENTS_HELP = (
    "COMPONENT: etcd, apiserver, controller-manager, scheduler, kwok, webhook, driver/NODE, kubelet/NODE; "
    "with a real node also containerd/NODE and node-ns/NODE (`kubelet` and `containerd` name the real node's)."
)
stop_cmd = _component_command(
    "stop", f"Stop one component (fault injection). {_COMPONENTS_HELP}\n\n\b\nExample:\n  dralab cluster stop scheduler"
)
start_cmd = _component_command(
    "start",
    f"Start a stopped component and wait until healthy. {_COMPONENTS_HELP}\n\n\b\nExample:\n"
    "  dralab cluster start driver/aio-node74-arm",
)
restart_cmd = _component_command(
    "restart", f"Restart one component. {_COMPONENTS_HELP}\n\n\b\nExample:\n  dralab cluster restart apiserver"
)


@cluster.command(name="wipe-cdi")
@_name_option
@click.argument("node")
def wipe_cdi(name: str, node: str) -> None:
    """Delete the node's CDI specs, as a reboot empties /var/run/cdi.

    \b
    Example:
      dralab cluster wipe-cdi aio-node74-arm
    """
    from dralab_kit.cluster.api import wipe_cdi as do_wipe

    click.echo(f"removed {do_wipe(name, node)} CDI spec files")


@cluster.command()
@_name_option
@click.option("--stay-down", is_flag=True, help="leave the node off until the next `dralab cluster up`")
@click.argument("node")
def reboot(name: str, node: str, stay_down: bool) -> None:
    """Reboot the real node: kubelet, containerd, shims and driver stop at once, /run and the CDI
    folder are emptied, the node gets a new boot id, and everything starts again.

    \b
    Example:
      dralab cluster reboot aio-node74-arm --name dralab-node
    """
    from dralab_kit.cluster.api import reboot as do_reboot

    seconds = do_reboot(name, node, say=click.echo, start=not stay_down)
    if stay_down:
        click.echo(f"node {node} is off; `dralab cluster up --name {name} --real-node` starts it again")
    else:
        click.echo(f"node {node} back in {seconds:.1f}s (its pods restart on their own: watch them with kubectl)")


@cluster.group()
def fault() -> None:
    """Inject device faults into the local cluster's fake backend.

    \b
    Example:
      dralab cluster fault device-health gpu-node gpu-0 unhealthy --reason xid-79
    """


@fault.command(name="device-health")
@_name_option
@click.option("--reason", default="injected", show_default=True, help="why (the taint's value, e.g. xid-79)")
@click.argument("node")
@click.argument("device")
@click.argument("health", type=click.Choice(["unhealthy", "healthy"]))
def fault_device_health(name: str, reason: str, node: str, device: str, health: str) -> None:
    """Mark DEVICE of NODE unhealthy or healthy again; the driver taints it (dralab.io/unhealthy) or clears it.

    \b
    Example:
      dralab cluster fault device-health gpu-node gpu-0 unhealthy --reason xid-79
      dralab cluster fault device-health gpu-node gpu-0 healthy
    """
    from dralab_kit.cluster.api import device_health

    entries = device_health(name, node, device, health == "healthy", reason)
    click.echo(f"{node}/{device} {health}; unhealthy now: {', '.join(sorted(entries)) or 'none'}")
