"""Bringing a profile's cluster up (or connecting to it) and deploying dralab there.

``open_environment`` turns a profile into an :class:`Environment`: a client, the capabilities
that really hold (a profile may promise node files, but a foreign ``--kubeconfig`` has none),
the node directories and logs of the local cluster, and how long bring-up took.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from dralab.errors import UserError
from harness.cluster import ClusterClient, KubeCluster
from harness.profile import Profile

Progress = Callable[[str], None]


@dataclass
class Environment:
    """A cluster ready for labs, and what can be observed on it."""

    profile: Profile
    client: ClusterClient
    capabilities: frozenset[str]
    cluster_name: str | None = None
    kubeconfig: Path | None = None
    node_root: Callable[[str], Path] | None = None
    logs_dir: Path | None = None
    context: str | None = None
    bring_up_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def node_dir(self, node: str) -> Path:
        if self.node_root is None:
            raise UserError(f"profile {self.profile.name} exposes no node directories")
        return self.node_root(node)

    def close(self) -> None:
        close = getattr(self.client, "close", None)
        if callable(close):
            close()


def repo_root() -> Path:
    """The folder that holds the dralab package (and charts/ in a source checkout)."""
    import dralab

    return Path(dralab.__file__).resolve().parents[1]


def _memory(profile: Profile) -> Environment:
    from harness.testing import FakeCluster

    base = profile.path.parent if profile.path else Path.cwd()
    objects = profile.cluster.get("objects")
    client = FakeCluster.from_file(base / objects) if objects else FakeCluster()
    root = profile.cluster.get("nodeRoot")
    logs = profile.cluster.get("logsDir")
    node_root = (lambda node: base / root / node) if root else None
    return Environment(
        profile=profile,
        client=client,
        capabilities=frozenset(profile.capabilities),
        cluster_name="memory",
        node_root=node_root,
        logs_dir=(base / logs) if logs else None,
    )


def _local(profile: Profile, inventory: str | None, kubeconfig: Path | None, progress: Progress) -> Environment:
    try:
        from dralab_kit.cluster import api
    except ImportError as exc:
        raise UserError(f"the local cluster is not available in this installation ({exc})") from None
    name = profile.cluster_name_for(inventory)
    caps = set(profile.capabilities)
    started = time.monotonic()
    if kubeconfig is not None:
        handle = api.get_cluster(name)
        if handle is None or Path(handle.kubeconfig).resolve() != kubeconfig.resolve():
            handle = None
            caps -= {"node-files", "host-probe", "component-logs"}
        config_path = kubeconfig
    else:
        progress(f"bringing up the local cluster {name!r} (inventory {inventory or 'default'})")
        real_node = bool(profile.cluster.get("realNode"))
        pod_network = bool(profile.cluster.get("podNetwork"))
        handle = api.ensure_cluster(name, devices=inventory, say=progress, real_node=real_node,
                                    kubernetes=profile.kubernetes, pod_network=pod_network)
        config_path = Path(handle.kubeconfig)
        if profile.deploy_method == "helm":
            from dralab_kit.cluster import install

            # what a user installs before dralab (its images, cert-manager), then the same deploy as kind's
            image = install.prepare(handle, progress)
            deploy_helm(profile, config_path, progress, cluster_values=install.cluster_values(handle, image))
            install.wait_rolled_out(handle)
            install.wait_webhook_serving(handle)
    env = Environment(
        profile=profile,
        client=KubeCluster.from_kubeconfig(config_path),
        capabilities=frozenset(caps),
        cluster_name=name,
        kubeconfig=config_path,
        node_root=handle.node_dir if handle is not None else None,
        logs_dir=Path(handle.logs_dir) if handle is not None else None,
        bring_up_seconds=time.monotonic() - started,
    )
    if handle is None:
        env.notes.append("existing cluster from --kubeconfig: node files, host probe and logs are not observable")
    return env


def _kubeconfig_path(profile: Profile, override: Path | None) -> Path:
    if override is not None:
        return override
    configured = profile.cluster.get("kubeconfig") or os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
    return Path(configured or "~/.kube/config").expanduser()


def environment_overrides(profile: Profile, environ: Mapping[str, str]) -> tuple[dict[str, Any], str | None]:
    """Helm values and kube context that CI sets through the environment (pure).

    ``DRALAB_IMAGE=repo:tag`` installs that image (e.g. one loaded into kind, never pulled);
    ``DRALAB_KIND_CLUSTER=name`` selects the context ``kind-<name>``.
    """
    values: dict[str, Any] = {}
    image = environ.get("DRALAB_IMAGE")
    if image:
        repo, sep, tag = image.rpartition(":")
        if not sep or "/" in tag:
            repo, tag = image, "latest"
        values["image"] = {"repository": repo, "tag": tag, "pullPolicy": "IfNotPresent"}
    context = profile.cluster.get("context")
    kind = environ.get("DRALAB_KIND_CLUSTER")
    if kind and context and str(context).startswith("kind-"):
        context = f"kind-{kind}"
    return values, (str(context) if context else None)


def helm_command(
    profile: Profile, kubeconfig: Path, values_file: Path, root: Path, context: str | None = None
) -> list[str]:
    """The ``helm upgrade --install`` command line of a profile's deploy section (pure)."""
    deploy = profile.deploy
    chart = Path(str(deploy["chart"]))
    if not chart.is_absolute():
        chart = root / chart
    cmd = [
        "helm", "upgrade", "--install", str(deploy.get("release", "dralab")), str(chart),
        "--namespace", str(deploy.get("namespace", "dralab-system")), "--create-namespace",
        "--kubeconfig", str(kubeconfig), "--values", str(values_file),
        "--wait", "--timeout", str(deploy.get("timeout", "5m")),
    ]  # fmt: skip
    context = context or profile.cluster.get("context")
    if context:
        cmd += ["--kube-context", str(context)]
    return cmd


def helm_path() -> str | None:
    """helm on PATH, else the one dralab built from its Go module (``make tools``), else None."""
    from dralab_kit.provision.tools import find_helm

    found = find_helm()
    return str(found) if found else None


def deploy_values(
    profile: Profile, environ: Mapping[str, str], cluster_values: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A release's values: the profile's, then CI's environment overrides, then the cluster's own (pure)."""
    from dralab_kit.provision.chart import deep_merge

    extra, _ = environment_overrides(profile, environ)
    return deep_merge(deep_merge(profile.deploy.get("values") or {}, extra), cluster_values or {})


def deploy_helm(
    profile: Profile, kubeconfig: Path, progress: Progress, force: bool = False,
    cluster_values: dict[str, Any] | None = None,
) -> None:
    """Install the chart with the profile's values (and ``cluster_values``, what depends on where it
    runs) unless the release is already there; on a cluster the harness owns (``cluster_values``
    given), a release whose values differ (a new image, say) is upgraded instead."""
    helm = helm_path()
    if helm is None:
        raise UserError(
            f"profile {profile.name} deploys dralab with Helm, but helm is not on PATH: install Helm 3, "
            "or deploy dralab yourself and use a profile with deploy.method: none"
        )
    deploy = profile.deploy
    release, namespace = str(deploy.get("release", "dralab")), str(deploy.get("namespace", "dralab-system"))
    _, context = environment_overrides(profile, os.environ)
    status = [helm, "status", release, "--namespace", namespace, "--kubeconfig", str(kubeconfig)]
    if context:
        status += ["--kube-context", context]
    wanted = deploy_values(profile, os.environ, cluster_values)
    if not force and subprocess.run(status, capture_output=True, check=False).returncode == 0:
        deployed = _deployed_values(status) if cluster_values is not None else wanted
        if deployed == wanted:
            progress(f"dralab release {release!r} already installed in {namespace}")
            return
        progress(f"dralab release {release!r} has other values: upgrading it")
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as fh:
        yaml.safe_dump(wanted, fh)
        values = Path(fh.name)
    try:
        progress(f"installing dralab with Helm into {namespace}")
        cmd = helm_command(profile, kubeconfig, values, repo_root(), context)
        result = subprocess.run([helm, *cmd[1:]], capture_output=True, text=True, check=False)
    finally:
        values.unlink(missing_ok=True)
    if result.returncode != 0:
        raise UserError(f"helm install of dralab failed: {result.stderr.strip() or result.stdout.strip()}")


def _deployed_values(status: list[str]) -> dict[str, Any] | None:
    """The user-supplied values of the release ``status`` (a ``helm status`` command line) names."""
    argv = [status[0], "get", "values", *status[2:], "-o", "json"]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    try:
        return json.loads(proc.stdout) if proc.returncode == 0 else None
    except ValueError:
        return None


def open_environment(
    profile: Profile,
    inventory: str | None = None,
    kubeconfig: str | Path | None = None,
    progress: Progress | None = None,
) -> Environment:
    """Connect to (or bring up) the profile's cluster and make sure dralab is deployed there."""
    say = progress or (lambda _msg: None)
    override = Path(kubeconfig).expanduser() if kubeconfig else None
    if profile.source == "memory":
        return _memory(profile)
    if profile.source == "local":
        return _local(profile, inventory, override, say)
    started = time.monotonic()
    path = _kubeconfig_path(profile, override)
    _, context = environment_overrides(profile, os.environ)
    client = KubeCluster.from_kubeconfig(path, context=context)
    if profile.deploy_method == "helm":
        deploy_helm(profile, path, say)
    return Environment(
        profile=profile,
        client=client,
        capabilities=frozenset(profile.capabilities),
        cluster_name=context or path.name,
        kubeconfig=path,
        context=context,
        bring_up_seconds=time.monotonic() - started,
    )


def describe(env: Environment) -> dict[str, Any]:
    """What a report says about where the lab ran."""
    return {
        "profile": env.profile.name,
        "cluster": env.cluster_name,
        "kubeconfig": str(env.kubeconfig) if env.kubeconfig else None,
        "capabilities": sorted(env.capabilities),
        "bringUpSeconds": round(env.bring_up_seconds, 3),
        "notes": list(env.notes),
    }
