"""Profile ``kind``: a kind cluster from dralab's generated config, cert-manager, the chart (fake backend)."""

from __future__ import annotations

import shlex

import pulumi
import pulumi_command as command
import pulumi_kubernetes as k8s

from dralab_infra import k8s as objects
from dralab_infra.component import Profile
from dralab_infra.settings import Settings
from dralab_kit.provision.kind import kind_config, render


class KindProfile(Profile):
    """A kind cluster from dralab's generated config, cert-manager, the RuntimeClass and the chart."""

    TYPE = "dralab:profiles:Kind"

    def __init__(self, name: str, settings: Settings, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(name, settings, opts)
        config_text = render(kind_config(workers=settings.workers, kubernetes_version=settings.kubernetes_version))
        cluster_name = shlex.quote(settings.cluster_name)
        # `kind create cluster --config -` reads the config from stdin; the triggers recreate the
        # cluster when the config changes (kind cannot reconfigure a running cluster).
        cluster = command.local.Command(
            "kind-cluster",
            create=f"kind create cluster --name {cluster_name} --config - --wait 180s",
            delete=f"kind delete cluster --name {cluster_name}",
            stdin=config_text,
            triggers=[config_text],
            opts=self.child(),
        )
        kubeconfig = command.local.Command(
            "kind-kubeconfig",
            create=f"kind get kubeconfig --name {cluster_name}",
            triggers=[config_text],
            opts=self.child(depends_on=[cluster], additional_secret_outputs=["stdout"]),
        )
        deps: list[pulumi.Resource] = [cluster]
        if settings.load_image:
            deps.append(
                command.local.Command(
                    "kind-load-image",
                    create=f"kind load docker-image {shlex.quote(settings.image)} --name {cluster_name}",
                    triggers=[settings.image, config_text],
                    opts=self.child(depends_on=[cluster]),
                )
            )
        provider = k8s.Provider("kind", kubeconfig=kubeconfig.stdout, opts=self.child(depends_on=[cluster]))
        namespaces = objects.namespaces(self, settings, provider)
        runtime = objects.ascend_runtime_class(self, provider)
        manager = objects.cert_manager(self, settings, provider, depends_on=[])
        release = objects.dralab_release(self, settings, provider, depends_on=[manager, *namespaces.values(), *deps])
        self.finish(
            {
                "kubeconfig": pulumi.Output.secret(kubeconfig.stdout),
                "clusterName": settings.cluster_name,
                "kindConfig": config_text,
                "runtimeClass": runtime.metadata.apply(lambda m: m["name"]),
                "release": release.name,
            }
        )
