"""The real node's configuration: dralab writes the machine-specific base, the project's Ansible
roles add what they own, and containerd and the kubelet then load the result.

Base files (what this machine needs, not what dralab's roles manage):

- containerd (config version 3): private root/state/socket, overlayfs, cgroupfs runc,
  ``restrict_oom_score_adj`` (runc otherwise fails writing ``oom_score_adj`` without
  CAP_SYS_RESOURCE), the locally imported pause image, CNI from the node's folder, the streaming
  server on 127.0.0.1, NRI off (it would open a socket under /var/run).
- kubelet: cgroup v1 tolerated (``failCgroupV1: false``), cgroupfs, swap tolerated, relaxed
  eviction, no image GC, no iptables chains, serving on 127.0.0.1 only with x509 client auth.
- CNI: one bridge network with no gateway and no masquerade, so nothing on the host routes to
  pods and no iptables rule is written.

Then ``playbooks/site.yml`` (tags ``containerd,kubelet``: roles ``dralab.node.containerd_cdi``,
``dralab.node.ascend_runtime``, ``dralab.node.kubelet_feature_gates``) runs through ansible-runner against localhost and
edits these files in place: ``enable_cdi`` + ``cdi_spec_dirs``, the ``ascend`` runtime handler,
``featureGates: {DRAConsumableCapacity: true}``.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from dralab.errors import UserError
from dralab.util import atomic_write
from dralab.versions import KUBERNETES_VERSION
from dralab_kit.cluster.node import podnet
from dralab_kit.cluster.node.images import PAUSE_IMAGE
from dralab_kit.cluster.node.paths import NodePaths

POD_SUBNET = "10.213.0.0/16"
CNI_NETWORK = "dralab"


def _toml_str(value: str) -> str:
    return json.dumps(value)


def containerd_base(paths: NodePaths, runc: Path, cni_bin: Path, metrics_port: int) -> str:
    """containerd's config (version 3) before the roles add CDI and the ``ascend`` handler."""
    runtime = "plugins.'io.containerd.cri.v1.runtime'"
    return "\n".join(
        [
            "version = 3",
            f"root = {_toml_str(str(paths.containerd_root))}",
            f"state = {_toml_str(str(paths.containerd_state))}",
            "disabled_plugins = ['io.containerd.nri.v1.nri', 'io.containerd.internal.v1.tracing',"
            " 'io.containerd.snapshotter.v1.blockfile']",
            "",
            "[grpc]",
            f"  address = {_toml_str(str(paths.containerd_socket))}",
            "",
            "[ttrpc]",
            "  address = ''",
            "",
            "[metrics]",
            f"  address = '127.0.0.1:{metrics_port}'",
            "",
            f"[{runtime}]",
            "  restrict_oom_score_adj = true",
            "  netns_mounts_under_state_dir = true",
            "  enable_selinux = false",
            "",
            f"[{runtime}.containerd]",
            "  default_runtime_name = 'runc'",
            "",
            f"[{runtime}.containerd.runtimes.runc]",
            "  runtime_type = 'io.containerd.runc.v2'",
            "",
            f"[{runtime}.containerd.runtimes.runc.options]",
            f"  BinaryName = {_toml_str(str(runc))}",
            "  SystemdCgroup = false",
            "",
            f"[{runtime}.cni]",
            f"  bin_dirs = [{_toml_str(str(cni_bin))}]",
            f"  conf_dir = {_toml_str(str(paths.cni_conf_dir))}",
            "  max_conf_num = 1",
            "",
            "[plugins.'io.containerd.cri.v1.images']",
            "  snapshotter = 'overlayfs'",
            "",
            "[plugins.'io.containerd.cri.v1.images'.pinned_images]",
            f"  sandbox = {_toml_str(PAUSE_IMAGE)}",
            "",
            "[plugins.'io.containerd.grpc.v1.cri']",
            "  disable_tcp_service = true",
            "  stream_server_address = '127.0.0.1'",
            "  stream_server_port = '0'",
            "",
        ]
    )


def kubelet_base(paths: NodePaths, ports: dict[str, int], ca_file: Path) -> dict[str, Any]:
    """The KubeletConfiguration before the role sets its feature gates."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": "127.0.0.1",
        "port": ports["port"],
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": ports["healthz"],
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": False},
            "x509": {"clientCAFile": str(ca_file)},
        },
        "authorization": {"mode": "AlwaysAllow"},  # only CA-signed clients get past x509 authentication
        "tlsCertFile": str(paths.pki_dir / "kubelet-serving.crt"),
        "tlsPrivateKeyFile": str(paths.pki_dir / "kubelet-serving.key"),
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": paths.cgroup_root,
        "cgroupsPerQOS": True,
        "failCgroupV1": False,
        "failSwapOn": False,
        "containerRuntimeEndpoint": f"unix://{paths.containerd_socket}",
        "podLogsDir": str(paths.pod_logs),
        "resolvConf": "",
        "makeIPTablesUtilChains": False,
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {
            "memory.available": "1Mi",
            "nodefs.available": "1%",
            "nodefs.inodesFree": "1%",
            "imagefs.available": "1%",
            "imagefs.inodesFree": "1%",
        },
        "evictionPressureTransitionPeriod": "5s",
        "serializeImagePulls": False,
        "localStorageCapacityIsolation": False,
        "maxPods": 110,
        "nodeStatusReportFrequency": "1m",
        "syncFrequency": "10s",
        "fileCheckFrequency": "20s",
        "shutdownGracePeriod": "0s",
        "featureGates": {},
    }


def cni_conflist(paths: NodePaths, pod_network: bool = False) -> dict[str, Any]:
    """A bridge without an address (no gateway, no masquerade: the host has no route to pods), or
    with a pod network (``podnet``) the bridge as the pods' gateway."""
    if pod_network:
        return {
            "cniVersion": "1.0.0",
            "name": CNI_NETWORK,
            "plugins": [podnet.cni_bridge_plugin(paths.bridge, paths.cni_data_dir)],
        }
    return {
        "cniVersion": "1.0.0",
        "name": CNI_NETWORK,
        "plugins": [
            {
                "type": "bridge",
                "bridge": paths.bridge,
                "isGateway": False,
                "ipMasq": False,
                "hairpinMode": False,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": POD_SUBNET}]],
                    "dataDir": str(paths.cni_data_dir),
                },
            }
        ],
    }


def write_base(
    paths: NodePaths, runc: Path, cni_bin: Path, ports: dict[str, int], ca_file: Path, pod_network: bool = False
) -> None:
    """Write the base files (overwritten: the roles run again right after)."""
    for folder in (paths.config_dir, paths.manifests_dir, paths.cni_conf_dir, paths.cni_data_dir, paths.pod_logs):
        folder.mkdir(parents=True, exist_ok=True)
    atomic_write(paths.containerd_config, containerd_base(paths, runc, cni_bin, ports["containerd"]))
    atomic_write(paths.kubelet_config, yaml.safe_dump(kubelet_base(paths, ports, ca_file), sort_keys=False))
    conflist = json.dumps(cni_conflist(paths, pod_network), indent=2) + "\n"
    atomic_write(paths.cni_conf_dir / "10-dralab.conflist", conflist)


def role_vars(paths: NodePaths, cdi_dir: Path, runc: Path, version: str = KUBERNETES_VERSION) -> dict[str, Any]:
    """Extra variables that point the roles at the node's private files (never /etc or /var/lib).

    The kubelet's gates are the ones ``version`` needs (none from 1.36 on: consumable capacity is
    on), chosen by the role from its table generated from GATE_STAGES (dralab_kit.provision.gate_table).
    """
    return {
        "dralab_become": False,
        "dralab_backend": "ascend",
        "containerd_cdi_config_path": str(paths.containerd_config),
        "containerd_cdi_config_version": 3,
        "containerd_cdi_spec_dirs": [str(cdi_dir)],
        "containerd_cdi_manage_service": False,
        # The `ascend` handler is plain runc here: device nodes come from CDI (no Ascend Docker Runtime).
        "ascend_runtime_binary": str(runc),
        "ascend_runtime_systemd_cgroup": False,
        "kubelet_feature_gates_kubernetes_version": version,
        "kubelet_feature_gates_config_path": str(paths.kubelet_config),
        "kubelet_feature_gates_manage_service": False,
        "kubelet_feature_gates_manifests_dir": str(paths.manifests_dir),
    }


def run_roles(paths: NodePaths, extravars: dict[str, Any]) -> dict[str, Any]:
    """ansible-runner over playbooks/site.yml (tags containerd,kubelet) on localhost; returns its stats.

    UserError with the tail of Ansible's output when the run fails.
    """
    try:
        import ansible_runner
    except ImportError:
        raise UserError("the node profile runs dralab's Ansible roles: pip install 'dralab-kit[provision]'") from None
    from dralab_kit.provision.ansible import collections_dir, playbooks_dir

    with tempfile.TemporaryDirectory(prefix="dralab-roles-") as tmp:
        result = ansible_runner.run(
            private_data_dir=tmp,
            project_dir=str(playbooks_dir()),
            playbook="site.yml",
            inventory=f"localhost ansible_connection=local ansible_python_interpreter={sys.executable}",
            extravars=extravars,
            envvars={
                "ANSIBLE_NOCOLOR": "1",
                "ANSIBLE_PIPELINING": "1",
                "ANSIBLE_COLLECTIONS_PATH": str(collections_dir()),
                "ANSIBLE_LOCAL_TEMP": str(Path(tmp) / "a-tmp"),
                "ANSIBLE_REMOTE_TEMP": str(Path(tmp) / "a-tmp"),
                "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "/usr/bin:/bin")]),
            },
            cmdline="--tags containerd,kubelet",
            quiet=True,
            timeout=300,
        )
        out = result.stdout.read() if result.stdout else ""
        if result.rc != 0:
            tail = "\n".join(out.strip().splitlines()[-25:])
            raise UserError(f"the node's Ansible roles failed (rc {result.rc}, {result.status}):\n{tail}")
        stats = result.stats or {}
    summary = {k: sum((stats.get(k) or {}).values()) for k in ("ok", "changed", "failures", "skipped")}
    atomic_write(paths.roles_stamp, json.dumps({"stats": summary, "extravars": extravars}, indent=2) + "\n")
    return summary


def _cache_key(paths: NodePaths, extravars: dict[str, Any]) -> str:
    from dralab_kit.provision.ansible import playbooks_digest

    digest = hashlib.sha256()
    for part in (
        paths.containerd_config.read_bytes(),
        paths.kubelet_config.read_bytes(),
        json.dumps(extravars, sort_keys=True).encode(),
        playbooks_digest().encode(),
    ):
        digest.update(hashlib.sha256(part).digest())
    return digest.hexdigest()[:24]


def configure(paths: NodePaths, extravars: dict[str, Any]) -> dict[str, Any]:
    """Run the roles over the base files, or reuse their output for the same inputs.

    The roles' output depends only on the base files, the variables and playbooks/; it is kept
    in ``$DRALAB_CACHE/node-config/<hash>/`` because an Ansible run costs 10-70 s on two cores.
    Returns ``{"cached": bool, "stats": ...}``.
    """
    from dralab_kit.gobuild import cache_root

    cache = cache_root() / "node-config" / _cache_key(paths, extravars)
    files = {
        "containerd.toml": paths.containerd_config,
        "kubelet.yaml": paths.kubelet_config,
        "roles.json": paths.roles_stamp,
    }
    if all((cache / name).is_file() for name in files):
        for name, target in files.items():
            atomic_write(target, (cache / name).read_bytes())
        return {"cached": True, "stats": json.loads(paths.roles_stamp.read_text())["stats"]}
    stats = run_roles(paths, extravars)
    cache.mkdir(parents=True, exist_ok=True)
    for name, source in files.items():
        atomic_write(cache / name, source.read_bytes())
    return {"cached": False, "stats": stats}
