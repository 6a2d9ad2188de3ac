"""The dralab.node roles from a playbook of one's own, outside playbooks/, run for real on localhost."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from .conftest import Host, run_site

pytestmark = pytest.mark.slow

OWN_PLAYBOOK = """\
---
- name: A user's own play that uses dralab's roles
  hosts: all
  gather_facts: false
  tasks:
    - name: CDI in containerd
      ansible.builtin.include_role:
        name: dralab.node.containerd_cdi
    - name: The ascend runtime handler
      ansible.builtin.include_role:
        name: dralab.node.ascend_runtime
    - name: The feature gates
      ansible.builtin.include_role:
        name: dralab.node.kubelet_feature_gates
    - name: NPU device-share
      ansible.builtin.include_role:
        name: dralab.node.npu_device_share
"""


def _own_project(tmp_path: Path) -> Path:
    project = tmp_path / "elsewhere"
    project.mkdir()
    (project / "site.yml").write_text(OWN_PLAYBOOK)
    return project


def test_roles_module_and_filters_work_from_a_playbook_outside_playbooks(host: Host, tmp_path: Path) -> None:
    run = run_site(host, tmp_path, project=_own_project(tmp_path))
    assert run.rc == 0, run.stdout[-3000:]
    text = host.containerd_config.read_text()  # the module, by FQCN
    assert "enable_cdi = true" in text and "runtimes.ascend]" in text
    kubelet = yaml.safe_load(host.kubelet_config.read_text())  # the gates_missing filter
    assert kubelet["featureGates"] == {"ImageVolume": True, "DRAConsumableCapacity": True}
    assert host.npu()["npus"]["4"]["chips"]["0"] is True  # the npu_ids / chips_to_enable filters
    assert host.marker.is_file()


def test_a_wrongly_typed_role_variable_is_refused_by_name(host: Host, tmp_path: Path) -> None:
    before = host.snapshot()
    wrong = {"kubelet_feature_gates_kubelet": ["DRAConsumableCapacity"]}
    run = run_site(host, tmp_path, project=_own_project(tmp_path), **wrong)
    assert run.rc != 0
    assert "kubelet_feature_gates_kubelet" in run.stdout and "dict" in run.stdout, run.stdout[-3000:]
    assert host.kubelet_config.read_bytes() == before["var/lib/kubelet/config.yaml"]
