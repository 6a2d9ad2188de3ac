"""dralab installed the way users install it, on a local cluster with a real node and a pod network.

The ``node-chart`` profile and the Pulumi ``node`` profile stand up the same thing, in this order
(each step idempotent, each with its undo):

1. the cluster: ``ensure_cluster(real_node=True, pod_network=True)``: control plane, the real
   kubelet, containerd with CDI and the ``ascend`` handler, runc, CNI, kube-proxy;
2. the images, imported into the node's containerd from OCI archives (no registry): dralab's own,
   built from the repository's Dockerfile (``dralab_kit.image``), and cert-manager's
   (``dralab_kit.cluster.certmanager``);
3. cert-manager from its own chart, as pods;
4. dralab from ``charts/dralab``: the values every cluster gets (``dralab_kit.provision.chart``,
   the same the ``kind`` profile installs) plus ``node_values``, the ones that depend on where
   this node keeps its kubelet, CDI and state folders.

Host paths: the real node's kubelet root, CDI folder and driver state live under the cluster's
folder, never in /var/lib or /usr/local, so the chart's hostPath volumes point there too.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from dralab.errors import UserError

Say = Callable[[str], None]
DRALAB_RELEASE = "dralab"
DRALAB_NAMESPACE = "dralab-system"
CERT_MANAGER_RELEASE = "cert-manager"
CERT_MANAGER_NAMESPACE = "cert-manager"
HELM_TIMEOUT = "6m"


def _quiet(_: str) -> None:
    pass


def node_values(handle: Any) -> dict[str, Any]:
    """The chart values that depend on this cluster: the real node's host paths (pure over the handle)."""
    from dralab_kit.cluster.node.integration import node_paths

    node = handle.state["realNode"]
    paths = node_paths(handle, node)
    root = Path(handle.node_dir(node))
    return {
        "driver": {
            "cdiDir": str(handle.cdi_dir(node)),
            "pluginDir": str(paths.kubelet_root / "plugins"),
            "registryDir": str(paths.plugins_registry),
            "stateDir": str(handle.layout.driver_state_dir(node)),  # where the harness reads the checkpoint
            "enforcementLibraryDir": str(root / "dralab-lib"),
        },
    }


def image_values(image: str) -> dict[str, Any]:
    """An image imported into the node's containerd: never pulled (pure)."""
    from dralab_kit.provision.chart import split_image

    repo, tag = split_image(image)
    return {"image": {"repository": repo, "tag": tag, "pullPolicy": "Never"}}


def helm_binary() -> Path:
    from dralab_kit.provision.tools import helm_or_build

    return helm_or_build(progress=True)


def helm(handle: Any, args: Sequence[str], timeout: float = 600.0) -> subprocess.CompletedProcess[str]:
    """helm against the cluster; a failure raises with helm's own words."""
    argv = [str(helm_binary()), *args, "--kubeconfig", str(handle.kubeconfig)]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=timeout)
    if proc.returncode != 0:
        raise UserError(f"helm {' '.join(args[:2])} failed: {(proc.stderr or proc.stdout).strip()}")
    return proc


def release_revision(handle: Any, release: str, namespace: str) -> int | None:
    """The deployed revision of ``release``, or None when it is not installed."""
    argv = [str(helm_binary()), "status", release, "-n", namespace, "-o", "json"]
    proc = subprocess.run([*argv, "--kubeconfig", str(handle.kubeconfig)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return None
    info = json.loads(proc.stdout)
    return int(info["version"]) if (info.get("info") or {}).get("status") == "deployed" else None


def upgrade_install(
    handle: Any, release: str, chart: Path, namespace: str, values: dict[str, Any], extra: Sequence[str] = ()
) -> None:
    """``helm upgrade --install --wait`` with ``values`` (written to a temp file, removed after)."""
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as fh:
        yaml.safe_dump(values, fh, sort_keys=False)
        values_file = Path(fh.name)
    try:
        helm(
            handle,
            ["upgrade", "--install", release, str(chart), "--namespace", namespace, "--create-namespace",
             "--values", str(values_file), "--wait", "--timeout", HELM_TIMEOUT, *extra],
        )  # fmt: skip
    finally:
        values_file.unlink(missing_ok=True)


def import_archives(handle: Any, archives: Sequence[Path]) -> list[str]:
    """Import OCI archives into the real node's containerd (``k8s.io`` namespace); returns their names."""
    from dralab_kit.cluster.node import lifecycle
    from dralab_kit.cluster.node.integration import node_paths

    paths = node_paths(handle, handle.state["realNode"])
    names = []
    for archive in archives:
        out = lifecycle.ctr(paths, "images", "import", "--no-unpack=false", str(archive), timeout=600).stdout
        names += [line.split()[1] for line in out.splitlines() if line.startswith("unpacking ")] or [archive.name]
    return names


def install_cert_manager(handle: Any, say: Say = _quiet) -> None:
    """cert-manager's images into the node, then its chart (CRDs included) as pods; waits until ready."""
    from dralab_kit.cluster import certmanager

    built = certmanager.build_cert_manager(progress=True)
    import_archives(handle, list(built.images.values()))
    say(f"installing cert-manager {certmanager.VERSION} from its chart")
    upgrade_install(
        handle, CERT_MANAGER_RELEASE, built.chart, CERT_MANAGER_NAMESPACE, certmanager.helm_values()
    )


def planned_handle(name: str, devices: str | None = None) -> Any:
    """The handle cluster ``name`` will have (its paths are known before it exists: Pulumi's preview)."""
    from dralab.model.inventory import load_inventory
    from dralab_kit.cluster.api import ClusterHandle
    from dralab_kit.cluster.layout import Layout

    first = load_inventory(devices).nodes[0].name
    return ClusterHandle(name=name, layout=Layout.of(name), state={"realNode": first})


def image_revision() -> str:
    """The local image's inputs as a digest (nothing is built): a new one means a new image to import."""
    from dralab_kit.image.build import context_digest

    return context_digest()


def local_image(say: Say = _quiet) -> tuple[str, Path]:
    """dralab's image built here from the repository's Dockerfile (cached): its name and OCI archive."""
    from dralab_kit.image import build as image_build

    return image_build.ensure_image(say=say)


def prepare(handle: Any, say: Say = _quiet) -> str:
    """Steps 2 and 3: the images in the node's containerd, cert-manager installed; returns dralab's image."""
    image, archive = local_image(say)
    say(f"importing {image} into the node's containerd")
    import_archives(handle, [archive])
    if release_revision(handle, CERT_MANAGER_RELEASE, CERT_MANAGER_NAMESPACE) is None:
        install_cert_manager(handle, say)
    return image


def cluster_values(handle: Any, image: str) -> dict[str, Any]:
    """What dralab's release gets on this cluster beyond every cluster's values: the local image, the node's
    paths, and who writes the webhooks' CA bundle with the cert-manager built here (``certmanager``)."""
    from dralab_kit.cluster import certmanager
    from dralab_kit.provision.chart import deep_merge

    values = deep_merge(image_values(image), node_values(handle))
    if certmanager.CAINJECTOR_DROPS_MATCH_CONDITIONS:
        values = deep_merge(values, {"webhook": {"certManager": {"caInjector": "dralab"}}})
    return values


def install_dralab(handle: Any, image: str, profile_values: dict[str, Any] | None = None, say: Say = _quiet) -> None:
    """Step 4: dralab's chart with ``profile_values`` and this cluster's values; waits until ready."""
    from dralab_kit.provision.chart import chart_dir, deep_merge

    say(f"installing dralab ({image}) from charts/dralab")
    values = deep_merge(profile_values or {}, cluster_values(handle, image))
    upgrade_install(handle, DRALAB_RELEASE, chart_dir(), DRALAB_NAMESPACE, values)
    wait_rolled_out(handle)


def rolled_out(workload: dict[str, Any]) -> bool:
    """Whether a Deployment or DaemonSet runs its current spec everywhere, ready (pure).

    ``helm --wait`` can return before a DaemonSet's rollout has begun (its status still describes the
    old generation): the controller's ``observedGeneration`` must have caught up first.
    """
    meta, status = workload.get("metadata") or {}, workload.get("status") or {}
    if status.get("observedGeneration", 0) < meta.get("generation", 0):
        return False
    if workload.get("kind") == "DaemonSet":
        want = status.get("desiredNumberScheduled", 0)
        return status.get("updatedNumberScheduled", 0) == want == status.get("numberReady", 0)
    want = (workload.get("spec") or {}).get("replicas", 1)
    return status.get("updatedReplicas", 0) == want == status.get("readyReplicas", 0) == status.get("replicas", 0)


def wait_rolled_out(handle: Any, namespace: str = DRALAB_NAMESPACE, timeout: float = 300.0) -> None:
    """Until every Deployment and DaemonSet of the release runs its current spec (see ``rolled_out``)."""
    from dralab.util import wait_for

    query = f"labelSelector=app.kubernetes.io/instance={DRALAB_RELEASE}"

    def done() -> bool:
        kube = handle.kube()
        try:
            items = [
                {**item, "kind": kind}
                for kind, plural in (("Deployment", "deployments"), ("DaemonSet", "daemonsets"))
                for item in kube.list(f"/apis/apps/v1/namespaces/{namespace}/{plural}?{query}")["items"]
            ]
        finally:
            kube.close()
        return bool(items) and all(rolled_out(item) for item in items)

    wait_for(done, timeout, f"dralab's workloads in {namespace} to roll out", interval=1.0)


def wait_webhook_serving(handle: Any, timeout: float = 120.0) -> None:
    """Until the webhook answers admissions: a dry-run pod in HAMi syntax comes back converted."""
    from dralab.kube import KubeError
    from dralab.util import wait_for

    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "dralab-install-probe", "namespace": "default"},
        "spec": {
            "containers": [
                {"name": "c", "image": "dralab.local/pause:1.0",
                 "resources": {"limits": {"huawei.com/Ascend310P": "1", "huawei.com/Ascend310P-memory": "1024"}}}
            ]
        },
    }  # fmt: skip

    def converted() -> bool:
        kube = handle.kube()
        try:
            out = kube.create("/api/v1/namespaces/default/pods", pod, dry_run=True) or {}
        except KubeError:
            return False
        finally:
            kube.close()
        return bool((out.get("spec") or {}).get("resourceClaims"))

    wait_for(converted, timeout, "dralab's webhook to convert a pod", interval=1.0)


def stand_up(
    name: str,
    profile_values: dict[str, Any] | None = None,
    devices: str | None = None,
    kubernetes: str | None = None,
    say: Say = _quiet,
) -> Any:
    """The whole install, step by step as in the module docstring; returns the cluster handle."""
    from dralab_kit.cluster.api import ensure_cluster

    started = time.monotonic()
    handle = ensure_cluster(name, devices=devices, say=say, real_node=True, pod_network=True, kubernetes=kubernetes)
    image = prepare(handle, say)
    install_dralab(handle, image, profile_values, say)
    wait_webhook_serving(handle)
    say(f"dralab installed from its chart on {name} in {time.monotonic() - started:.1f}s")
    return handle
