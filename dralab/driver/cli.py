"""``dralab driver``: run the node driver, or preview the slices and CDI specs it would produce."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import TYPE_CHECKING

import click
import yaml

from dralab.driver.devices import BACKENDS
from dralab.driver.health import TAINT_MODES
from dralab.driver.library import MODES

if TYPE_CHECKING:
    from dralab.config import Config
    from dralab.driver.devices import Backend


@click.group()
def driver() -> None:
    """The DRA node driver (kubelet plugin) and its offline previews.

    \b
    Example:
      dralab driver slices --node aio-node74-arm
      dralab driver run --backend fake --node aio-node74-arm --kubeconfig ~/.dralab/clusters/dralab/kubeconfig
    """


@driver.command()
@click.option("--backend", type=click.Choice(BACKENDS), default=None, help="Device backend (default: config).")
@click.option("--node", required=True, help="This node's name (the pool name).")
@click.option("--devices", "devices_file", help="Device inventory file or shipped name (fake backend).")
@click.option("--kubeconfig", type=click.Path(dir_okay=False), help="Kubeconfig (default: in-cluster, then ~/.kube).")
@click.option("--plugin-dir", help="Kubelet plugin dir (holds <driver>/dra.sock).")
@click.option("--registry-dir", help="Kubelet plugin registry dir (holds <driver>-reg.sock).")
@click.option("--cdi-dir", help="Where CDI specs are written (what /var/run/cdi is on a node).")
@click.option("--state-dir", help="Checkpoint, per-claim dirs and fake device nodes.")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), help="dralab config file.")
@click.option("--metrics-port", type=int, help="Serve /metrics, /healthz, /readyz on this port (0: any free port).")
@click.option("--metrics-host", default="127.0.0.1", show_default=True)
@click.option("--enforcement-library", help="Host path of the enforcement library (default: dralab's vcore build).")
@click.option(
    "--enforcement",
    type=click.Choice(MODES),
    help="required: refuse claims while the enforcement library is unusable; none: prepare them without it "
    "(quotas not enforced). Default: the config's driver.enforcement (required).",
)
@click.option("--npu-smi", default="npu-smi", show_default=True, help="npu-smi binary (ascend backend).")
@click.option("--resync-seconds", type=float, default=300.0, show_default=True,
              help="Slice republish check period (a safety net: a watch on the node's slices republishes at once).")
@click.option("--no-publish", is_flag=True, help="Do not publish ResourceSlices (claims are still read from the API).")
@click.option(
    "--claim-gid",
    type=click.IntRange(0),
    help="Group of claim directories and shared device files (mode 0770/0660); non-root workloads add it "
    "to their supplementalGroups. Default: the driver's own group.",
)
@click.option(
    "--no-claim-cache",
    is_flag=True,
    help="Do not watch ResourceClaims: every Prepare GETs its claims (less apiserver watch load, slower Prepare).",
)
@click.option(
    "--reconcile-seconds",
    type=click.FloatRange(min=1.0),
    default=60.0,
    show_default=True,
    help="How often prepared claims are checked against the apiserver (released where the claim is gone). "
    "Each check is one GET per prepared claim: on a large fleet raise it (README, Scale).",
)
@click.option(
    "--claim-dir-size",
    help="Give each claim folder its own tmpfs of this size (e.g. 64Mi) so a claim cannot fill the host's disk; "
    "needs CAP_SYS_ADMIN and bidirectional mount propagation of --state-dir.",
)
@click.option(
    "--device-taints",
    type=click.Choice(TAINT_MODES),
    default="auto",
    show_default=True,
    envvar="DRALAB_DEVICE_TAINTS",
    help="Publish unhealthy devices with the dralab.io/unhealthy taint (DRA device taints). auto: where the "
    "apiserver's version has DRADeviceTaints on by default (1.36+); on: the cluster enables the gate "
    "(1.35 with --feature-gates DRADeviceTaints=true); off: never.",
)
@click.option(
    "--unhealthy-noexecute-after",
    type=click.FloatRange(min=0, min_open=True),
    envvar="DRALAB_UNHEALTHY_NOEXECUTE_AFTER",
    help="Seconds a device may stay unhealthy before its taint becomes NoExecute (pods using it are evicted). "
    "Default: NoSchedule only.",
)
@click.option(
    "--health-seconds", type=click.FloatRange(min=0.1), default=5.0, show_default=True,
    help="How often the backend's device health is read.",
)
@click.option(
    "--no-claim-status",
    is_flag=True,
    help="Do not write the claim's status.devices (driver, pool, device, shareID, the applied quota) after Prepare.",
)
@click.option("--no-metrics-authorization", is_flag=True,
              help="Serve /metrics to anyone (a trusted scrape network only): driver.metricsAuthorization false.")
def run(**kw: object) -> None:
    """Serve the kubelet plugin sockets, publish ResourceSlices and prepare claims until SIGTERM.

    \b
    Example:
      dralab driver run --backend fake --node aio-node74-arm \\
        --kubeconfig ~/.dralab/clusters/dralab/kubeconfig \\
        --plugin-dir /tmp/n/plugins --registry-dir /tmp/n/registry --cdi-dir /tmp/n/cdi --state-dir /tmp/n/state
    """
    from dralab.driver.runner import DriverProcess, RunOptions

    opts = RunOptions(
        node=str(kw["node"]),
        backend=kw["backend"],  # type: ignore[arg-type]
        devices_file=kw["devices_file"],  # type: ignore[arg-type]
        kubeconfig=kw["kubeconfig"],  # type: ignore[arg-type]
        plugin_dir=kw["plugin_dir"],  # type: ignore[arg-type]
        registry_dir=kw["registry_dir"],  # type: ignore[arg-type]
        cdi_dir=kw["cdi_dir"],  # type: ignore[arg-type]
        state_dir=kw["state_dir"],  # type: ignore[arg-type]
        config=kw["config_file"],  # type: ignore[arg-type]
        metrics_port=kw["metrics_port"],  # type: ignore[arg-type]
        metrics_host=str(kw["metrics_host"]),
        enforcement_library=kw["enforcement_library"],  # type: ignore[arg-type]
        enforcement=kw["enforcement"],  # type: ignore[arg-type]
        npu_smi=str(kw["npu_smi"]),
        resync_seconds=float(kw["resync_seconds"]),  # type: ignore[arg-type]
        reconcile_seconds=float(kw["reconcile_seconds"]),  # type: ignore[arg-type]
        publish=not kw["no_publish"],
        claim_gid=kw["claim_gid"],  # type: ignore[arg-type]
        claim_cache=not kw["no_claim_cache"],
        claim_dir_size=kw["claim_dir_size"],  # type: ignore[arg-type]
        device_taints=str(kw["device_taints"]),
        unhealthy_noexecute_after=kw["unhealthy_noexecute_after"],  # type: ignore[arg-type]
        health_seconds=float(kw["health_seconds"]),  # type: ignore[arg-type]
        claim_status=not kw["no_claim_status"],
        metrics_authorization=False if kw["no_metrics_authorization"] else None,
    )
    proc = DriverProcess(opts)

    def _stop(signum: int, frame: object) -> None:
        proc._stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    proc.start()
    try:
        proc.wait()
    finally:
        proc.stop()


def _backend(
    backend: str | None, node: str, devices_file: str | None, config_file: str | None, state_dir: str | None
) -> tuple[Config, Backend]:
    from dralab.config import load_config
    from dralab.driver.devices import BackendOptions, load_backend

    cfg = load_config(config_file)
    options = BackendOptions(
        node=node,
        state_dir=Path(state_dir or cfg.driver.state_dir),
        devices_file=devices_file,
        inject_device_nodes=cfg.driver.inject_device_nodes,
        dry_run=True,
        table=cfg.vendors,
    )
    return cfg, load_backend(backend or cfg.driver.backend, options)


@driver.command()
@click.option("--backend", type=click.Choice(BACKENDS), default=None, help="Device backend (default: config).")
@click.option("--node", required=True, help="The node whose slices to preview.")
@click.option("--devices", "devices_file", help="Device inventory file or shipped name (fake backend).")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), help="dralab config file.")
def slices(backend: str | None, node: str, devices_file: str | None, config_file: str | None) -> None:
    """Print the ResourceSlice(s) the driver would publish for NODE, as YAML (nothing is published).

    \b
    Example:
      dralab driver slices --backend fake --node aio-node74-arm
    """
    from dralab.driver.slices import build_slices

    cfg, be = _backend(backend, node, devices_file, config_file, None)
    devices = be.enumerate()
    docs = []
    for key in dict.fromkeys(d.vendor for d in devices):
        vendor = cfg.vendors.get(key)
        docs += build_slices(vendor, node, [d for d in devices if d.vendor == key])
    click.echo(yaml.safe_dump_all(docs, sort_keys=False), nl=False)


@driver.command()
@click.option("--claim", "claim_file", required=True, type=click.Path(dir_okay=False), help="Allocated ResourceClaim.")
@click.option("--devices", "devices_file", help="Device inventory file or shipped name (fake backend).")
@click.option("--backend", type=click.Choice(BACKENDS), default=None, help="Device backend (default: config).")
@click.option("--node", help="Node (default: the pool of the claim's results).")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), help="dralab config file.")
@click.option("--cdi-dir", help="CDI dir the paths refer to (default: config).")
@click.option("--state-dir", help="State dir the host paths refer to (default: config).")
@click.option("--enforcement-library", help="Host path of the enforcement library (default: dralab's vcore build).")
@click.option(
    "--enforcement",
    type=click.Choice(MODES),
    help="required: fail, as Prepare does, while the enforcement library is unusable; none: preview the spec "
    "without it. Default: the config's driver.enforcement (required).",
)
def cdi(
    claim_file: str,
    devices_file: str | None,
    backend: str | None,
    node: str | None,
    config_file: str | None,
    cdi_dir: str | None,
    state_dir: str | None,
    enforcement_library: str | None,
    enforcement: str | None,
) -> None:
    """Print the CDI spec the driver would write for an allocated claim (nothing is written).

    Fails (exit 2, Prepare's message) when the claim needs the enforcement library and it is
    missing, unreadable or built for another machine, unless --enforcement none.

    \b
    Example:
      kubectl get resourceclaim -n dra-ascend-e2e dra-ascend-e2e-ascend-share-a-app-ascend310p -o yaml > claim.yaml
      dralab driver cdi --claim claim.yaml
    """
    from dralab.driver.claims import InMemoryClaimSource
    from dralab.driver.library import check_mode
    from dralab.driver.state import DriverState, load_yaml_claim, preview_spec
    from dralab.errors import UserError

    path = Path(claim_file)
    if not path.is_file():
        raise UserError(f"claim file {path} not found")
    claim = load_yaml_claim(path.read_text(), str(path))
    results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
    if not (claim.get("metadata") or {}).get("uid"):
        raise UserError(f"{path}: the claim has no metadata.uid: save an allocated claim from the cluster with -o yaml")
    if not results:
        raise UserError(f"{path}: the claim has no status.allocation.devices.results: preview an allocated claim")
    node = node or str(results[0].get("pool"))
    cfg, be = _backend(backend, node, devices_file, config_file, state_dir)
    drivers = list(dict.fromkeys(str(r.get("driver")) for r in results))
    library = enforcement_library or cfg.driver.enforcement_library
    mode = check_mode(enforcement or cfg.driver.enforcement, "--enforcement")
    docs = []
    for name in drivers:
        vendor = cfg.vendors.by_driver(name)
        if vendor is None:
            raise UserError(f"{path}: driver {name!r} is not in the vendor table")
        state = DriverState(
            vendor=vendor,
            node=node,
            backend=be,
            claims=InMemoryClaimSource(),
            cdi_dir=Path(cdi_dir or cfg.driver.cdi_dir),
            state_dir=Path(state_dir or cfg.driver.state_dir),
            library=Path(library) if library else None,
            boot_id="",
            enforcement_mode=mode,
        )
        docs.append(preview_spec(state, claim))
    click.echo(yaml.safe_dump_all(docs, sort_keys=False), nl=False)
