"""The ssh command Ansible builds for dralab's runs: host keys checked unless the inventory opts out.

The host is 127.0.0.1 on a closed port, so ssh fails at once; what is checked is the command line
Ansible logged (ssh keeps the first value of an option, so the order decides).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dralab_kit.provision.ansible import inventory, runner_envvars


def _ssh_options(tmp_path: Path, check_host_keys: bool) -> list[str]:
    inv = inventory([{"name": "h", "address": "127.0.0.1", "user": "nobody", "port": 1}], "nvidia", check_host_keys)
    path = tmp_path / "inventory.json"
    path.write_text(json.dumps(inv))
    env = {**os.environ, **runner_envvars(tmp_path, "127.0.0.1 ssh-ed25519 AAAA"), "ANSIBLE_NOCOLOR": "1"}
    env.pop("ANSIBLE_PIPELINING")
    env["ANSIBLE_SSH_ARGS"] = env["ANSIBLE_SSH_ARGS"].replace("-o ControlMaster=auto -o ControlPersist=60s", "")
    env["ANSIBLE_LOCAL_TEMP"] = str(tmp_path / "a-tmp")
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "ansible"), "h", "-i", str(path), "-m", "ansible.builtin.ping", "-vvv"],
        env=env,
        capture_output=True,
        stdin=subprocess.DEVNULL,  # ansible refuses a non-blocking stdin, which a runner may hand down
        text=True,
        timeout=120,
    )
    exec_lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "SSH: EXEC ssh" in ln]
    assert exec_lines, proc.stdout + proc.stderr
    return re.findall(r"StrictHostKeyChecking=(\w+)", exec_lines[0])


@pytest.mark.parametrize(("check", "first"), [(True, "yes"), (False, "no")])
def test_strict_host_key_checking_unless_the_inventory_turns_it_off(tmp_path: Path, check: bool, first: str) -> None:
    options = _ssh_options(tmp_path, check)
    assert options[0] == first, options
