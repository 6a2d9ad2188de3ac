"""Profile ``baremetal``: hosts prepared by the playbooks, kubeadm init/join over SSH, then dralab.

Order: Ansible (containerd CDI, the ascend handler, NPU device-share) -> ``kubeadm init`` on the
control plane with dralab's v1beta4 config -> CNI -> ``kubeadm join`` on every worker ->
cert-manager, the RuntimeClass and the chart with the ascend or nvidia backend.
"""

from __future__ import annotations

import json
import shlex
import sys

import pulumi
import pulumi_command as command
import pulumi_kubernetes as k8s

from dralab.provision.ansible import inventory, playbooks_digest
from dralab.provision.kubeadm import kubeadm_config, render
from dralab_infra import k8s as objects
from dralab_infra.settings import Host, Settings

KUBEADM_CONFIG = "/etc/dralab/kubeadm.yaml"
ADMIN_CONF = "/etc/kubernetes/admin.conf"


def _connection(host: Host, private_key: pulumi.Input[str]) -> command.remote.ConnectionArgs:
    return command.remote.ConnectionArgs(host=host.address, user=host.user, port=host.port, private_key=private_key)


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


def init_script() -> str:
    """Writes the config from stdin and runs kubeadm init once (a later run leaves a cluster alone)."""
    return (
        f"sudo mkdir -p {KUBEADM_CONFIG.rsplit('/', 1)[0]} && sudo tee {KUBEADM_CONFIG} >/dev/null && "
        f"if [ ! -f {ADMIN_CONF} ]; then sudo kubeadm init --config {KUBEADM_CONFIG}; fi"
    )


def provision(settings: Settings, private_key: pulumi.Output[str]) -> dict[str, pulumi.Output | str]:
    inv = inventory([h.__dict__ for h in settings.hosts], settings.backend)
    prepare = command.local.Command(
        "prepare-hosts",
        create=f"{shlex.quote(sys.executable)} -m dralab.provision.ansible",
        environment={
            "DRALAB_ANSIBLE_INVENTORY": json.dumps(inv),
            "DRALAB_ANSIBLE_EXTRAVARS": json.dumps({"dralab_backend": settings.backend}),
            "DRALAB_SSH_PRIVATE_KEY": private_key,
        },
        triggers=[json.dumps(inv, sort_keys=True), playbooks_digest()],
    )
    plane = settings.control_plane
    config_text = kubeadm_text(settings)
    init = command.remote.Command(
        "kubeadm-init",
        connection=_connection(plane, private_key),
        create=init_script(),
        stdin=config_text,
        delete="sudo kubeadm reset -f",
        triggers=[config_text],
        opts=pulumi.ResourceOptions(depends_on=[prepare]),
    )
    after_init: list[pulumi.Resource] = [init]
    if settings.cni:
        after_init.append(
            command.remote.Command(
                "cni",
                connection=_connection(plane, private_key),
                create=f"sudo kubectl --kubeconfig {ADMIN_CONF} apply -f {shlex.quote(settings.cni)}",
                triggers=[settings.cni, config_text],
                opts=pulumi.ResourceOptions(depends_on=[init]),
            )
        )
    joins: list[pulumi.Resource] = []
    if settings.workers_hosts:
        join_cmd = command.remote.Command(
            "join-command",
            connection=_connection(plane, private_key),
            create="sudo kubeadm token create --print-join-command --ttl 2h",
            triggers=[config_text],
            opts=pulumi.ResourceOptions(depends_on=[init], additional_secret_outputs=["stdout"]),
        )
        for worker in settings.workers_hosts:
            joins.append(
                command.remote.Command(
                    f"kubeadm-join-{worker.name}",
                    connection=_connection(worker, private_key),
                    create=join_cmd.stdout.apply(
                        lambda line: f"if [ ! -f /etc/kubernetes/kubelet.conf ]; then sudo {line.strip()}; fi"
                    ),
                    delete="sudo kubeadm reset -f",
                    opts=pulumi.ResourceOptions(depends_on=[join_cmd, prepare]),
                )
            )
    admin = command.remote.Command(
        "admin-kubeconfig",
        connection=_connection(plane, private_key),
        create=f"sudo cat {ADMIN_CONF}",
        triggers=[config_text],
        opts=pulumi.ResourceOptions(depends_on=after_init, additional_secret_outputs=["stdout"]),
    )
    provider = k8s.Provider("baremetal", kubeconfig=admin.stdout, opts=pulumi.ResourceOptions(depends_on=[admin]))
    namespaces = objects.namespaces(settings, provider)
    runtime = objects.ascend_runtime_class(provider)
    manager = objects.cert_manager(settings, provider, depends_on=[*after_init, *joins])
    release = objects.dralab_release(settings, provider, depends_on=[manager, *namespaces.values()])
    return {
        "kubeconfig": pulumi.Output.secret(admin.stdout),
        "controlPlane": plane.address,
        "nodes": [h.name for h in settings.hosts],
        "runtimeClass": runtime.metadata.apply(lambda m: m["name"]),
        "release": release.name,
    }
