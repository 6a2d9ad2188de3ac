"""Command lines of every local-cluster component (pure: paths and ports in, argv out).

Why the flags are what they are:

- ``DRAConsumableCapacity=true`` on kube-apiserver, kube-controller-manager and kube-scheduler
  (alpha and off by default in 1.35; without it capacity requests are rejected or not accounted).
- kube-scheduler's client runs at ``SCHEDULER_QPS``/``SCHEDULER_BURST`` (KubeSchedulerConfiguration
  ``clientConnection.qps/burst``) instead of the default 50/100: every DRA pod costs several API
  writes (claim status, binding), so the default client throttling would cap the DRA scheduling
  rate long before the scheduler itself does.
- Leader election is off for the controller-manager and the scheduler: there is one of each, and
  acquiring a lease costs seconds at every start.
- The ``ServiceAccount`` admission plugin is off: KWOK pods never run, and with it a pod created
  right after its namespace can be refused until the controller-manager creates ``default``.
- etcd runs with ``--unsafe-no-fsync``: the data is disposable and fsync dominates on slow disks.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from typing import Any

import yaml

from dralab.driver.checkpoint import BOOT_ID_ENV
from dralab.errors import UserError
from dralab.versions import KUBERNETES_VERSION as K8S_VERSION
from dralab.versions import feature_gates_for
from dralab_kit.cluster.layout import Layout
from dralab_kit.cluster.pki import Pki

# More gates for the control plane a process starts, e.g. "DRAExtendedResource=true" (`dralab cluster up
# --feature-gates`); only components started while it is set get them.
EXTRA_GATES_ENV = "DRALAB_FEATURE_GATES"
_GATE = re.compile(r"^[A-Z][A-Za-z0-9]*=(true|false)$")
SCHEDULER_QPS = 500
SCHEDULER_BURST = 1000
CONTROLLER_MANAGER_QPS = 200
CONTROLLER_MANAGER_BURST = 400
SERVICE_CIDR = "10.96.0.0/16"
POD_CIDR = "10.0.0.1/16"
SA_ISSUER = "https://kubernetes.default.svc.cluster.local"
WEBHOOK_NAMESPACE = "dralab-system"
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
CONTROL_PLANE = ("etcd", "apiserver", "controller-manager", "scheduler", "kwok")
# The source a Python component runs, as paths under an importable package (its first part): the product's
# (dralab/...) or the kit's (dralab_kit/...), wherever each distribution is installed from.
_COMMON_CODE = ("dralab/model", "dralab/kube", "dralab/config.py", "dralab/util.py", "dralab/errors.py",
                "dralab/cli.py")
WEBHOOK_CODE = ("dralab/webhook", *_COMMON_CODE)
DRIVER_CODE = ("dralab/driver", "dralab/vcore.py", "dralab/versions.py", *_COMMON_CODE)
STANDIN_CODE = ("dralab_kit/cluster/standin", "dralab/kube", "dralab_kit/cluster/kwok.py", "dralab/driver/proto",
                "dralab/util.py", "dralab/errors.py")


def feature_gates(version: str = K8S_VERSION) -> str:
    """``--feature-gates`` of kube-apiserver, -controller-manager and -scheduler of ``version``.

    dralab's gates where ``version`` has them off by default (none from 1.36 on, where consumable
    capacity is beta and on), plus $DRALAB_FEATURE_GATES; empty when there is nothing to pass.
    """
    extra = [g.strip() for g in os.environ.get(EXTRA_GATES_ENV, "").split(",") if g.strip()]
    bad = [g for g in extra if not _GATE.match(g)]
    if bad:
        raise UserError(f"{EXTRA_GATES_ENV}: {', '.join(bad)} is not Name=true|false (e.g. DRAExtendedResource=true)")
    gates = {k: "true" if v else "false" for k, v in feature_gates_for(version).items()}
    for gate in extra:
        name, _, value = gate.partition("=")  # _GATE matched: exactly one "="
        gates[name] = value
    return ",".join(f"{k}={v}" for k, v in gates.items())


def _gate_args(version: str) -> list[str]:
    gates = feature_gates(version)
    return [f"--feature-gates={gates}"] if gates else []


@dataclass(frozen=True)
class Health:
    """How to probe a component: ``url`` over http(s); ``client_cert`` uses the admin cert."""

    url: str
    client_cert: bool = False
    verify_ca: bool = False


@dataclass(frozen=True)
class ComponentSpec:
    """What it takes to start one component."""

    name: str
    argv: list[str]
    health: Health | None = None
    env: dict[str, str] = field(default_factory=dict)
    stop_timeout: float = 10.0  # seconds between SIGTERM and SIGKILL
    # source paths the process runs (under their package: dralab/..., dralab_kit/...): when they change, a
    # running process is stale and ``up`` restarts it (a developer's cluster follows the working tree)
    code: tuple[str, ...] = ()


def _bin(binaries: dict[str, str], name: str) -> str:
    return binaries[name]


def etcd_spec(layout: Layout, ports: dict[str, Any], binaries: dict[str, str]) -> ComponentSpec:
    client = f"http://127.0.0.1:{ports['etcd']}"
    peer = f"http://127.0.0.1:{ports['etcd-peer']}"
    argv = [
        _bin(binaries, "etcd"),
        "--name=dralab",
        f"--data-dir={layout.etcd_dir}",
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=dralab={peer}",
        "--initial-cluster-state=new",
        "--unsafe-no-fsync=true",
        "--snapshot-count=10000",
        "--quota-backend-bytes=4294967296",
        "--log-level=warn",
    ]
    return ComponentSpec("etcd", argv, Health(f"{client}/health"))


def apiserver_spec(
    layout: Layout, ports: dict[str, Any], binaries: dict[str, str], version: str = K8S_VERSION,
    address: str = "127.0.0.1",
) -> ComponentSpec:
    """kube-apiserver on ``address``: loopback, or a cluster's pod-network address (``node.podnet``).

    Only a non-loopback address may be the ``kubernetes`` Service's endpoint; on loopback the
    endpoint reconciler is off and the Service has none (nothing in a pod calls it there), and the
    ``ServiceAccount`` admission plugin is off (see the module docstring). On a pod network, pods
    are in-cluster clients: the plugin mounts their service account tokens.
    """
    pki = Pki(layout.pki_dir)
    loopback = address.startswith("127.")
    only_loopback = (
        ["--endpoint-reconciler-type=none", "--disable-admission-plugins=ServiceAccount"] if loopback else []
    )
    argv = [
        _bin(binaries, "kube-apiserver"),
        f"--etcd-servers=http://127.0.0.1:{ports['etcd']}",
        f"--bind-address={address}",
        f"--advertise-address={address}",
        f"--secure-port={ports['apiserver']}",
        f"--tls-cert-file={pki.cert('apiserver')}",
        f"--tls-private-key-file={pki.key('apiserver')}",
        f"--client-ca-file={pki.ca_cert}",
        f"--service-account-key-file={pki.sa_pub}",
        f"--service-account-signing-key-file={pki.sa_key}",
        f"--service-account-issuer={SA_ISSUER}",
        f"--api-audiences={SA_ISSUER}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--authorization-mode=RBAC",
        *only_loopback,
        "--allow-privileged=true",
        "--profiling=false",
        *_gate_args(version),
        # a real kubelet (profile node) serves exec/logs on 127.0.0.1 with x509 client auth
        f"--kubelet-client-certificate={pki.cert('admin')}",
        f"--kubelet-client-key={pki.key('admin')}",
        "--kubelet-preferred-address-types=InternalIP,Hostname",
    ]
    health = Health(f"https://{address}:{ports['apiserver']}/readyz", client_cert=True, verify_ca=True)
    # its graceful shutdown waits on long-running requests for a long time; nothing here needs it
    return ComponentSpec("apiserver", argv, health, stop_timeout=5.0)


def controller_manager_spec(
    layout: Layout, ports: dict[str, Any], binaries: dict[str, str], version: str = K8S_VERSION,
    node_grace_seconds: int | None = None,
) -> ComponentSpec:
    """``node_grace_seconds``: how long a node's Lease may go unrenewed before the node is NotReady (a fleet's:
    :data:`dralab_kit.cluster.fleet.NODE_GRACE_SECONDS`; None keeps the controller's default)."""
    pki = Pki(layout.pki_dir)
    kubeconfig = str(layout.kubeconfig)
    argv = [
        _bin(binaries, "kube-controller-manager"),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={ports['controller-manager']}",
        f"--cert-dir={layout.run_dir / 'controller-manager'}",
        "--leader-elect=false",
        *_gate_args(version),
        f"--service-account-private-key-file={pki.sa_key}",
        f"--root-ca-file={pki.ca_cert}",
        f"--cluster-signing-cert-file={pki.ca_cert}",
        f"--cluster-signing-key-file={pki.ca_key}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--use-service-account-credentials=false",
        f"--kube-api-qps={CONTROLLER_MANAGER_QPS}",
        f"--kube-api-burst={CONTROLLER_MANAGER_BURST}",
        "--profiling=false",
    ]
    if node_grace_seconds is not None:
        argv.append(f"--node-monitor-grace-period={node_grace_seconds}s")
    return ComponentSpec("controller-manager", argv, Health(f"https://127.0.0.1:{ports['controller-manager']}/healthz"))


def scheduler_config(layout: Layout) -> str:
    """KubeSchedulerConfiguration: raised client QPS/burst (see module docstring), no leader election."""
    doc = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(layout.kubeconfig), "qps": SCHEDULER_QPS, "burst": SCHEDULER_BURST},
        "leaderElection": {"leaderElect": False},
    }
    return yaml.safe_dump(doc, sort_keys=False)


def scheduler_config_path(layout: Layout) -> str:
    return str(layout.config_dir / "scheduler.yaml")


def scheduler_spec(
    layout: Layout, ports: dict[str, Any], binaries: dict[str, str], version: str = K8S_VERSION
) -> ComponentSpec:
    kubeconfig = str(layout.kubeconfig)
    argv = [
        _bin(binaries, "kube-scheduler"),
        f"--config={scheduler_config_path(layout)}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={ports['scheduler']}",
        f"--cert-dir={layout.run_dir / 'scheduler'}",
        *_gate_args(version),
        "--profiling=false",
    ]
    return ComponentSpec("scheduler", argv, Health(f"https://127.0.0.1:{ports['scheduler']}/healthz"))


def kwok_config_path(layout: Layout) -> str:
    return str(layout.config_dir / "kwok.yaml")


def kwok_spec(layout: Layout, ports: dict[str, Any], binaries: dict[str, str]) -> ComponentSpec:
    argv = [
        _bin(binaries, "kwok"),
        f"--config={kwok_config_path(layout)}",
        f"--kubeconfig={layout.kubeconfig}",
        "--manage-all-nodes=false",
        f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake",
        f"--cidr={POD_CIDR}",
        "--node-ip=10.240.0.1",
        f"--server-address=127.0.0.1:{ports['kwok']}",
        # Node leases keep the controller-manager's node monitor satisfied; without them KWOK nodes
        # flap NotReady about once a minute and every pod on them loses its Ready condition.
        "--node-lease-duration-seconds=40",
    ]
    return ComponentSpec("kwok", argv, Health(f"http://127.0.0.1:{ports['kwok']}/healthz"))


def code_fingerprint(paths: tuple[str, ...]) -> str:
    """A hash of the names, sizes and modification times of the source files under ``paths``.

    Each path starts with the importable package it lies in (``dralab/webhook``, ``dralab_kit/cluster/kwok.py``):
    the product and the kit are installed from folders of their own.
    """
    import hashlib
    import importlib
    from pathlib import Path

    digest = hashlib.sha256()
    for rel in paths:
        package, _, inside = rel.partition("/")
        root = Path(importlib.import_module(package).__file__ or "").parent.parent
        target = root / package / inside
        files = sorted(target.rglob("*")) if target.is_dir() else [target]
        for path in files:
            if path.suffix in (".py", ".yaml", ".so") and path.is_file():
                st = path.stat()
                digest.update(f"{path.relative_to(root)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def _dralab(*args: str) -> list[str]:
    return [sys.executable, "-m", "dralab.cli", *args]


def webhook_spec(layout: Layout, ports: dict[str, Any], config: str | None) -> ComponentSpec:
    pki = Pki(layout.pki_dir)
    argv = _dralab(
        "webhook",
        "serve",
        "--cert",
        str(pki.cert("webhook")),
        "--key",
        str(pki.key("webhook")),
        "--port",
        str(ports["webhook"]),
        "--host",
        "127.0.0.1",
        "--kubeconfig",
        str(layout.kubeconfig),
        "--namespace",
        WEBHOOK_NAMESPACE,
        # as the chart: two server processes, the janitor in the one holding the dralab-webhook Lease
        "--workers",
        "2",
        # the local cluster listens on loopback only and its tools (benchmarks, labs) read /metrics
        # with the admin client certificate, which the token review does not take; the chart keeps
        # metrics authorization on, and tests/integration/webhook/test_metrics_authorization_cluster.py tests it
        "--no-metrics-authorization",
    )
    if config:
        argv += ["--config", config]
    health = Health(f"https://127.0.0.1:{ports['webhook']}/readyz", verify_ca=True)
    return ComponentSpec("webhook", argv, health, code=WEBHOOK_CODE)


def driver_spec(layout: Layout, ports: dict[str, Any], node: str, devices: str, config: str | None) -> ComponentSpec:
    port = ports["driver"][node]
    argv = _dralab(
        "driver",
        "run",
        "--backend",
        "fake",
        "--node",
        node,
        "--devices",
        devices,
        "--kubeconfig",
        str(layout.kubeconfig),
        "--plugin-dir",
        str(layout.plugins_dir(node)),
        "--registry-dir",
        str(layout.registry_dir(node)),
        "--cdi-dir",
        str(layout.cdi_dir(node)),
        "--state-dir",
        str(layout.driver_state_dir(node)),
        "--metrics-port",
        str(port),
        "--no-metrics-authorization",  # loopback only, read with the admin certificate (see webhook_spec)
    )
    if config:
        argv += ["--config", config]
    env = {BOOT_ID_ENV: str(layout.boot_id_path(node))}  # a simulated reboot gives the node a new boot id
    return ComponentSpec(
        f"driver/{node}", argv, Health(f"http://127.0.0.1:{port}/healthz"), env=env, code=DRIVER_CODE
    )


def standin_spec(layout: Layout, ports: dict[str, Any], node: str) -> ComponentSpec:
    port = ports["kubelet"][node]
    argv = [
        sys.executable,
        "-m",
        "dralab_kit.cluster.standin",
        "--node",
        node,
        "--kubeconfig",
        str(layout.kubeconfig),
        "--node-dir",
        str(layout.node_dir(node)),
        "--port",
        str(port),
    ]
    return ComponentSpec(f"kubelet/{node}", argv, Health(f"http://127.0.0.1:{port}/healthz"), code=STANDIN_CODE)


FLEET_CODE = ("dralab_kit/cluster/fleetnode.py", "dralab_kit/cluster/standin", *DRIVER_CODE)


def fleet_specs(layout: Layout, ports: dict[str, Any], config: str | None, nodes: int) -> dict[str, ComponentSpec]:
    """A fleet's simulated node layer: per shard of nodes (:func:`dralab_kit.cluster.fleet.shard_keys`),
    ``driver/shard-N`` (its nodes' drivers) and ``kubelet/shard-N`` (their stand-ins), one process each
    (dralab_kit.cluster.fleetnode)."""
    from dralab_kit.cluster.fleet import driver_reconcile_seconds, shard_keys

    env = {"DRALAB_HOME": str(layout.root.parent.parent)}  # the process finds the cluster's folders by name
    specs = {}
    for role in ("driver", "kubelet"):
        for shard in shard_keys(nodes):
            port = ports[role][shard]
            argv = [sys.executable, "-m", "dralab_kit.cluster.fleetnode", role, "--cluster", layout.name,
                    "--shard", shard, "--port", str(port)]
            if role == "driver":
                argv += ["--reconcile-seconds", f"{driver_reconcile_seconds(nodes):g}"]
                argv += ["--config", config] if config else []
            name = f"{role}/{shard}"
            path = "/readyz"  # the drivers': every node's pool published and registered with its stand-in
            specs[name] = ComponentSpec(name, argv, Health(f"http://127.0.0.1:{port}{path}"), env=env,
                                        code=FLEET_CODE)
    return specs
