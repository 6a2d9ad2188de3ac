"""Profile ``baremetal``: hosts prepared by the playbooks, kubeadm init/join over SSH, then dralab.

Order: Ansible (containerd CDI, the ascend handler, NPU device-share) -> dralab's v1beta4 kubeadm
config copied to the control plane (``CopyToRemote``) -> ``kubeadm init`` there -> CNI ->
``kubeadm join`` on every worker -> cert-manager, the RuntimeClass and the chart with the ascend or
nvidia backend. Everything sits under one ComponentResource (``dralab:profiles:Baremetal``).
"""

from __future__ import annotations

import hashlib
import json
import shlex
import sys

import pulumi
import pulumi_command as command
import pulumi_kubernetes as k8s

from dralab_infra import k8s as objects
from dralab_infra.component import Profile
from dralab_infra.settings import Host, Settings
from dralab_kit.provision.ansible import InventoryHost, inventory, playbooks_digest
from dralab_kit.provision.kubeadm import kubeadm_config, render

KUBEADM_CONFIG = "/etc/dralab/kubeadm.yaml"
# Where CopyToRemote puts the config: SFTP runs as the SSH user, so a path relative to its home.
UPLOADED_CONFIG = ".dralab/kubeadm.yaml"
ADMIN_CONF = "/etc/kubernetes/admin.conf"


def _connection(host: Host, private_key: pulumi.Input[str]) -> command.remote.ConnectionArgs:
    """SSH to ``host``, checking its key when one is configured (settings refuse a missing one unless
    the user opted out with insecureSkipHostKeyCheck)."""
    return command.remote.ConnectionArgs(
        host=host.address, user=host.user, port=host.port, private_key=private_key, host_key=host.host_key
    )


def known_hosts(settings: Settings) -> str:
    """known_hosts lines for Ansible: ``[address]:port key`` (plain address for port 22)."""
    lines = []
    for h in settings.hosts:
        if h.host_key:
            where = h.address if h.port == 22 else f"[{h.address}]:{h.port}"
            lines.append(f"{where} {h.host_key}")
    return "\n".join(lines)


def cluster_options(settings: Settings, **kwargs: object) -> pulumi.ResourceOptions:
    """Options of the resources that are the cluster (kubeadm init and join).

    Protected and retained by default: a change of Kubernetes version or pod subnet must never make
    ``pulumi up`` replace them, since deleting them resets a running cluster. ``allowClusterReplacement``
    lifts both (and only then does a delete run ``kubeadm reset``).
    """
    keep = not settings.allow_cluster_replacement
    return pulumi.ResourceOptions(protect=keep, retain_on_delete=keep, **kwargs)  # type: ignore[arg-type]


def kubeadm_text(settings: Settings) -> str:
    plane = settings.control_plane
    return render(
        kubeadm_config(
            kubernetes_version=settings.kubernetes_version,
            advertise_address=plane.address,
            node_name=plane.name,
            pod_subnet=settings.pod_subnet,
            schedule_on_control_plane=not settings.workers_hosts,
        )
    )


def config_digest(text: str) -> str:
    """sha256 of the kubeadm config: an input of kubeadm-init that changes when the config does."""
    return hashlib.sha256(text.encode()).hexdigest()


def init_script() -> str:
    """Installs the uploaded config and runs kubeadm init once (a later run leaves a cluster alone)."""
    return (
        f"sudo install -D -m 0600 {UPLOADED_CONFIG} {KUBEADM_CONFIG} && "
        f"if [ ! -f {ADMIN_CONF} ]; then sudo kubeadm init --config {KUBEADM_CONFIG}; fi"
    )


class BaremetalProfile(Profile):
    """Hosts prepared by Ansible, a kubeadm cluster over SSH, cert-manager and the chart."""

    TYPE = "dralab:profiles:Baremetal"

    def __init__(
        self,
        name: str,
        settings: Settings,
        private_key: pulumi.Output[str],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(name, settings, opts)
        # Host keys are checked unless the user opted out; the opt-out travels in the inventory.
        inv = inventory(
            [InventoryHost(name=h.name, address=h.address, user=h.user, port=h.port) for h in settings.hosts],
            settings.backend,
            check_host_keys=not settings.insecure_skip_host_key_check,
        )
        prepare = command.local.Command(
            "prepare-hosts",
            create=f"{shlex.quote(sys.executable)} -m dralab_kit.provision.ansible",
            environment={
                "DRALAB_ANSIBLE_INVENTORY": json.dumps(inv),
                # the gates the role sets follow the stack's version (the hosts may have no kubelet yet)
                "DRALAB_ANSIBLE_EXTRAVARS": json.dumps({
                    "dralab_backend": settings.backend,
                    "kubelet_feature_gates_kubernetes_version": settings.kubernetes_version,
                }),
                "DRALAB_SSH_PRIVATE_KEY": private_key,
                "DRALAB_ANSIBLE_KNOWN_HOSTS": known_hosts(settings),
            },
            triggers=[json.dumps(inv, sort_keys=True), playbooks_digest()],
            opts=self.child(),
        )
        plane = settings.control_plane
        config_text = kubeadm_text(settings)
        replaceable = settings.allow_cluster_replacement
        # The config goes up over SFTP (into the SSH user's home; kubeadm-init installs it under /etc).
        upload = command.remote.CopyToRemote(
            "kubeadm-config",
            connection=_connection(plane, private_key),
            source=pulumi.StringAsset(config_text),
            remote_path=UPLOADED_CONFIG,
            opts=self.child(depends_on=[prepare]),
        )
        # The config's digest is an input but no trigger: a change updates the file for the next init
        # and leaves the running cluster alone. Only with allowClusterReplacement does a change replace
        # the resource, whose delete then resets the host.
        init = command.remote.Command(
            "kubeadm-init",
            connection=_connection(plane, private_key),
            create=init_script(),
            environment={"DRALAB_KUBEADM_CONFIG_SHA256": config_digest(config_text)},
            delete="sudo kubeadm reset -f" if replaceable else None,
            triggers=[config_text] if replaceable else None,
            opts=cluster_options(settings, **self.child_args(depends_on=[prepare, upload])),
        )
        after_init: list[pulumi.Resource] = [init]
        if settings.cni:
            after_init.append(
                command.remote.Command(
                    "cni",
                    connection=_connection(plane, private_key),
                    create=f"sudo kubectl --kubeconfig {ADMIN_CONF} apply -f {shlex.quote(settings.cni)}",
                    triggers=[settings.cni, config_text],
                    opts=self.child(depends_on=[init]),
                )
            )
        joins: list[pulumi.Resource] = []
        if settings.workers_hosts:
            join_cmd = command.remote.Command(
                "join-command",
                connection=_connection(plane, private_key),
                create="sudo kubeadm token create --print-join-command --ttl 2h",
                triggers=[config_text],
                opts=self.child(depends_on=[init], additional_secret_outputs=["stdout"]),
            )
            for worker in settings.workers_hosts:
                joins.append(
                    command.remote.Command(
                        f"kubeadm-join-{worker.name}",
                        connection=_connection(worker, private_key),
                        create=join_cmd.stdout.apply(
                            lambda line: f"if [ ! -f /etc/kubernetes/kubelet.conf ]; then sudo {line.strip()}; fi"
                        ),
                        delete="sudo kubeadm reset -f" if replaceable else None,
                        opts=cluster_options(settings, **self.child_args(depends_on=[join_cmd, prepare])),
                    )
                )
        admin = command.remote.Command(
            "admin-kubeconfig",
            connection=_connection(plane, private_key),
            create=f"sudo cat {ADMIN_CONF}",
            triggers=[config_text],
            opts=self.child(depends_on=after_init, additional_secret_outputs=["stdout"]),
        )
        provider = k8s.Provider("baremetal", kubeconfig=admin.stdout, opts=self.child(depends_on=[admin]))
        namespaces = objects.namespaces(self, settings, provider)
        runtime = objects.ascend_runtime_class(self, provider)
        manager = objects.cert_manager(self, settings, provider, depends_on=[*after_init, *joins])
        release = objects.dralab_release(self, settings, provider, depends_on=[manager, *namespaces.values()])
        self.finish(
            {
                "kubeconfig": pulumi.Output.secret(admin.stdout),
                "controlPlane": plane.address,
                "nodes": [h.name for h in settings.hosts],
                "runtimeClass": runtime.metadata.apply(lambda m: m["name"]),
                "release": release.name,
            }
        )
