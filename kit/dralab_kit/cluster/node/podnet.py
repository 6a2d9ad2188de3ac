"""The pod network of a real node whose pods use Services (``dralab cluster up --real-node --pod-network``).

On the plain ``node`` profile pods have addresses but nothing routes to them, and dralab's webhook
and driver are host processes. Components installed as pods (cert-manager, dralab from its chart)
need two paths that profile lacks, and this module adds them, on interfaces the profile creates
itself and never on the machine's own:

- **pods to the apiserver** through the ``kubernetes`` Service (what in-cluster clients read from
  ``KUBERNETES_SERVICE_HOST``): the apiserver binds ``API_ADDRESS`` on ``API_INTERFACE``, a bridge
  without ports that exists only to hold that address (this kernel has no ``dummy`` driver), and
  advertises it, so the apiserver's own endpoint reconciler writes it into the Service's endpoints.
  An address on loopback could not be an endpoint (the API refuses it) and a pod could not reach it.
- **the apiserver to the webhooks' Services**: the pods' bridge gets ``POD_GATEWAY`` (CNI
  ``isGateway``), so the host routes ``POD_SUBNET`` to it; kube-proxy (iptables mode, built from the
  same Kubernetes module) turns Service addresses into pod addresses; ``SERVICE_CIDR`` is routed to
  ``API_INTERFACE`` so that host-made Service traffic starts from ``API_ADDRESS`` and never picks the
  default route's interface before kube-proxy's DNAT reroutes it.

kube-proxy is told to leave the host's kernel settings alone (conntrack limits and timeouts at 0,
``localhostNodePorts: false`` so it never sets ``route_localnet``) and to serve NodePorts only on
``API_ADDRESS``. Its rules (``KUBE-*`` chains and the jumps into them) are the only ones it writes;
``remove`` runs ``kube-proxy --cleanup`` and deletes the interface, and ``leftovers`` proves both gone.

kube-proxy owns the host's ``KUBE-*`` chains, so one cluster with a pod network may run on a host
at a time: the interface's alias names its cluster (name and state folder, ``owner_of``), and
another cluster's ``up`` is refused. So is a pod network on a host that has ``KUBE-*`` chains and
no dralab pod network: they would be another kube-proxy's, and ``down`` would take them off.
"""

from __future__ import annotations

import hashlib
import shlex
import subprocess
from pathlib import Path
from typing import Any

from dralab.errors import UserError
from dralab_kit.cluster.components import SERVICE_CIDR

API_INTERFACE = "dralab-api"
API_ADDRESS = "10.215.0.1"
POD_SUBNET = "10.214.0.0/16"
POD_GATEWAY = "10.214.0.1"
_ALIAS_PREFIX = "dralab-cluster:"
_KUBE_CHAIN = ":KUBE-"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise UserError(f"`ip {' '.join(args)}` failed: {proc.stderr.strip()} (the pod network needs root)")
    return proc


def owner_of(cluster: str, root: Path) -> str:
    """Who holds the pod network: the cluster's name and its state folder, hashed.

    The name alone is not enough: two ``DRALAB_HOME``s (a developer's and CI's) may both have a
    cluster of that name, and one must not take the other's network down.
    """
    return f"{cluster}@{hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:12]}"


def _same_owner(holder: str, owner: str) -> bool:
    """``holder`` (the interface's alias) is ``owner``; an alias of a name only (written before the
    folder was part of it) matches that name, so such a cluster can still be taken down."""
    return holder == owner or ("@" not in holder and holder == owner.split("@", 1)[0])


def interface_owner() -> str | None:
    """The owner key (``owner_of``) of ``API_INTERFACE``'s cluster, "" for an interface no dralab
    cluster made, None when the interface does not exist."""
    sysfs = Path(f"/sys/class/net/{API_INTERFACE}")
    if not sysfs.exists():
        return None
    alias = (sysfs / "ifalias").read_text().strip() if (sysfs / "ifalias").exists() else ""
    return alias.removeprefix(_ALIAS_PREFIX) if alias.startswith(_ALIAS_PREFIX) else ""


def check_free(owner: str) -> None:
    """UserError when the host's network is not free for ``owner``'s pod network (before it writes any state).

    Refused: another cluster's interface, a stray one, and ``KUBE-*`` iptables chains on a host where
    no dralab pod network runs, since ``down`` takes every ``KUBE-*`` chain off: they would be another
    Kubernetes' kube-proxy rules (or a crashed cluster's, which the message says how to remove).
    """
    holder = interface_owner()
    if holder is None:
        chains = kube_chains(_saved_rules())
        if chains:
            shown = ", ".join(sorted(set(chains))[:4]) + (", ..." if len(set(chains)) > 4 else "")
            raise UserError(
                f"this host has KUBE-* iptables chains ({shown}) and no dralab pod network: another Kubernetes' "
                "kube-proxy may own them, and a pod network's `down` removes every KUBE-* chain, so --pod-network "
                "is refused here. If they are left over from a dralab cluster that crashed, remove them "
                "(`iptables-save | grep KUBE-` shows them) and run the command again"
            )
        return
    if _same_owner(holder, owner):
        return
    name = holder.split("@", 1)[0]
    elsewhere = " (in another DRALAB_HOME)" if name and name == owner.split("@", 1)[0] else ""
    raise UserError(
        f"the pod network's interface {API_INTERFACE} belongs to cluster {name or '(unknown)'}{elsewhere}: one "
        f"cluster with a pod network runs on a host at a time (kube-proxy owns the host's KUBE-* chains); run "
        f"`dralab cluster down --name {name}` first"
        + ("" if name else f", or `ip link delete {API_INTERFACE}` if no dralab cluster holds it")
    )


def ensure_interface(owner: str) -> None:
    """Create ``API_INTERFACE`` with ``API_ADDRESS`` and the Service route, for ``owner`` (idempotent)."""
    check_free(owner)
    if interface_owner() is None:
        _ip("link", "add", API_INTERFACE, "type", "bridge")
        _ip("link", "set", API_INTERFACE, "alias", _ALIAS_PREFIX + owner)
        _ip("address", "add", f"{API_ADDRESS}/32", "dev", API_INTERFACE)
        _ip("link", "set", API_INTERFACE, "up")
    _ip("route", "replace", SERVICE_CIDR, "dev", API_INTERFACE, "src", API_ADDRESS)


def delete_interface(owner: str) -> None:
    """Delete ``API_INTERFACE`` (and so its route) when ``owner`` holds it."""
    holder = interface_owner()
    if holder and _same_owner(holder, owner):
        _ip("link", "delete", API_INTERFACE, check=False)


def cni_bridge_plugin(bridge: str, data_dir: Path) -> dict[str, Any]:
    """The CNI bridge plugin of a pod network: the bridge is the pods' gateway, without masquerade."""
    return {
        "type": "bridge",
        "bridge": bridge,
        "isGateway": True,
        "ipMasq": False,
        "hairpinMode": True,
        "ipam": {
            "type": "host-local",
            "ranges": [[{"subnet": POD_SUBNET, "gateway": POD_GATEWAY}]],
            "routes": [{"dst": "0.0.0.0/0"}],
            "dataDir": str(data_dir),
        },
    }


def kube_proxy_config(kubeconfig: Path, node: str, healthz_port: int, metrics_port: int) -> dict[str, Any]:
    """KubeProxyConfiguration: iptables mode, everything on this host's own addresses, kernel settings untouched."""
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig), "qps": 50, "burst": 100},
        "hostnameOverride": node,
        "bindAddress": API_ADDRESS,
        "healthzBindAddress": f"127.0.0.1:{healthz_port}",
        "metricsBindAddress": f"127.0.0.1:{metrics_port}",
        "mode": "iptables",
        "clusterCIDR": POD_SUBNET,
        "detectLocalMode": "ClusterCIDR",
        "nodePortAddresses": [f"{API_ADDRESS}/32"],
        "iptables": {"localhostNodePorts": False, "masqueradeAll": False, "syncPeriod": "30s", "minSyncPeriod": "1s"},
        "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
    }


def kube_chains(dump: str) -> list[str]:
    """The ``KUBE-*`` chains an ``iptables-save`` dump declares (pure)."""
    return [line.split()[0].lstrip(":") for line in dump.splitlines() if line.startswith(_KUBE_CHAIN)]


FAMILIES = ("iptables", "ip6tables")


def _saved(family: str) -> str:
    try:
        return subprocess.run([f"{family}-save"], capture_output=True, text=True, check=False).stdout
    except FileNotFoundError:
        return ""


def _saved_rules() -> str:
    return "\n".join(_saved(family) for family in FAMILIES)


def removal_commands(dump: str) -> list[list[str]]:
    """The iptables arguments that take every ``KUBE-*`` chain of ``dump`` off (pure).

    First the rules of other chains that jump into one (``-D`` with the rule as saved), then each
    chain's flush and deletion. Only ``KUBE-*`` chains and jumps into them are touched.
    """
    jumps: list[list[str]] = []
    chains: list[list[str]] = []
    table = ""
    for line in dump.splitlines():
        if line.startswith("*"):
            table = line[1:].strip()
        elif line.startswith(_KUBE_CHAIN):
            chains.append(["-t", table, line.split()[0][1:]])
        elif line.startswith("-A ") and not line.split()[1].startswith("KUBE-") and " -j KUBE-" in f"{line} ":
            jumps.append(["-t", table, "-D", *shlex.split(line)[1:]])
    flushes = [[*c[:2], "-F", c[2]] for c in chains]
    deletes = [[*c[:2], "-X", c[2]] for c in chains]
    return jumps + flushes + deletes


def cleanup_rules(kube_proxy: Path) -> None:
    """``kube-proxy --cleanup``, then whatever ``KUBE-*`` chain it leaves (KUBE-FIREWALL, which kube-proxy
    1.35 leaves to the kubelet that made it in older releases), in both families."""
    if kube_proxy.is_file() and kube_chains(_saved_rules()):
        subprocess.run([str(kube_proxy), "--cleanup", "-v=0"], capture_output=True, text=True, check=False, timeout=60)
    for family in FAMILIES:
        for args in removal_commands(_saved(family)):
            subprocess.run([family, *args], capture_output=True, text=True, check=False)


def remove(owner: str, kube_proxy: Path) -> list[str]:
    """Take ``owner``'s pod network off the host (rules, interface); returns what is left."""
    holder = interface_owner()
    if holder is not None and not _same_owner(holder, owner):
        return []  # another cluster's network: not ours to remove
    cleanup_rules(kube_proxy)
    delete_interface(owner)
    return leftovers(owner)


def leftovers(owner: str) -> list[str]:
    """What of ``owner``'s pod network is on the host (empty after ``remove``)."""
    out = []
    holder = interface_owner()
    if holder and _same_owner(holder, owner):
        out.append(f"interface {API_INTERFACE}")
    chains = kube_chains(_saved_rules())
    if chains:
        out.append(f"iptables chains {', '.join(sorted(set(chains)))}")
    return out


def require_tools() -> None:
    """UserError naming the package when kube-proxy's iptables is missing."""
    try:
        subprocess.run(["iptables", "--version"], capture_output=True, check=True)
    except (FileNotFoundError, subprocess.CalledProcessError):
        raise UserError(
            "the pod network needs iptables (kube-proxy's iptables mode): `sudo apt-get install -y iptables` "
            "(or `scripts/system-packages chart`)"
        ) from None
