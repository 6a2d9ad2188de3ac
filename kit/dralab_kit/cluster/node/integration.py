"""The real node inside a local cluster: its component specs, bring-up order and teardown.

``dralab_kit.cluster.api`` calls these for the cluster's ``realNode`` (the first node of the device
inventory when ``up --real-node``); the other inventory nodes stay KWOK nodes with the stand-in.
Components of the real node: ``node-ns/<node>``, ``containerd/<node>``, ``kubelet/<node>`` (the
real kubelet, not the stand-in) and ``driver/<node>`` (registering in the kubelet's plugin registry).
"""

from __future__ import annotations

import shutil
import signal
import time
from collections.abc import Callable
from typing import Any

import yaml

from dralab.errors import UserError
from dralab.util import WaitTimeout, atomic_write, free_port
from dralab_kit.cluster import build
from dralab_kit.cluster import components as cluster_components
from dralab_kit.cluster.components import ComponentSpec
from dralab_kit.cluster.node import components, lifecycle, podnet
from dralab_kit.cluster.node.paths import NodePaths
from dralab_kit.cluster.pki import Pki
from dralab_kit.cluster.supervisor import ProcRecord, is_alive, log_tail, signal_process, stop_process

Say = Callable[[str], None]
NODE_TIMEOUT = 90.0
# Short names accepted by stop/start/restart for the real node's processes.
ALIASES = ("kubelet", "containerd", "node-ns", "driver", "dra-tap")


def node_paths(handle: Any, node: str) -> NodePaths:
    return NodePaths(handle.name, node, handle.node_dir(node))


def order(node: str, with_driver: bool, pod_network: bool = False) -> list[str]:
    """Start order of the real node's components (kube-proxy with a pod network)."""
    out = [components.ns_component(node), components.containerd_component(node), components.kubelet_component(node)]
    if pod_network:
        out.append(components.kube_proxy_component(node))
    if with_driver:
        out += [components.tap_component(node), f"driver/{node}"]
    return out


def allocate_ports(state: dict[str, Any], node: str) -> None:
    """The real node's ports in ``state["nodePorts"][node]`` (kept once recorded)."""
    taken: set[int] = set()
    for value in [*state.get("ports", {}).values(), *state.get("nodePorts", {}).values()]:
        if isinstance(value, int):
            taken.add(value)
        elif isinstance(value, dict):
            taken |= {p for p in value.values() if isinstance(p, int)}

    def fresh() -> int:
        while True:
            port = free_port()
            if port not in taken:
                taken.add(port)
                return port

    per_node = dict(state.get("nodePorts") or {})
    per_node[node] = lifecycle.node_ports(fresh, per_node.get(node))
    state["nodePorts"] = per_node


def _holder_pid(state: dict[str, Any], node: str) -> int:
    raw = state.get("components", {}).get(components.ns_component(node))
    return int(raw["pid"]) if raw else 0


def specs(handle: Any, node: str, devices: str, config: str | None) -> dict[str, ComponentSpec]:
    """Specs of the real node's components (the driver registers in the kubelet's plugin registry)."""
    paths = node_paths(handle, node)
    ports = handle.state["nodePorts"][node]
    holder = _holder_pid(handle.state, node)
    version = str(handle.state.get("version") or build.K8S_VERSION)
    out = {
        components.ns_component(node): components.holder_spec(paths),
        components.containerd_component(node): components.containerd_spec(
            paths, holder, build.binary_path("containerd"), ports["containerd"]
        ),
        components.kubelet_component(node): components.kubelet_spec(
            paths, holder, build.binary_path("kubelet", version), ports["healthz"]
        ),
    }
    if components.kube_proxy_component(node) in handle.state["order"]:
        proxy_config = paths.config_dir / "kube-proxy.yaml"
        binary = build.binary_path("kube-proxy", version)
        spec = components.kube_proxy_spec(paths, binary, proxy_config, ports["proxy-healthz"])
        out[spec.name] = spec
    if f"driver/{node}" in handle.state["order"]:
        # the driver registers in the node's own registry/; the tap mirrors it into the kubelet's
        spec = cluster_components.driver_spec(handle.layout, handle.state["ports"], node, devices, config)
        out[spec.name] = spec
        tap = components.tap_spec(paths, handle.layout.registry_dir(node), handle.records_path(node))
        out[tap.name] = tap
    return out


def resolve_alias(state: dict[str, Any], component: str) -> str:
    """``kubelet`` -> ``kubelet/<real node>`` etc. on a cluster with a real node."""
    real = state.get("realNode")
    if real and component in ALIASES:
        return f"{component}/{real}"
    return component


def bring_up(
    handle: Any,
    node: str,
    all_specs: dict[str, ComponentSpec],
    ensure_running: Callable[[ComponentSpec], bool],
    wait_healthy: Callable[[ComponentSpec, float], None],
    labels: dict[str, str],
    say: Say,
) -> dict[str, float]:
    """Start (or keep) the namespace, containerd, the kubelet and the driver of the real node; returns timings."""
    paths = node_paths(handle, node)
    timings: dict[str, float] = {}
    started = time.monotonic()
    ns_name = components.ns_component(node)
    ns_rec = _record(handle.state, ns_name)
    if ns_rec is None or not is_alive(ns_rec):
        # a fresh namespace: nothing of an older one may survive (containerd, shims, kubelet)
        stale = [c for c in order(node, False)[1:] if (r := _record(handle.state, c)) is not None and is_alive(r)]
        for comp in stale:
            stop_process(_record(handle.state, comp), timeout=5)  # type: ignore[arg-type]
        with lifecycle.pinned_namespace(paths) as stale_ns:
            lifecycle.teardown_host(paths, stale_ns)
        paths.ns_ready.unlink(missing_ok=True)
        lifecycle.prepare(
            paths,
            handle.server,
            Pki(handle.layout.pki_dir),
            handle.cdi_dir(node),
            handle.state["nodePorts"][node],
            say,
            version=str(handle.state.get("version") or build.K8S_VERSION),
            pod_network=bool(handle.state.get("podNetwork")),
        )
        timings["prepare"] = time.monotonic() - started
        ensure_running(all_specs[ns_name])
        say(f"started {ns_name} (private mount namespace)")
    ns_rec = _record(handle.state, ns_name)
    assert ns_rec is not None
    try:
        lifecycle.wait_namespace(paths, lambda: is_alive(ns_rec))
    except (UserError, WaitTimeout) as exc:
        log_path = handle.log_path(ns_name)
        raise UserError(
            f"{exc}: {log_path}:\n{log_tail(log_path)}\n(the real node needs root and mount namespaces)"
        ) from None
    # the holder's pid is known only now: rebuild the specs that enter its namespace
    fresh = specs(handle, node, str(handle.devices), handle.state.get("config"))
    ctrd = fresh[components.containerd_component(node)]
    if ensure_running(ctrd):
        say(f"started {ctrd.name}")
    wait_healthy(ctrd, NODE_TIMEOUT)
    wait_cri = time.monotonic()
    imported = lifecycle.import_images(paths)
    if imported:
        say(f"imported {', '.join(imported)} into containerd")
    timings["images"] = time.monotonic() - wait_cri
    kubelet = fresh[components.kubelet_component(node)]
    if ensure_running(kubelet):
        say(f"started {kubelet.name} (kubelet {handle.state.get('version') or build.K8S_VERSION})")
    wait_healthy(kubelet, NODE_TIMEOUT)
    kube = handle.kube()
    try:
        rec = _record(handle.state, kubelet.name)
        lifecycle.wait_node_registered(kube, node, lambda: rec is not None and is_alive(rec), NODE_TIMEOUT)
        if not lifecycle.node_initialized(kube, node):
            lifecycle.patch_node(kube, node, labels)
    finally:
        kube.close()
    proxy = fresh.get(components.kube_proxy_component(node))
    if proxy is not None:
        ports = handle.state["nodePorts"][node]
        config = podnet.kube_proxy_config(handle.kubeconfig, node, ports["proxy-healthz"], ports["proxy-metrics"])
        atomic_write(paths.config_dir / "kube-proxy.yaml", yaml.safe_dump(config, sort_keys=False))
        if ensure_running(proxy):
            say(f"started {proxy.name} (iptables mode: Services on {podnet.API_ADDRESS} and the pod bridge)")
        wait_healthy(proxy, NODE_TIMEOUT)
    tap = fresh.get(components.tap_component(node))
    if tap is not None and ensure_running(tap):
        say(f"started {tap.name} (records the kubelet's DRA calls in {handle.records_path(node)})")
    driver = fresh.get(f"driver/{node}")
    if driver is not None and ensure_running(driver):
        say(f"started {driver.name} (registers with the kubelet through {paths.plugins_registry})")
    timings["total"] = time.monotonic() - started
    return timings


def _record(state: dict[str, Any], component: str) -> ProcRecord | None:
    raw = state.get("components", {}).get(component)
    return ProcRecord.from_json(raw) if raw else None


def power_off(handle: Any, node: str) -> list[str]:
    """What a reboot does to the node: every process gone at once, and what lives in /run with them.

    The driver, the tap, the kubelet and containerd are SIGKILLed together (no graceful stop, no
    task cleanup), then everything left in the node's mount namespace (shims, containers) and the
    namespace itself, whose tmpfs mounts (shim sockets, CNI results) vanish with it. containerd's
    state folder and the CDI folder, which are /run on a real host, are emptied; the kubelet's and
    containerd's roots and the driver's checkpoint (/var/lib) stay. Returns host leftovers.
    """
    paths = node_paths(handle, node)
    state = handle.state
    records = [_record(state, c) for c in (f"driver/{node}", components.tap_component(node),
                                           components.kubelet_component(node), components.containerd_component(node))]
    with lifecycle.pinned_namespace(paths) as mntns:
        for rec in records:
            if rec is not None:
                signal_process(rec, signal.SIGKILL)
        if mntns:
            lifecycle.kill_namespace(mntns)
        holder = _record(state, components.ns_component(node))
        if holder is not None:
            stop_process(holder, timeout=5)
    for rec in records:
        if rec is not None:
            stop_process(rec, timeout=5)  # reaped; already dead
    left = lifecycle.teardown_host(paths, None)
    for volatile in (paths.containerd_state, handle.cdi_dir(node)):
        if volatile.is_dir():
            for entry in volatile.iterdir():
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()
    return left


def teardown(handle: Any, node: str) -> list[str]:
    """Stop the real node's processes in the order that leaves nothing behind; returns leftovers."""
    paths = node_paths(handle, node)
    state = handle.state
    # pinned before anything stops, while the holder, containerd and the kubelet still name the node
    with lifecycle.pinned_namespace(paths) as mntns:
        for comp in (f"driver/{node}", components.tap_component(node), components.kube_proxy_component(node)):
            rec = _record(state, comp)
            if rec is not None:
                stop_process(rec, timeout=5)
        kubelet = _record(state, components.kubelet_component(node))
        if kubelet is not None:
            stop_process(kubelet, timeout=10)
        ctrd = _record(state, components.containerd_component(node))
        if ctrd is not None and is_alive(ctrd):
            lifecycle.remove_all_tasks(paths)
            stop_process(ctrd, timeout=10)
        holder = _record(state, components.ns_component(node))
        if mntns:
            lifecycle.kill_namespace(mntns)
        if holder is not None:
            stop_process(holder, timeout=5)
        left = lifecycle.teardown_host(paths, None) + lifecycle.leftovers(paths, mntns)
    if state.get("podNetwork"):
        version = str(state.get("version") or build.K8S_VERSION)
        kube_proxy = build.binary_path("kube-proxy", version)
        left += podnet.remove(podnet.owner_of(handle.name, handle.layout.root), kube_proxy)
    if not paths.kubelet_root.is_relative_to(paths.root):
        shutil.rmtree(paths.kubelet_root, ignore_errors=True)
    return left


def down_and_leftovers(name: str) -> list[str]:
    """Bring cluster ``name`` down and say what of it stays on the host (empty: nothing).

    For a real node: its processes (counted under a pin of its mount namespace, see
    :func:`lifecycle.pinned_namespace`), cgroups, mounts and bridge; for a pod network: its interface,
    routes and ``KUBE-*`` chains. What ``infra destroy`` and the tests check after ``down``.
    """
    from dralab_kit.cluster.api import down, get_cluster
    from dralab_kit.cluster.layout import Layout

    handle = get_cluster(name)
    owner = podnet.owner_of(name, Layout.of(name).root)
    real = handle.state.get("realNode") if handle is not None else None
    if handle is None or not real:
        down(name)
        return podnet.leftovers(owner)
    paths = node_paths(handle, real)
    with lifecycle.pinned_namespace(paths) as mntns:
        down(name)
        left = lifecycle.leftovers(paths, mntns)
    return left + podnet.leftovers(owner)
