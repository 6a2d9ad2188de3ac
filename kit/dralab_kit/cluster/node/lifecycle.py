"""Bringing the real node up and taking it down without leaving anything on the host.

Up (``prepare`` then the cluster starts ``node-ns``, ``containerd``, ``kubelet`` in that order):
kubelet PKI and kubeconfig, base configs + the Ansible roles, the two local images, the
kubelet's cgroup root in every v1 hierarchy; once containerd answers, ``import_images``; once
the kubelet has registered its Node, ``patch_node`` gives it the address 127.0.0.1 (the kubelet
refuses a loopback ``--node-ip`` and would otherwise publish none, and exec/logs would fail with
"no preferred addresses found").

Down (``teardown``): the kubelet stops, every task is removed through containerd (the shims
outlive containerd otherwise), containerd stops, any process still in the node's mount namespace
is killed by pid, the namespace holder exits (its mounts vanish with it), the cgroup root is
removed from every hierarchy and the CNI bridge is deleted.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from dralab.errors import UserError
from dralab.kube import Kube, KubeError
from dralab.kube.paths import node_path
from dralab.tls import write_pem
from dralab.util import WaitTimeout, atomic_write, get_logger, wait_for
from dralab_kit.cluster import build
from dralab_kit.cluster.kubeconfig import render_kubeconfig
from dralab_kit.cluster.node import config, images
from dralab_kit.cluster.node.paths import NodePaths
from dralab_kit.cluster.pki import Pki, issue

log = get_logger("dralab_kit.cluster.node")
CGROUP_MOUNTS = Path("/sys/fs/cgroup")
NODE_RBAC_BINDING = "dralab-system-nodes"
NODE_ADDRESS = "127.0.0.1"
UNINITIALIZED_TAINT = "node.cloudprovider.kubernetes.io/uninitialized"
Say = Callable[[str], None]


def node_ports(fresh: Callable[[], int], previous: dict[str, int] | None) -> dict[str, int]:
    """Ports of one real node (kept once recorded)."""
    ports = dict(previous or {})
    for key in ("port", "healthz", "containerd", "proxy-healthz", "proxy-metrics"):
        ports.setdefault(key, fresh())
    return ports


def rbac_binding() -> dict[str, Any]:
    """The built-in ``system:node`` ClusterRole bound to group ``system:nodes`` (RBAC-only apiserver)."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": NODE_RBAC_BINDING},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:node"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:nodes"}],
    }


def _kubelet_pki(paths: NodePaths, cluster_pki: Pki) -> None:
    paths.pki_dir.mkdir(parents=True, exist_ok=True)
    ca_cert, ca_key = cluster_pki.ca_cert.read_bytes(), cluster_pki.ca_key.read_bytes()
    client = (paths.pki_dir / "kubelet-client.crt", paths.pki_dir / "kubelet-client.key")
    if not client[0].is_file():
        cert, key = issue(ca_cert, ca_key, f"system:node:{paths.node}", org="system:nodes", client=True)
        write_pem(*client, cert, key)
    serving = (paths.pki_dir / "kubelet-serving.crt", paths.pki_dir / "kubelet-serving.key")
    if not serving[0].is_file():
        cert, key = issue(ca_cert, ca_key, paths.node, sans=(NODE_ADDRESS, "localhost", paths.node), server=True)
        write_pem(*serving, cert, key)


def prepare(
    paths: NodePaths, server: str, cluster_pki: Pki, cdi_dir: Path, ports: dict[str, int], say: Say,
    version: str = build.K8S_VERSION, pod_network: bool = False,
) -> None:
    """Everything the node needs on disk before its processes start (a kubelet of ``version``)."""
    build.require_node_binaries(version)
    for folder in (paths.root, paths.kubelet_root, paths.images_dir):
        folder.mkdir(parents=True, exist_ok=True)
    _kubelet_pki(paths, cluster_pki)
    kubeconfig = render_kubeconfig(
        f"node-{paths.node}",
        server,
        cluster_pki.ca_cert.read_bytes(),
        (paths.pki_dir / "kubelet-client.crt").read_bytes(),
        (paths.pki_dir / "kubelet-client.key").read_bytes(),
        user=f"system:node:{paths.node}",
    )
    paths.config_dir.mkdir(parents=True, exist_ok=True)
    atomic_write(paths.kubelet_kubeconfig, kubeconfig, mode=0o600)
    runc = build.binary_path("runc")
    config.write_base(paths, runc, build.cni_bin_dir(), ports, cluster_pki.ca_cert, pod_network)
    outcome = config.configure(paths, config.role_vars(paths, cdi_dir, runc, version))
    how = "cached output of" if outcome["cached"] else "ran"
    say(f"node {paths.node}: {how} the Ansible roles containerd_cdi, ascend_runtime, kubelet_feature_gates")
    images.build_images(paths.images_dir)
    prepare_cgroups(paths.cgroup_root)


def wait_namespace(paths: NodePaths, alive: Callable[[], bool], timeout: float = 30.0) -> dict[str, Any]:
    """The holder's ready record, once its mounts are in place."""

    def ready() -> dict[str, Any] | None:
        if not alive():
            raise UserError(f"the node's mount namespace holder exited; see its log (node {paths.node})")
        try:
            return json.loads(paths.ns_ready.read_text())
        except (OSError, ValueError):
            return None

    return wait_for(ready, timeout, "the node's private mount namespace", interval=0.05)


# ---------------------------------------------------------------- containerd


def ctr(paths: NodePaths, *args: str, timeout: float = 120.0, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``ctr`` against the node's containerd, namespace k8s.io (containerd does the work in its namespace)."""
    argv = [str(build.binary_path("ctr")), "--address", str(paths.containerd_socket), "-n", "k8s.io", *args]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise UserError(f"ctr {' '.join(args)} failed: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc


def import_images(paths: NodePaths) -> list[str]:
    """Import the archives whose image (name and digest) containerd does not have; returns those imported."""
    listed = ctr(paths, "images", "ls").stdout
    done = []
    for name, archive in ((images.PAUSE_IMAGE, "pause.oci.tar"), (images.LAB_IMAGE, "lab.oci.tar")):
        path = paths.images_dir / archive
        digest = _archive_digest(path)
        if any(line.split()[:1] == [name] and digest in line for line in listed.splitlines()):
            continue
        ctr(paths, "images", "import", "--local", str(path))
        done.append(name)
    return done


def _archive_digest(path: Path) -> str:
    import tarfile

    with tarfile.open(path) as tar:
        member = tar.extractfile("index.json")
        assert member is not None
        return json.loads(member.read())["manifests"][0]["digest"]


def remove_all_tasks(paths: NodePaths) -> int:
    """Kill and delete every container task and container (so their shims exit); returns the count."""
    ids = [line.strip() for line in ctr(paths, "tasks", "ls", "-q", check=False).stdout.splitlines() if line.strip()]
    for cid in ids:
        ctr(paths, "tasks", "rm", "-f", cid, check=False, timeout=30)
    containers = [c for c in ctr(paths, "containers", "ls", "-q", check=False).stdout.splitlines() if c.strip()]
    if containers:
        ctr(paths, "containers", "rm", *containers, check=False, timeout=60)
    return len(ids)


# ---------------------------------------------------------------- kubelet and the Node


def node_patch(node: dict[str, Any], labels: dict[str, str]) -> dict[str, Any] | None:
    """The merge patch that adds the inventory's ``labels`` and lifts the "uninitialized" taint.

    Additive only: the labels and annotations the kubelet set at registration (``kubernetes.io/hostname``,
    ``kubernetes.io/os``, ...) stay, because a merge patch's ``"labels": null`` would delete them all.
    The taint list is sent only when the "uninitialized" taint is on it, and then keeps every other
    taint. None when there is nothing to change.
    """
    meta = node.get("metadata") or {}
    current = meta.get("labels") or {}
    patch: dict[str, Any] = {}
    added = {k: v for k, v in labels.items() if current.get(k) != v}
    if added:
        patch["metadata"] = {"labels": added}
    taints = (node.get("spec") or {}).get("taints") or []
    kept = [t for t in taints if t.get("key") != UNINITIALIZED_TAINT]
    if len(kept) != len(taints):
        # a list replaces the whole field in a merge patch; [] (not null) when nothing else is left
        patch["spec"] = {"taints": kept}
    return patch or None


def patch_node(kube: Kube, node: str, labels: dict[str, str]) -> None:
    """What a cloud controller would do: address 127.0.0.1 only, the "uninitialized" taint off, labels.

    The kubelet runs with ``--cloud-provider=external``, so it keeps the addresses once set (and
    exec/logs from the apiserver go to 127.0.0.1, never to the host's other addresses).
    """
    addresses = [{"type": "InternalIP", "address": NODE_ADDRESS}]
    kube.patch(f"{node_path(node)}/status", {"status": {"addresses": addresses}})
    for _ in range(5):
        obj = kube.get(node_path(node), missing_ok=True) or {}
        patch = node_patch(obj, labels)
        if patch is None:
            return
        # the resourceVersion guards the taint list against the node controller's own taint writes
        patch.setdefault("metadata", {})["resourceVersion"] = (obj.get("metadata") or {}).get("resourceVersion")
        try:
            kube.patch(node_path(node), patch)
            return
        except KubeError as exc:
            if exc.status != 409:
                raise
    raise UserError(f"node {node} kept changing while its labels and taints were set; run `dralab cluster up` again")


def wait_node_registered(kube: Kube, node: str, alive: Callable[[], bool], timeout: float) -> dict[str, Any]:
    def registered() -> dict[str, Any] | None:
        if not alive():
            raise UserError(f"the kubelet of node {node} exited before registering; see its log")
        return kube.get(node_path(node), missing_ok=True)

    try:
        return wait_for(registered, timeout, f"the kubelet to register node {node}", interval=0.1)
    except WaitTimeout as exc:
        raise UserError(str(exc)) from None


def node_initialized(kube: Kube, node: str) -> bool:
    """True when the Node has only the loopback address and no "uninitialized" taint."""
    obj = kube.get(node_path(node), missing_ok=True) or {}
    addresses = (obj.get("status") or {}).get("addresses") or []
    taints = (obj.get("spec") or {}).get("taints") or []
    return addresses == [{"type": "InternalIP", "address": NODE_ADDRESS}] and not any(
        t.get("key") == UNINITIALIZED_TAINT for t in taints
    )


# ---------------------------------------------------------------- host resources


def cgroup_hierarchies() -> list[Path]:
    """Mount points of the cgroup hierarchies (v1 controllers, named ones, the unified one)."""
    out = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        parts = line.split()
        if len(parts) > 2 and parts[2] in ("cgroup", "cgroup2") and Path(parts[1]).is_relative_to(CGROUP_MOUNTS):
            out.append(Path(parts[1]))
    return out


def prepare_cgroups(cgroup_root: str) -> None:
    """The kubelet's cgroupRoot in every v1 hierarchy (it refuses to start otherwise)."""
    for mount in cgroup_hierarchies():
        target = mount / cgroup_root.strip("/")
        target.mkdir(exist_ok=True)
        for name in ("cpuset.cpus", "cpuset.mems"):
            mine, parent = target / name, mount / name
            if mine.exists() and not mine.read_text().strip():
                mine.write_text(parent.read_text())


def remove_cgroups(cgroup_root: str) -> list[str]:
    """Remove the node's cgroup tree everywhere, deepest first; processes left there are killed. Returns leftovers."""
    left = []
    for mount in cgroup_hierarchies():
        top = mount / cgroup_root.strip("/")
        if not top.is_dir():
            continue
        dirs = sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True)
        for folder in [*dirs, top]:
            _kill_cgroup_procs(folder)
            try:
                folder.rmdir()
            except OSError as exc:
                left.append(f"{folder}: {exc.strerror}")
    return left


def _kill_cgroup_procs(folder: Path, timeout: float = 5.0) -> None:
    """SIGKILL what is in the cgroup and wait (bounded) until it has left: a killed process stays
    listed until the kernel has finished its exit, and until then the cgroup cannot be removed."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            pids = (folder / "cgroup.procs").read_text().split()
        except OSError:
            return
        if not pids or time.monotonic() >= deadline:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
        time.sleep(0.02)  # the kernel's exit work; polled against the deadline


def delete_bridge(name: str) -> bool:
    if not Path(f"/sys/class/net/{name}").exists():
        return False
    subprocess.run(["ip", "link", "delete", name], capture_output=True, check=False)
    return True


def namespace_pids(mntns: str) -> list[int]:
    """Live processes whose mount namespace is ``mntns`` (``mnt:[inode]``): only the node's own."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if os.readlink(entry / "ns" / "mnt") == mntns and _not_zombie(int(entry.name)):
                pids.append(int(entry.name))
    return pids


def kill_namespace(mntns: str, timeout: float = 10.0) -> int:
    """SIGKILL every process in the node's namespace (shims, containers) until none is left; returns the count.

    Scans again after each round: a shim may be forking runc while it is being killed.
    """
    killed: set[int] = set()
    deadline = time.monotonic() + timeout
    while True:
        pids = [p for p in namespace_pids(mntns) if p != os.getpid()]
        if not pids or time.monotonic() > deadline:
            return len(killed)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            killed.add(pid)
        time.sleep(0.05)


def _not_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


def describe_pid(pid: int) -> str:
    """``pid (state S, parent 1): argv`` for a leftover message: which process it is, and who started it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return f"{pid} (gone)"
    fields = stat[stat.rindex(")") + 2:].split()
    return f"{pid} (state {fields[0]}, parent {fields[1]}): {argv[:200] or stat[:stat.rindex(')') + 1]}"


def leftovers(paths: NodePaths, mntns: str | None) -> list[str]:
    """What of the node is still on the host (empty after a clean ``down``)."""
    out = []
    pids = namespace_pids(mntns) if mntns else []
    if pids:
        out.append(f"processes in {mntns}: " + "; ".join(describe_pid(pid) for pid in pids))
    for mount in cgroup_hierarchies():
        if (mount / paths.cgroup_root.strip("/")).exists():
            out.append(f"cgroup {mount / paths.cgroup_root.strip('/')}")
    if Path(f"/sys/class/net/{paths.bridge}").exists():
        out.append(f"interface {paths.bridge}")
    root = str(paths.root)
    for line in Path("/proc/self/mounts").read_text().splitlines():
        if root in line.split()[1]:
            out.append(f"mount {line.split()[1]}")
    return out


def read_ns(paths: NodePaths) -> str | None:
    try:
        return str(json.loads(paths.ns_ready.read_text())["mntns"])
    except (OSError, ValueError, KeyError):
        return None


def _names_node(pid: int, paths: NodePaths) -> bool:
    """Whether process ``pid`` is provably this node's: its command line names the node folder."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    root = str(paths.root).encode()
    return any(arg == root or arg.startswith(root + b"/") or root + b"/" in arg for arg in argv)


def _open_ns_of(pid: int, mntns: str, paths: NodePaths) -> int | None:
    """A descriptor on ``pid``'s mount namespace when that is ``mntns`` and ``pid`` is the node's own."""
    if not _names_node(pid, paths):
        return None
    try:
        fd = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    # checked again once open: the pid may have exited and been reused between the two looks
    if f"mnt:[{os.fstat(fd).st_ino}]" == mntns and _names_node(pid, paths):
        return fd
    os.close(fd)
    return None


@contextlib.contextmanager
def pinned_namespace(paths: NodePaths, mntns: str | None = None) -> Iterator[str | None]:
    """The node's mount namespace, held open by a descriptor for the time of a teardown.

    Why: a namespace's number (``mnt:[inode]``) is free again the moment its last process exits,
    and the kernel hands the lowest free number to the next namespace made, for instance by
    another node starting in parallel. "Kill (or count) the processes of mnt:[N]" after the node's
    namespace died would then reach that other node. While a descriptor is open the namespace
    (and its number) lives on, so every process carrying the number is the node's.

    Yields ``mntns`` when it could be pinned through a process that names the node folder (the
    holder, containerd or the kubelet), else None: then nothing may be killed or counted by
    namespace (the node's cgroups still are). The namespace goes when the block ends.
    """
    mntns = mntns or read_ns(paths)
    fd = None
    if mntns:
        try:
            holder = int(json.loads(paths.ns_ready.read_text())["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            holder = None
        candidates = ([holder] if holder else []) + namespace_pids(mntns)
        for pid in candidates:
            fd = _open_ns_of(pid, mntns, paths)
            if fd is not None:
                break
    try:
        yield mntns if fd is not None else None
    finally:
        if fd is not None:
            os.close(fd)


def teardown_host(paths: NodePaths, mntns: str | None) -> list[str]:
    """After the processes are stopped: kill what is left in the namespace, cgroups, bridge. Returns leftovers.

    ``mntns`` must come from ``pinned_namespace`` (or be None): a bare number may be another node's by now.
    """
    if mntns:
        kill_namespace(mntns)
    left = remove_cgroups(paths.cgroup_root)
    delete_bridge(paths.bridge)
    return left
