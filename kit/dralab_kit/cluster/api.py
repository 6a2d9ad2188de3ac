"""The local cluster's Python API: bring it up, find it, operate it, take it down.

``ensure_cluster`` is idempotent and guarded by a file lock, so several pytest-xdist workers
(or several ``dralab cluster up``) share one cluster: the first brings it up, the others find
it running and reuse it. Every change of the state file happens under that lock.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import importlib.util
import json
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import filelock
import httpx

from dralab.config import load_config
from dralab.errors import UserError
from dralab.kube import Kube, KubeConfig, load_files
from dralab.kube.paths import node_path
from dralab.model.budget import crd as sharebudget_crd
from dralab.model.inventory import load_inventory
from dralab.model.objects import device_classes, runtime_class
from dralab.model.volcano import crd as volcano_job_crd  # Volcano Jobs are admitted without a Volcano install
from dralab.util import WaitTimeout, atomic_write, free_port, get_logger, wait_for
from dralab.versions import check_supported
from dralab_kit.cluster import build, components, fleet, kwok, preflight
from dralab_kit.cluster.components import CONTROL_PLANE, WEBHOOK_NAMESPACE, ComponentSpec, Health
from dralab_kit.cluster.kubeconfig import render_kubeconfig
from dralab_kit.cluster.layout import DEFAULT_NAME, Layout, check_socket_paths, dralab_home
from dralab_kit.cluster.node import integration, podnet
from dralab_kit.cluster.objects import object_path
from dralab_kit.cluster.pki import Pki, ensure_pki
from dralab_kit.cluster.supervisor import (
    ProcRecord,
    is_alive,
    log_tail,
    reap_exited,
    rss_bytes,
    signal_process,
    start_process,
    stop_process,
)

log = get_logger("dralab_kit.cluster")

Say = Callable[[str], None]
LOCK_TIMEOUT = 600.0
APISERVER_TIMEOUT = 90.0
COMPONENT_TIMEOUT = 60.0
NODE_READY_SECONDS = 0.25  # more per node beyond the first (nodes_ready_timeout)
FLEET_TIMEOUT = 600.0  # a fleet's drivers publish and register hundreds of nodes before they are ready


def _quiet(_: str) -> None:
    pass


def webhook_available() -> bool:
    """True when dralab's webhook (server and registration) is installed."""
    return _has_module("dralab.webhook.cli") and _has_module("dralab.webhook.registration")


def driver_available() -> bool:
    """True when dralab's node driver is installed."""
    return _has_module("dralab.driver.cli")


def _has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


@dataclass(frozen=True)
class ComponentStatus:
    """One component as ``status`` reports it."""

    name: str
    state: str  # running | crashed | stopped | skipped
    pid: int | None = None
    healthy: bool | None = None
    detail: str = ""
    rss: int = 0


@dataclass
class ClusterHandle:
    """A local cluster that has been brought up (its processes may since have died: see ``status``)."""

    name: str
    layout: Layout
    state: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def kubeconfig(self) -> Path:
        return self.layout.kubeconfig

    @property
    def state_dir(self) -> Path:
        return self.layout.root

    @property
    def logs_dir(self) -> Path:
        return self.layout.logs_dir

    @property
    def nodes(self) -> list[str]:
        return list(self.state.get("nodes", []))

    @property
    def api_address(self) -> str:
        """Where kube-apiserver listens: loopback, or the pod network's address (``node.podnet``)."""
        return str((self.state.get("podNetwork") or {}).get("apiAddress") or "127.0.0.1")

    @property
    def server(self) -> str:
        return f"https://{self.api_address}:{self.state['ports']['apiserver']}"

    @property
    def ports(self) -> dict[str, Any]:
        return dict(self.state.get("ports", {}))

    @property
    def devices(self) -> Path:
        """The device inventory file the cluster was brought up with."""
        return self.layout.config_dir / "inventory.yaml"

    def node_dir(self, node: str) -> Path:
        return self.layout.node_dir(node)

    def cdi_dir(self, node: str) -> Path:
        return self.layout.cdi_dir(node)

    def records_path(self, node: str) -> Path:
        return self.layout.records_path(node)

    def log_path(self, component: str) -> Path:
        return self.layout.log_path(component)

    def components(self) -> list[str]:
        return list(self.state.get("order", []))

    def admin_config(self) -> KubeConfig:
        """The admin identity's credentials: the cluster's own PKI files, used in place. Every client of this
        cluster's apiserver takes its TLS from here: :meth:`kube`, and the benchmarks' httpx load client
        through :meth:`KubeConfig.ssl_context`."""
        pki = Pki(self.layout.pki_dir)
        return load_files(self.server, str(pki.ca_cert), str(pki.cert("admin")), str(pki.key("admin")))

    def kube(self) -> Kube:
        """A REST client with the admin identity."""
        return Kube(self.admin_config())


# ---------------------------------------------------------------- state and lock


@contextlib.contextmanager
def _locked(layout: Layout, timeout: float = LOCK_TIMEOUT) -> Iterator[None]:
    layout.lock_file.parent.mkdir(parents=True, exist_ok=True)
    lock = filelock.FileLock(str(layout.lock_file))
    try:
        lock.acquire(timeout=timeout)
    except filelock.Timeout:
        raise UserError(
            f"cluster {layout.name} is busy (lock {layout.lock_file} held for {timeout:.0f}s); "
            "wait for the other `dralab cluster` command to finish"
        ) from None
    try:
        yield
    finally:
        lock.release()


def _read_state(layout: Layout) -> dict[str, Any] | None:
    try:
        return json.loads(layout.state_file.read_text())
    except FileNotFoundError:
        return None
    except ValueError:
        hint = f"run `dralab cluster down --name {layout.name}`"
        raise UserError(f"state file {layout.state_file} is corrupt; {hint}") from None


def _write_state(layout: Layout, state: dict[str, Any]) -> None:
    atomic_write(layout.state_file, json.dumps(state, indent=2, sort_keys=True) + "\n")


def _record(state: dict[str, Any], component: str) -> ProcRecord | None:
    raw = state.get("components", {}).get(component)
    return ProcRecord.from_json(raw) if raw else None


def get_cluster(name: str = DEFAULT_NAME) -> ClusterHandle | None:
    """The cluster ``name`` if it has been brought up (and not taken down), else None."""
    layout = Layout.of(name)
    state = _read_state(layout)
    if state is None:
        return None
    return ClusterHandle(name=name, layout=layout, state=state)


def list_clusters() -> list[str]:
    """Names of clusters with a state file under DRALAB_HOME."""
    root = dralab_home() / "clusters"
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / "state.json").is_file())


# ---------------------------------------------------------------- component specs and health


def cluster_version(state: dict[str, Any]) -> str:
    """The Kubernetes version a cluster runs (state files written before versions were chosen: the default)."""
    return str(state.get("version") or build.K8S_VERSION)


def _binaries(version: str) -> dict[str, str]:
    return {name: str(build.binary_path(name, version)) for name in build.BINARIES}


def _specs(handle: ClusterHandle) -> dict[str, ComponentSpec]:
    layout, ports, state = handle.layout, handle.state["ports"], handle.state
    version = cluster_version(state)
    bins = _binaries(version)
    specs = {
        "etcd": components.etcd_spec(layout, ports, bins),
        "apiserver": components.apiserver_spec(layout, ports, bins, version, handle.api_address),
        "controller-manager": components.controller_manager_spec(
            layout, ports, bins, version, node_grace_seconds=fleet.NODE_GRACE_SECONDS if state.get("fleet") else None),
        "scheduler": components.scheduler_spec(layout, ports, bins, version),
        "kwok": components.kwok_spec(layout, ports, bins),
    }
    config = state.get("config")
    if "webhook" in state["order"]:
        specs["webhook"] = components.webhook_spec(layout, ports, config)
    if state.get("fleet"):
        specs.update(components.fleet_specs(layout, ports, config, len(state["nodes"])))
    for node in [] if state.get("fleet") else state["nodes"]:
        if node == state.get("realNode"):
            specs.update(integration.specs(handle, node, str(handle.devices), config))
            continue
        if f"driver/{node}" in state["order"]:
            specs[f"driver/{node}"] = components.driver_spec(layout, ports, node, str(handle.devices), config)
        specs[f"kubelet/{node}"] = components.standin_spec(layout, ports, node)
    return specs


def probe(health: Health, layout: Layout, timeout: float = 2.0) -> tuple[bool, str]:
    """(healthy, detail) of one health endpoint."""
    pki = Pki(layout.pki_dir)
    verify: Any = str(pki.ca_cert) if health.verify_ca else False
    cert = (str(pki.cert("admin")), str(pki.key("admin"))) if health.client_cert else None
    try:
        if health.url.startswith("https"):
            import ssl

            ctx = ssl.create_default_context(cafile=verify) if verify else ssl._create_unverified_context()
            if cert:
                ctx.load_cert_chain(*cert)
            resp = httpx.get(health.url, verify=ctx, timeout=timeout)
        else:
            resp = httpx.get(health.url, timeout=timeout)
    except (httpx.HTTPError, OSError) as exc:
        return False, type(exc).__name__
    ok = resp.status_code == 200
    return ok, "ok" if ok else f"HTTP {resp.status_code}: {resp.text.strip()[:200]}"


def _wait_healthy(handle: ClusterHandle, spec: ComponentSpec, timeout: float) -> None:
    """Wait for ``spec``'s health endpoint; a process that dies meanwhile fails at once, with its log."""
    if spec.health is None:
        return
    rec = _record(handle.state, spec.name)

    def ready() -> bool:
        if rec is not None and not is_alive(rec):
            raise UserError(_crash_message(handle, spec.name))
        return probe(spec.health, handle.layout)[0]  # type: ignore[arg-type]

    try:
        wait_for(ready, timeout, f"{spec.name} to become healthy", interval=0.1, max_interval=0.5)
    except WaitTimeout:
        detail = probe(spec.health, handle.layout)[1]
        raise UserError(
            f"{spec.name} did not become healthy within {timeout:.0f}s ({detail}); "
            f"see {handle.log_path(spec.name)}:\n{log_tail(handle.log_path(spec.name))}"
        ) from None


def _crash_message(handle: ClusterHandle, component: str) -> str:
    path = handle.log_path(component)
    return f"{component} exited; last lines of {path}:\n{log_tail(path)}"


def _start(handle: ClusterHandle, spec: ComponentSpec) -> None:
    if spec.code:
        handle.state.setdefault("code", {})[spec.name] = components.code_fingerprint(spec.code)
    rec = start_process(spec.argv, handle.log_path(spec.name), spec.env)
    handle.state.setdefault("components", {})[spec.name] = rec.to_json()
    _write_state(handle.layout, handle.state)


# ---------------------------------------------------------------- up


def _allocate_ports(nodes: list[str], previous: dict[str, Any] | None) -> dict[str, Any]:
    """Free ports for every component; ports already recorded are kept (kubeconfigs point at them)."""
    ports: dict[str, Any] = dict(previous or {})
    taken = {p for p in ports.values() if isinstance(p, int)}
    taken |= {p for v in ports.values() if isinstance(v, dict) for p in v.values()}

    def fresh() -> int:
        while True:
            port = free_port()
            if port not in taken:
                taken.add(port)
                return port

    for key in ("etcd", "etcd-peer", "apiserver", "controller-manager", "scheduler", "kwok", "webhook"):
        ports.setdefault(key, fresh())
    for group in ("driver", "kubelet"):
        per_node = dict(ports.get(group) or {})
        for node in nodes:
            per_node.setdefault(node, fresh())
        ports[group] = per_node
    return ports


def _prepare_files(handle: ClusterHandle, inventory_text: str) -> None:
    layout = handle.layout
    for folder in (layout.root, layout.logs_dir, layout.config_dir, layout.run_dir, layout.etcd_dir):
        folder.mkdir(parents=True, exist_ok=True)
    layout.etcd_dir.chmod(0o700)
    pki = ensure_pki(layout.pki_dir)
    kubeconfig = render_kubeconfig(
        f"dralab-{handle.name}",
        handle.server,
        pki.ca_cert.read_bytes(),
        pki.cert("admin").read_bytes(),
        pki.key("admin").read_bytes(),
    )
    atomic_write(layout.kubeconfig, kubeconfig, mode=0o600)
    atomic_write(components.scheduler_config_path(layout), components.scheduler_config(layout))
    atomic_write(components.kwok_config_path(layout), kwok.kwok_config())
    atomic_write(handle.devices, inventory_text)
    for node in handle.nodes:
        for folder in (
            layout.cdi_dir(node),
            layout.plugins_dir(node),
            layout.registry_dir(node),
            layout.driver_state_dir(node),
        ):
            folder.mkdir(parents=True, exist_ok=True)


def _devices_ref(devices: str) -> str:
    """How a device inventory is recorded: a shipped name as is, a file as its absolute path."""
    path = Path(devices)
    return str(path.resolve()) if path.is_file() else str(devices)


def _inventory_text(devices: str | None) -> tuple[str, Any]:
    if fleet.is_fleet_ref(devices):
        from dralab.model.inventory import parse_inventory

        size = fleet.parse_size(str(devices))
        return fleet.inventory_text(size), parse_inventory(fleet.inventory(size), size.ref)
    inventory = load_inventory(devices)
    ref = str(devices or "lab20")
    path = Path(ref)
    if path.is_file():
        text = path.read_text()
    else:
        from importlib import resources

        text = resources.files("dralab.model").joinpath("inventories", f"{ref}.yaml").read_text()
    return text, inventory


def _bootstrap_objects(handle: ClusterHandle, inventory: Any, config: str | None) -> None:
    """Nodes, DeviceClasses, RuntimeClass ``ascend`` and the webhook's namespace (idempotent).

    The real node (``up --real-node``) is registered by its kubelet; its RBAC binding is made here.
    With a pod network only those: the rest is what dralab's chart installs.
    """
    kube = handle.kube()
    real = handle.state.get("realNode")
    try:
        for node in kwok.node_manifests(inventory, cluster_version(handle.state)):
            if node["metadata"]["name"] == real:
                continue
            kube.create("/api/v1/nodes", node, exist_ok=True)
        if real:
            binding = integration.lifecycle.rbac_binding()
            kube.apply(object_path(binding), binding)
        if handle.state.get("podNetwork"):
            return  # dralab's chart installs its classes, CRDs and namespace (dralab_kit.cluster.install)
        cfg = load_config(config)
        for obj in [*device_classes(cfg.vendors), runtime_class(), sharebudget_crd(), volcano_job_crd()]:
            kube.apply(object_path(obj), obj)
        ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": WEBHOOK_NAMESPACE}}
        kube.create("/api/v1/namespaces", ns, exist_ok=True)
    finally:
        kube.close()


def nodes_ready_timeout(nodes: int) -> float:
    """How long ``up`` waits for its nodes to be Ready: KWOK initializes them one status write at a
    time, and 500 of them on a loaded 2-core machine took longer than the 60 s one node is given."""
    return COMPONENT_TIMEOUT + NODE_READY_SECONDS * max(0, nodes - 1)


def _nodes_ready(handle: ClusterHandle) -> bool:
    kube = handle.kube()
    try:
        if handle.state.get("fleet"):  # one list instead of a GET per node
            ready = {n["metadata"]["name"] for n in kube.list("/api/v1/nodes").get("items") or [] if _ready(n)}
            return set(handle.nodes) <= ready
        return all(_ready(kube.get(node_path(name), missing_ok=True)) for name in handle.nodes)
    finally:
        kube.close()


def _ready(node: dict[str, Any] | None) -> bool:
    conditions = (node or {}).get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _register_webhook(handle: ClusterHandle, config: str | None) -> None:
    from dralab.webhook.registration import webhook_configurations

    pki = Pki(handle.layout.pki_dir)
    objs = webhook_configurations(
        load_config(config),
        url=f"https://127.0.0.1:{handle.ports['webhook']}",
        service=None,
        ca_bundle=pki.ca_cert.read_bytes(),
        own_namespace=WEBHOOK_NAMESPACE,
    )
    kube = handle.kube()
    try:
        for obj in objs:
            kube.apply(object_path(obj), obj)
    finally:
        kube.close()


def _ensure_running(handle: ClusterHandle, spec: ComponentSpec, say: Say) -> bool:
    """Start ``spec`` unless it runs; True when it was (re)started."""
    rec = _record(handle.state, spec.name)
    if rec is not None and is_alive(rec):
        if not spec.code or handle.state.get("code", {}).get(spec.name) == components.code_fingerprint(spec.code):
            return False
        say(f"{spec.name}: its code changed since it started; restarting it")
        stop_process(rec, timeout=spec.stop_timeout)
        _start(handle, spec)
        return True
    if rec is not None and spec.name not in handle.state.get("stopped", []):
        say(f"{spec.name} was not running (crashed?); restarting it. Log: {handle.log_path(spec.name)}")
    _start(handle, spec)
    stopped = handle.state.get("stopped", [])
    if spec.name in stopped:
        stopped.remove(spec.name)
    return True


def ensure_cluster(
    name: str = DEFAULT_NAME,
    devices: str | None = None,
    config: str | None = None,
    say: Say | None = None,
    real_node: bool = False,
    kubernetes: str | None = None,
    pod_network: bool | None = None,
) -> ClusterHandle:
    """Bring cluster ``name`` up, or reuse it if it runs; restart any component that is down.

    Idempotent and file-locked. ``devices`` is a device inventory (file or shipped name, default
    Lab 20's host); a running cluster keeps the inventory it was created with. ``real_node`` runs
    the inventory's first node as a real kubelet + containerd (``dralab_kit.cluster.node``).
    ``pod_network`` (real node only; None: as the cluster was created) gives its pods Services and
    the apiserver a route to them (``dralab_kit.cluster.node.podnet``, kube-proxy), for what is installed
    as pods (cert-manager, dralab's chart); dralab's own host processes are then not started.
    """
    say = say or _quiet
    layout = Layout.of(name)
    previous = _read_state(layout)
    version = check_supported(kubernetes) if kubernetes else cluster_version(previous or {})
    if pod_network is None:
        pod_network = bool((previous or {}).get("podNetwork"))
    if pod_network and not real_node:
        raise UserError("--pod-network needs --real-node: only a real node runs pods that use Services")
    build.require_binaries(version)
    if real_node:
        build.require_node_binaries(version)
        preflight.require(preflight.check_node_host(preflight.THIS_HOST), "run the real node")
    if pod_network:
        podnet.require_tools()
        podnet.check_free(podnet.owner_of(layout.name, layout.root))  # refused before this cluster writes any state
    with _locked(layout):
        return _up_locked(layout, devices, config, say, real_node, version, pod_network)


def _up_locked(
    layout: Layout, devices: str | None, config: str | None, say: Say, real_node: bool = False,
    version: str = build.K8S_VERSION, pod_network: bool = False,
) -> ClusterHandle:
    started = time.monotonic()
    previous = _read_state(layout)
    if previous and previous.get("nodes") and cluster_version(previous) != version:
        raise UserError(
            f"cluster {layout.name} runs Kubernetes {cluster_version(previous)}, not {version}; "
            f"run `dralab cluster down --name {layout.name}` first or use another --name"
        )
    devices = _devices_ref(devices) if devices else None
    if previous and devices and previous.get("devicesRef") != devices:
        raise UserError(
            f"cluster {layout.name} runs with devices {previous.get('devicesRef')!r}, not {devices!r}; "
            f"run `dralab cluster down --name {layout.name}` first or use another --name"
        )
    if previous and previous.get("nodes") and bool(previous.get("realNode")) != real_node:
        have = "with" if previous.get("realNode") else "without"
        raise UserError(
            f"cluster {layout.name} runs {have} a real node; run `dralab cluster down --name {layout.name}` "
            "first or use another --name"
        )
    if previous and previous.get("nodes") and bool(previous.get("podNetwork")) != pod_network:
        have = "with" if previous.get("podNetwork") else "without"
        raise UserError(
            f"cluster {layout.name} runs {have} a pod network; run `dralab cluster down --name {layout.name}` "
            "first or use another --name"
        )
    if previous:
        devices = previous.get("devicesRef")
        config = config or previous.get("config")
    text, inventory = _inventory_text(devices)
    cfg = load_config(config)
    nodes = [n.name for n in inventory.nodes]
    check_socket_paths(layout, nodes, [v.driver for v in cfg.vendors.enabled_vendors()])
    order = list(CONTROL_PLANE)
    notes: list[str] = []
    with_webhook, with_driver = webhook_available(), driver_available()
    if pod_network:
        with_webhook = with_driver = False
        notes.append(
            "pod network: dralab is not started as host processes; install its chart (dralab infra up --profile node)"
        )
    if with_webhook:
        order.append("webhook")
    elif not pod_network:
        notes.append("webhook not installed (dralab.webhook missing): not started")
    real = nodes[0] if real_node and nodes else None
    is_fleet = fleet.is_fleet_ref(devices)
    if is_fleet and real_node:
        raise UserError("--fleet simulates every node: it cannot be combined with --real-node")
    shards = fleet.shard_keys(len(nodes))
    if is_fleet:
        order += [f"{role}/{s}" for role in ("driver", "kubelet") for s in shards] if with_driver else []
    for node in [] if is_fleet else nodes:
        if node == real:
            order += integration.order(node, with_driver, pod_network)
            continue
        if with_driver:
            order.append(f"driver/{node}")
        order.append(f"kubelet/{node}")
    if not with_driver and not pod_network:
        notes.append("node driver not installed (dralab.driver missing): no driver started")
    state: dict[str, Any] = dict(previous or {})
    state.update(
        {
            "name": layout.name,
            "version": version,
            "devicesRef": str(devices or "lab20"),
            "config": str(Path(config).resolve()) if config else None,
            "nodes": nodes,
            "order": order,
            "ports": _allocate_ports(shards if is_fleet else nodes, (previous or {}).get("ports")),
            "fleet": is_fleet,
            "realNode": real,
            "podNetwork": {"apiAddress": podnet.API_ADDRESS} if pod_network else None,
        }
    )
    if real:
        integration.allocate_ports(state, real)
    state.setdefault("components", {})
    handle = ClusterHandle(name=layout.name, layout=layout, state=state, notes=notes)
    say(f"cluster {layout.name}: state in {layout.root}")
    _prepare_files(handle, text)
    _write_state(layout, state)
    if pod_network:
        podnet.ensure_interface(podnet.owner_of(layout.name, layout.root))
    specs = _specs(handle)

    if _ensure_running(handle, specs["etcd"], say):
        say("started etcd")
    _wait_healthy(handle, specs["etcd"], COMPONENT_TIMEOUT)
    if _ensure_running(handle, specs["apiserver"], say):
        say("started kube-apiserver")
    # The others retry until the API server answers, so they start while it initializes.
    for comp in ("controller-manager", "scheduler", "kwok"):
        if _ensure_running(handle, specs[comp], say):
            say(f"started {comp}")
    _wait_healthy(handle, specs["apiserver"], APISERVER_TIMEOUT)
    say("kube-apiserver ready")
    # Most of them retry, but the controller-manager exits when the apiserver refuses its very first
    # call (its request-header CA), which a loaded machine makes likely: start again what exited.
    for comp in ("controller-manager", "scheduler", "kwok"):
        if _ensure_running(handle, specs[comp], say):
            say(f"started {comp} again (it exited before kube-apiserver answered)")
    _bootstrap_objects(handle, inventory, config)
    # dralab's own processes need only the API server and the Node objects: they start now and
    # load their Python modules while the controllers and KWOK come up.
    dralab_components = [c for c in order if c not in CONTROL_PLANE]
    real_components = integration.order(real, with_driver, pod_network) if real else []
    dralab_components = [c for c in dralab_components if c not in real_components]
    for comp in dralab_components:
        if _ensure_running(handle, specs[comp], say):
            say(f"started {comp}")
    for comp in ("controller-manager", "scheduler", "kwok"):
        _wait_healthy(handle, specs[comp], COMPONENT_TIMEOUT)
    if real:
        labels = next((dict(n.labels) for n in inventory.nodes if n.name == real), {})
        integration.bring_up(
            handle,
            real,
            specs,
            lambda spec: _ensure_running(handle, spec, say),
            lambda spec, timeout: _wait_healthy(handle, spec, timeout),
            labels,
            say,
        )
        dralab_components += [c for c in real_components if c.startswith(("driver/", "dra-tap/"))]
        specs = _specs(handle)
    try:
        wait_for(lambda: _nodes_ready(handle), nodes_ready_timeout(len(nodes)), "the nodes to become Ready",
                 interval=0.1)
    except WaitTimeout as exc:
        logs = f"{handle.log_path('kwok')}" + (f" and {handle.log_path(f'kubelet/{real}')}" if real else "")
        raise UserError(f"{exc}; see {logs}") from None
    say(f"control plane ready; nodes: {', '.join(nodes)}")
    for comp in dralab_components:
        _wait_optional(handle, specs[comp], notes, say)
    if with_webhook and "webhook" not in handle.state.get("failed", []):
        _register_webhook(handle, config)
        _wait_background_leader(handle, notes)
    state["ready"] = time.time()
    state["notes"] = notes
    _write_state(layout, state)
    for note in notes:
        say(note)
    say(f"cluster {layout.name} ready in {time.monotonic() - started:.1f}s; kubeconfig: {layout.kubeconfig}")
    return handle


def lease_is_held(lease: dict[str, Any] | None, now: float) -> bool:
    """Whether a Lease names a holder that renewed it within its duration (its janitor is running)."""
    spec = (lease or {}).get("spec") or {}
    renewed = spec.get("renewTime")
    if not spec.get("holderIdentity") or not renewed:
        return False
    at = dt.datetime.fromisoformat(str(renewed).replace("Z", "+00:00")).timestamp()
    return now - at <= float(spec.get("leaseDurationSeconds") or 15)


def _wait_background_leader(handle: ClusterHandle, notes: list[str]) -> None:
    """Wait until a webhook worker holds the Lease and so runs the janitor.

    Readiness does not include it (any worker of any replica may lead), but a lab that starts
    before the janitor runs sees its first pods' claims released only after the grace period.
    """
    from dralab.webhook.controllers.lease import lease_path

    kube = handle.kube()
    try:
        wait_for(
            lambda: lease_is_held(kube.get(lease_path(WEBHOOK_NAMESPACE, "dralab-webhook"), missing_ok=True),
                                  time.time()),
            COMPONENT_TIMEOUT, "a webhook worker to hold the dralab-webhook Lease (the janitor)", interval=0.1,
        )
    except WaitTimeout as exc:
        notes.append(f"WARNING: {exc}; claims of deleted pods wait out the janitor's grace period; "
                     f"see {handle.log_path('webhook')}")
    finally:
        kube.close()


def _wait_optional(handle: ClusterHandle, spec: ComponentSpec, notes: list[str], say: Say) -> None:
    """Wait for a dralab component; a failure is reported (note + status), not fatal to the cluster."""
    failed = handle.state.setdefault("failed", [])
    try:
        in_fleet = spec.name.partition("/")[2].startswith(fleet.SHARD_PREFIX)
        _wait_healthy(handle, spec, FLEET_TIMEOUT if in_fleet else COMPONENT_TIMEOUT)
        if spec.name in failed:
            failed.remove(spec.name)
    except UserError as exc:
        if spec.name not in failed:
            failed.append(spec.name)
        notes.append(f"WARNING: {spec.name} failed: {exc}")
        log.warning("component failed", extra={"fields": {"component": spec.name, "error": str(exc)}})


# ---------------------------------------------------------------- operate


def _require(name: str) -> tuple[Layout, dict[str, Any]]:
    layout = Layout.of(name)
    state = _read_state(layout)
    if state is None:
        raise UserError(f"cluster {name} is not up; run `dralab cluster up --name {name}`")
    return layout, state


def _check_component(state: dict[str, Any], component: str) -> str:
    """The component's full name (``kubelet`` means ``kubelet/<real node>``); UserError when unknown."""
    component = integration.resolve_alias(state, component)
    if component not in state.get("order", []):
        known = ", ".join(state.get("order", []))
        raise UserError(f"unknown component {component!r}; components of this cluster: {known}")
    return component


def stop(name: str, component: str) -> bool:
    """Stop one component (fault hook); it stays stopped until ``start``, ``restart`` or ``up``."""
    layout, state = _require(name)
    component = _check_component(state, component)
    with _locked(layout):
        state = _read_state(layout) or state
        rec = _record(state, component)
        timeout = _specs(ClusterHandle(name=name, layout=layout, state=state))[component].stop_timeout
        was_running = bool(rec and stop_process(rec, timeout=timeout))
        stopped = state.setdefault("stopped", [])
        if component not in stopped:
            stopped.append(component)
        _write_state(layout, state)
        return was_running


def start(name: str, component: str, wait: bool = True) -> None:
    """Start one component if it is not running and wait until it is healthy."""
    layout, state = _require(name)
    component = _check_component(state, component)
    with _locked(layout):
        handle = ClusterHandle(name=name, layout=layout, state=_read_state(layout) or state)
        spec = _specs(handle)[component]
        _ensure_running(handle, spec, _quiet)
        _write_state(layout, handle.state)
        if wait:
            _wait_healthy(handle, spec, APISERVER_TIMEOUT if component == "apiserver" else COMPONENT_TIMEOUT)


def restart(name: str, component: str, wait: bool = True) -> None:
    """Stop then start one component."""
    stop(name, component)
    start(name, component, wait=wait)


def wipe_cdi(name: str, node: str) -> int:
    """Delete every file in the node's CDI directory (what a reboot does to /var/run/cdi); returns the count."""
    layout, state = _require(name)
    if node not in state.get("nodes", []):
        raise UserError(f"node {node!r} is not in cluster {name} (nodes: {', '.join(state.get('nodes', []))})")
    count = 0
    folder = layout.cdi_dir(node)
    for entry in folder.iterdir() if folder.is_dir() else []:
        if entry.is_file() or entry.is_symlink():
            entry.unlink()
            count += 1
    return count


def device_health(name: str, node: str, device: str, healthy: bool, reason: str = "") -> dict[str, Any]:
    """Mark one fake device unhealthy or healthy again (fault hook): the node's fake backend reads the file.

    Returns what the file says now (device -> {healthy, reason}); the driver publishes the change
    within its ``--health-seconds``.
    """
    from dralab.driver.devices.fake import HEALTH_FILE, read_health_file
    from dralab.util import atomic_write

    layout, state = _require(name)
    if node not in state.get("nodes", []):
        raise UserError(f"node {node!r} is not in cluster {name} (nodes: {', '.join(state.get('nodes', []))})")
    try:
        known = [d.name for d in load_inventory(str(layout.config_dir / "inventory.yaml")).node(node).devices]
    except UserError:
        known = []  # an inventory of vendors outside the shipped table: the driver ignores unknown names
    if known and device not in known:
        raise UserError(f"node {node} has no device {device!r} (devices: {', '.join(known)})")
    path = layout.driver_state_dir(node) / HEALTH_FILE
    current = read_health_file(path) or {}
    entries = {n: {"healthy": h.healthy, "reason": h.reason} for n, h in current.items() if not h.healthy}
    if healthy:
        entries.pop(device, None)
    else:
        entries[device] = {"healthy": False, "reason": reason or "injected"}
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    atomic_write(path, json.dumps(entries, indent=2, sort_keys=True) + "\n", mode=0o600)
    return entries


def reboot(name: str, node: str, say: Say | None = None, start: bool = True) -> float:
    """A reboot of the real node (fault hook): everything on it stops at once, /run and the CDI
    folder are emptied, the node gets a new boot id, then it comes back as ``up`` brings it
    (``start=False`` leaves it off until the next ``up``: a node that stays down a while).

    Returns the seconds from the power-off until the node's components are healthy again (the pods'
    own return is the caller's to wait for).
    """
    import uuid

    layout, state = _require(name)
    if state.get("realNode") != node:
        real = state.get("realNode")
        raise UserError(f"node {node!r} is not the real node of cluster {name}"
                        + (f" (that is {real!r})" if real else " (it has none: `up --real-node`)"))
    with _locked(layout):
        state = _read_state(layout) or state
        handle = ClusterHandle(name=name, layout=layout, state=state)
        started = time.monotonic()
        left = integration.power_off(handle, node)
        if left:
            log.warning("left on the host after the power-off", extra={"fields": {"left": left}})
        atomic_write(layout.boot_id_path(node), f"{uuid.uuid4()}\n")
        state["stopped"] = [c for c in state.get("stopped", []) if not c.endswith(f"/{node}")]
        _write_state(layout, state)
    if start:
        ensure_cluster(name, say=say, real_node=True)
    return time.monotonic() - started


def status(name: str = DEFAULT_NAME) -> list[ComponentStatus]:
    """Each component's process state and health."""
    layout, state = _require(name)
    handle = ClusterHandle(name=name, layout=layout, state=state)
    specs = _specs(handle)
    out = []
    for comp in state.get("order", []):
        rec = _record(state, comp)
        if rec is None:
            out.append(ComponentStatus(comp, "not started", detail="never started"))
            continue
        if not is_alive(rec):
            if comp in state.get("stopped", []):
                out.append(ComponentStatus(comp, "stopped", rec.pid, None, "stopped on request"))
            else:
                tail = log_tail(handle.log_path(comp), 1)
                out.append(ComponentStatus(comp, "crashed", rec.pid, False, f"exited; log: {tail[:160]}"))
            continue
        spec = specs.get(comp)
        healthy, detail = probe(spec.health, layout) if spec and spec.health else (None, "")
        out.append(ComponentStatus(comp, "running", rec.pid, healthy, detail, rss_bytes(rec)))
    return out


def control_plane_rss(name: str = DEFAULT_NAME) -> dict[str, int]:
    """Resident memory per control-plane component (bytes)."""
    _, state = _require(name)
    out = {}
    for comp in CONTROL_PLANE:
        rec = _record(state, comp)
        out[comp] = rss_bytes(rec) if rec else 0
    return out


def down(name: str = DEFAULT_NAME, keep_logs: bool = True) -> int:
    """Stop every process the cluster started and delete its state; returns how many were running."""
    layout = Layout.of(name)
    if not layout.root.exists():
        return 0
    with _locked(layout):
        state = _read_state(layout) or {}
        records = [ProcRecord.from_json(raw) for raw in (state.get("components") or {}).values()]
        running = [rec for rec in records if is_alive(rec)]
        if state.get("realNode"):
            # the real node first and in order: pods, containerd, namespace, cgroups, bridge
            handle = ClusterHandle(name=name, layout=layout, state=state)
            left = integration.teardown(handle, state["realNode"])
            if left:
                log.warning("real node left things behind", extra={"fields": {"leftovers": left}})
        _stop_all([rec for rec in running if is_alive(rec)])
        for entry in layout.root.iterdir():
            if keep_logs and entry == layout.logs_dir:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
        if not layout.nodes_root.is_relative_to(layout.root):
            shutil.rmtree(layout.nodes_root, ignore_errors=True)
        if not keep_logs:
            shutil.rmtree(layout.root, ignore_errors=True)
    return len(running)


def _stop_all(records: list[ProcRecord]) -> None:
    """SIGTERM everything at once (teardown order does not matter: all state is deleted)."""
    import signal

    for rec in records:
        signal_process(rec, signal.SIGTERM)
    deadline = time.monotonic() + 5  # all state is deleted next: no need to wait for long drains
    while time.monotonic() < deadline and any(is_alive(r) for r in records):
        time.sleep(0.05)
    for rec in records:
        if is_alive(rec):
            stop_process(rec, timeout=0)
    reap_exited()


def apiserver_metrics(handle: ClusterHandle) -> str:
    """The API server's /metrics text."""
    kube = handle.kube()
    try:
        return kube.text("/metrics")
    finally:
        kube.close()


__all__ = [
    "ClusterHandle",
    "ComponentStatus",
    "control_plane_rss",
    "device_health",
    "down",
    "ensure_cluster",
    "get_cluster",
    "list_clusters",
    "reboot",
    "restart",
    "start",
    "status",
    "stop",
    "wipe_cdi",
]
