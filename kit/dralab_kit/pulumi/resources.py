"""Pulumi resources for what no provider plugin manages: the real-node cluster and its images.

The ``node`` profile (``infra/dralab_infra/node.py``) stands up dralab the way users install it on
this machine. The cluster and the images imported into its containerd have no Pulumi provider, so
they are dynamic resources whose create and delete call the same code as ``dralab cluster up`` and
the ``node-chart`` harness profile (``dralab_kit.cluster.install``); cert-manager, the RuntimeClass and
dralab's chart are ordinary pulumi-kubernetes resources on top.

Contract of each provider: ``create`` is idempotent (a running cluster is reused); ``diff`` reports
a change only when an input differs, so a second ``pulumi up`` changes nothing; ``delete`` leaves
nothing on the host, and fails loudly, naming what is left, when something stays.
The providers are pickled into the stack's state by Pulumi, so they hold no state and import what
they call inside their methods (the provider process imports ``dralab`` from the same venv).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, Resource, ResourceProvider, UpdateResult

CLUSTER_INPUTS = ("name", "kubernetes", "devices")


def changed_inputs(olds: dict[str, Any], news: dict[str, Any], keys: tuple[str, ...]) -> list[str]:
    """The inputs among ``keys`` whose value differs (pure)."""
    return [key for key in keys if olds.get(key) != news.get(key)]


class NodeClusterProvider(ResourceProvider):
    """A local cluster with a real node and a pod network (``ensure_cluster(real_node, pod_network)``)."""

    def create(self, props: dict[str, Any]) -> CreateResult:
        from dralab_kit.cluster.api import ensure_cluster

        handle = ensure_cluster(
            props["name"], devices=props.get("devices") or None, real_node=True, pod_network=True,
            kubernetes=props.get("kubernetes") or None,
        )  # fmt: skip
        outs = {**props, "kubeconfig": Path(handle.kubeconfig).read_text(), "server": handle.server}
        return CreateResult(id_=props["name"], outs=outs)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        replaces = changed_inputs(olds, news, CLUSTER_INPUTS)
        return DiffResult(changes=bool(replaces), replaces=replaces, delete_before_replace=True)

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        from dralab_kit.cluster.api import get_cluster

        handle = get_cluster(id_)
        if handle is None or not handle.state.get("ready"):
            return ReadResult(None, {})  # gone: the next `up` creates it again
        return ReadResult(id_, {**props, "kubeconfig": Path(handle.kubeconfig).read_text(), "server": handle.server})

    def delete(self, id_: str, _props: dict[str, Any]) -> None:
        from dralab_kit.cluster.node.integration import down_and_leftovers

        left = down_and_leftovers(id_)
        if left:
            raise RuntimeError(f"cluster {id_} is down but left on the host: {'; '.join(left)}")


class NodeImagesProvider(ResourceProvider):
    """dralab's image (built here from the Dockerfile) and cert-manager's, in the node's containerd."""

    def create(self, props: dict[str, Any]) -> CreateResult:
        from dralab_kit.cluster import certmanager, install
        from dralab_kit.cluster.api import get_cluster

        handle = get_cluster(props["cluster"])
        if handle is None:
            raise RuntimeError(f"cluster {props['cluster']} is not up")
        image, archive = install.local_image()
        built = certmanager.build_cert_manager(progress=False)
        names = install.import_archives(handle, [archive, *list(built.images.values())])
        return CreateResult(id_=f"{props['cluster']}-images", outs={**props, "image": image, "imported": names})

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        replaces = changed_inputs(olds, news, ("cluster", "revision"))
        return DiffResult(changes=bool(replaces), replaces=replaces)

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs=news)

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        """Nothing: the images live in the node's containerd root, which goes with the cluster."""


class NodeCluster(Resource):
    """The cluster resource: ``kubeconfig`` (secret) and ``server`` are its outputs."""

    kubeconfig: pulumi.Output[str]
    server: pulumi.Output[str]

    def __init__(
        self, name: str, cluster: str, kubernetes: str, devices: str | None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:  # fmt: skip
        secret = pulumi.ResourceOptions(additional_secret_outputs=["kubeconfig"])
        props = {"name": cluster, "kubernetes": kubernetes, "devices": devices or "", "kubeconfig": None,
                 "server": None}
        super().__init__(NodeClusterProvider(), name, props, pulumi.ResourceOptions.merge(opts, secret))


class NodeImages(Resource):
    """The images, imported once per cluster and per source ``revision`` (the image's content key)."""

    image: pulumi.Output[str]

    def __init__(
        self, name: str, cluster: pulumi.Input[str], revision: str, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        props = {"cluster": cluster, "revision": revision, "image": None, "imported": None}
        super().__init__(NodeImagesProvider(), name, props, opts)
