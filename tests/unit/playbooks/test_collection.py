"""The dralab.node collection: ansible-lint's production profile, and use from a playbook of one's own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PLAYBOOKS = Path(__file__).resolve().parents[3] / "playbooks"
COLLECTIONS = PLAYBOOKS / "collections"
COLLECTION = COLLECTIONS / "ansible_collections" / "dralab" / "node"
ROLES = ("containerd_cdi", "ascend_runtime", "kubelet_feature_gates", "npu_device_share")
BIN = Path(sys.executable).parent


def _env() -> dict[str, str]:
    return {
        **os.environ,
        "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS),
        "PATH": os.pathsep.join([str(BIN), os.environ.get("PATH", "")]),
        "ANSIBLE_NOCOLOR": "1",
        "NO_COLOR": "1",
    }


@pytest.mark.slow
def test_ansible_lint_production_profile_is_clean(tmp_path: Path) -> None:
    proc = subprocess.run(
        [str(BIN / "ansible-lint"), "--offline", "--profile", "production", "--format", "pep8", "--nocolor",
         "site.yml", str(COLLECTION.relative_to(PLAYBOOKS))],
        cwd=PLAYBOOKS,
        env={**_env(), "XDG_CACHE_HOME": str(tmp_path / "cache"), "HOME": str(tmp_path)},
        stdin=subprocess.DEVNULL,  # ansible refuses a non-blocking stdin, which a runner may hand down
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Profile 'production' was required, and it passed" in proc.stderr + proc.stdout


def test_every_role_has_an_argument_spec_for_its_prefixed_variables() -> None:
    import yaml

    for role in ROLES:
        spec = yaml.safe_load((COLLECTION / "roles" / role / "meta" / "argument_specs.yml").read_text())
        options = spec["argument_specs"]["main"]["options"]
        defaults = yaml.safe_load((COLLECTION / "roles" / role / "defaults" / "main.yml").read_text())
        assert set(defaults) == set(options), role
        assert all(name.startswith(role + "_") for name in options), role


def test_a_playbook_outside_playbooks_resolves_roles_module_and_filters(tmp_path: Path) -> None:
    """Syntax-check loads every role, module and filter by FQCN from a directory with nothing beside it."""
    play = tmp_path / "mine.yml"
    play.write_text(
        "---\n- name: Mine\n  hosts: localhost\n  gather_facts: false\n  tasks:\n"
        + "".join(
            f"    - name: Use {role}\n      ansible.builtin.import_role:\n        name: dralab.node.{role}\n"
            for role in ROLES
        )
    )
    proc = subprocess.run(
        [str(BIN / "ansible-playbook"), "--syntax-check", "-i", "localhost,", str(play)],
        cwd=tmp_path,
        env=_env(),
        stdin=subprocess.DEVNULL,  # ansible refuses a non-blocking stdin, which a runner may hand down
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
