"""Run dralab's playbooks for real against localhost, inside a temporary tree.

Every path the roles touch is redirected under ``tmp_path`` (containerd and kubelet configs,
static pod manifests, the Ascend driver's version file, CDI dirs) and ``npu-smi`` is the
stateful fake in ``fakes/``: nothing of this machine's /etc or services is touched.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[3]
PLAYBOOKS = REPO / "playbooks"
COLLECTIONS = PLAYBOOKS / "collections"
FAKES = Path(__file__).resolve().parent / "fakes"

CONTAINERD_V2 = """\
version = 2
root = "/var/lib/containerd"

# registry mirrors and the sandbox image are site settings the roles must keep
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.10"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = true
"""

KUBELET_CONFIG = """\
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: systemd
clusterDNS: [10.96.0.10]
featureGates:
  ImageVolume: true
"""


def static_pod(component: str, extra: list[str]) -> str:
    command = "\n".join(f"        - {arg}" for arg in [component, "--v=2", *extra])
    return f"""\
apiVersion: v1
kind: Pod
metadata:
  name: {component}
  namespace: kube-system
spec:
  hostNetwork: true
  containers:
    - name: {component}
      image: registry.k8s.io/{component}:v1.35.4
      command:
{command}
"""


@dataclass
class Host:
    """One temporary host tree plus the variables that point the roles at it."""

    root: Path
    state: Path

    @property
    def containerd_config(self) -> Path:
        return self.root / "etc/containerd/config.toml"

    @property
    def kubelet_config(self) -> Path:
        return self.root / "var/lib/kubelet/config.yaml"

    @property
    def manifests(self) -> Path:
        return self.root / "etc/kubernetes/manifests"

    @property
    def marker(self) -> Path:
        return self.root / "etc/dralab/npu-device-share-recover.done"

    def npu(self) -> dict[str, Any]:
        return json.loads(self.state.read_text())

    def set_calls(self) -> list[list[str]]:
        return [c for c in self.npu().get("calls", []) if c[:1] == ["set"]]

    def extravars(self, **overrides: Any) -> dict[str, Any]:
        base = {
            "dralab_become": False,
            "dralab_backend": "ascend",
            "containerd_cdi_config_path": str(self.containerd_config),
            "containerd_cdi_manage_service": False,
            "containerd_cdi_spec_dirs": [str(self.root / "etc/cdi"), str(self.root / "var/run/cdi")],
            "kubelet_feature_gates_config_path": str(self.kubelet_config),
            "kubelet_feature_gates_manage_service": False,
            "kubelet_feature_gates_manifests_dir": str(self.manifests),
            "ascend_runtime_binary": str(self.root / "usr/local/Ascend/ascend-docker-runtime"),
            "npu_device_share_driver_version_file": str(self.root / "usr/local/Ascend/driver/version.info"),
            "npu_device_share_arch": "aarch64",
            "npu_device_share_persist_marker": str(self.marker),
        }
        base.update(overrides)
        return base

    def snapshot(self) -> dict[str, bytes]:
        return {str(p.relative_to(self.root)): p.read_bytes() for p in sorted(self.root.rglob("*")) if p.is_file()}


def make_host(root: Path) -> Host:
    """A host like Lab 20's before preparation: NPU 4 with device-share off, NPU 5 already on."""
    (root / "etc/containerd").mkdir(parents=True)
    (root / "etc/containerd/config.toml").write_text(CONTAINERD_V2)
    (root / "var/lib/kubelet").mkdir(parents=True)
    (root / "var/lib/kubelet/config.yaml").write_text(KUBELET_CONFIG)
    manifests = root / "etc/kubernetes/manifests"
    manifests.mkdir(parents=True)
    (manifests / "kube-apiserver.yaml").write_text(static_pod("kube-apiserver", ["--feature-gates=ImageVolume=true"]))
    (manifests / "kube-scheduler.yaml").write_text(static_pod("kube-scheduler", []))
    runtime = root / "usr/local/Ascend/ascend-docker-runtime"
    runtime.parent.mkdir(parents=True)
    runtime.write_text("#!/bin/sh\n")
    runtime.chmod(0o755)
    (root / "usr/local/Ascend/driver").mkdir(parents=True)
    (root / "usr/local/Ascend/driver/version.info").write_text("Version=25.5.1\nascendhal_version=7.35.23\n")
    state = root.parent / f"{root.name}-npu-smi.json"
    state.write_text(json.dumps({"npus": {"4": {"chips": {"0": False}}, "5": {"chips": {"0": True}}}}))
    return Host(root=root, state=state)


@dataclass
class Run:
    rc: int
    status: str
    changed: int
    failures: int
    stdout: str


def run_site(
    host: Host, tmp: Path, *, check: bool = False, tags: str = "", project: Path = PLAYBOOKS, **extravars: Any
) -> Run:
    """ansible-runner over ``project``/site.yml against localhost (connection local); ``tags`` limits the roles.

    The dralab.node collection comes from ANSIBLE_COLLECTIONS_PATH, as for any user's playbook.
    """
    import ansible_runner

    private = tmp / f"runner-{len(list(tmp.glob('runner-*')))}"
    private.mkdir(parents=True)
    env_path = os.pathsep.join([str(FAKES), str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    cmdline = ("--check --diff" if check else "--diff") + (f" --tags {tags}" if tags else "")
    result = ansible_runner.run(
        private_data_dir=str(private),
        project_dir=str(project),
        playbook="site.yml",
        inventory=f"localhost ansible_connection=local ansible_python_interpreter={sys.executable}",
        extravars=host.extravars(**extravars),
        envvars={
            "PATH": env_path,
            "NPU_SMI_FAKE_STATE": str(host.state),
            "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS),
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_PIPELINING": "1",
            "ANSIBLE_LOCAL_TEMP": str(tmp / "ansible-tmp"),
            "ANSIBLE_REMOTE_TEMP": str(tmp / "ansible-tmp"),
        },
        cmdline=cmdline,
        quiet=True,
        timeout=300,
    )
    stdout = result.stdout.read() if result.stdout else ""
    stats = result.stats or {}
    return Run(
        rc=result.rc,
        status=result.status,
        changed=sum((stats.get("changed") or {}).values()),
        failures=sum((stats.get("failures") or {}).values()),
        stdout=stdout,
    )


@pytest.fixture
def host(tmp_path: Path) -> Host:
    return make_host(tmp_path / "host")


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Host, Run, Run, Path]:
    """One host prepared by site.yml, then the same playbook again (the idempotence run)."""
    tmp = tmp_path_factory.mktemp("site")
    host = make_host(tmp / "host")
    first = run_site(host, tmp)
    second = run_site(host, tmp)
    return host, first, second, tmp


def copy_host(host: Host, dest: Path) -> Host:
    shutil.copytree(host.root, dest / "host")
    state = dest / "host-npu-smi.json"
    shutil.copy(host.state, state)
    return Host(root=dest / "host", state=state)
