"""Run dralab's playbooks (playbooks/site.yml) through ansible-runner against a set of hosts.

The Pulumi ``baremetal`` profile calls ``python -m dralab_kit.provision.ansible`` from a
``local.Command``; the inventory comes as JSON in $DRALAB_ANSIBLE_INVENTORY, extra variables in
$DRALAB_ANSIBLE_EXTRAVARS and the SSH private key in $DRALAB_SSH_PRIVATE_KEY (never on disk
outside a private temporary directory). Host keys are checked against $DRALAB_ANSIBLE_KNOWN_HOSTS
unless the inventory sets ``ansible_host_key_checking: false`` (for all hosts or some).

The roles, module and filters are the ``dralab.node`` collection under ``playbooks/collections``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from dralab.errors import UserError
from dralab_kit import CHECKOUT


def playbooks_dir() -> Path:
    path = CHECKOUT / "playbooks"
    if not (path / "site.yml").is_file():
        raise UserError(f"dralab's playbooks are not at {path}: run from a dralab source checkout")
    return path


def collections_dir() -> Path:
    """The collections path holding ``dralab.node`` (for ANSIBLE_COLLECTIONS_PATH of any playbook)."""
    return playbooks_dir() / "collections"


class InventoryHost(TypedDict):
    """What the inventory needs of one host (infra/'s baremetal hosts hand these over)."""

    name: str
    address: str
    user: str
    port: NotRequired[int]  # SSH port, 22 when absent


def inventory(hosts: Sequence[InventoryHost], backend: str, check_host_keys: bool = True) -> dict[str, Any]:
    """An Ansible YAML/JSON inventory: group ``dralab`` with every host, ``ascend`` with the Ascend ones.

    ``check_host_keys=False`` (the user's explicit ``insecureSkipHostKeyCheck``) writes
    ``ansible_host_key_checking: false`` into it.
    """
    members = {
        h["name"]: {
            "ansible_host": h["address"],
            "ansible_user": h["user"],
            "ansible_port": int(h.get("port", 22)),
        }
        for h in hosts
    }
    groups: dict[str, Any] = {"dralab": {"hosts": members}}
    if backend == "ascend":
        groups["ascend"] = {"hosts": {name: {} for name in members}}
    variables: dict[str, Any] = {"dralab_backend": backend}
    if not check_host_keys:
        variables["ansible_host_key_checking"] = False
    return {"all": {"children": groups, "vars": variables}}


def playbooks_digest() -> str:
    """A hash of every file under playbooks/: a change re-runs the preparation."""
    digest = hashlib.sha256()
    root = playbooks_dir()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def runner_envvars(private_dir: Path, known_hosts: str) -> dict[str, str]:
    """Ansible's environment: host keys checked against ``known_hosts`` (written into ``private_dir``).

    Without the check an impersonated host receives the playbooks' secrets and, later, the join token.
    ``StrictHostKeyChecking=yes`` goes in the common arguments, which ssh reads after the
    ``StrictHostKeyChecking=no`` Ansible adds for a host whose inventory sets
    ``ansible_host_key_checking: false``: the inventory's opt-out wins, nothing else turns it off.
    """
    path = private_dir / "known_hosts"
    path.write_text(known_hosts.strip() + "\n" if known_hosts.strip() else "")
    path.chmod(0o600)
    return {
        "ANSIBLE_PIPELINING": "1",
        "ANSIBLE_COLLECTIONS_PATH": str(collections_dir()),
        "ANSIBLE_HOST_KEY_CHECKING": "True",
        "ANSIBLE_SSH_ARGS": f"-o UserKnownHostsFile={path} -o ControlMaster=auto -o ControlPersist=60s",
        "ANSIBLE_SSH_COMMON_ARGS": "-o StrictHostKeyChecking=yes",
    }


def run_site(
    inv: dict[str, Any],
    extravars: dict[str, Any],
    private_key: str | None = None,
    *,
    check: bool = False,
    known_hosts: str = "",
) -> int:
    """ansible-runner over site.yml; returns the exit code (events stream to stdout)."""
    import ansible_runner

    with tempfile.TemporaryDirectory(prefix="dralab-ansible-") as tmp:
        private = Path(tmp)
        env = private / "env"
        env.mkdir()
        if private_key:
            key = env / "ssh_key"
            key.write_text(private_key if private_key.endswith("\n") else private_key + "\n")
            key.chmod(0o600)
        result = ansible_runner.run(
            private_data_dir=str(private),
            project_dir=str(playbooks_dir()),
            playbook="site.yml",
            inventory=json.dumps(inv),
            extravars=extravars,
            envvars=runner_envvars(private, known_hosts),
            cmdline="--check --diff" if check else None,
        )
        return int(result.rc)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m dralab_kit.provision.ansible",
        description="Prepare hosts with playbooks/site.yml. Example: DRALAB_ANSIBLE_INVENTORY='{...}' "
        "python -m dralab_kit.provision.ansible",
    )
    parser.add_argument("--check", action="store_true", help="report what would change, change nothing")
    args = parser.parse_args(argv)
    try:
        inv = json.loads(os.environ["DRALAB_ANSIBLE_INVENTORY"])
        extravars = json.loads(os.environ.get("DRALAB_ANSIBLE_EXTRAVARS") or "{}")
    except KeyError:
        print("error: set DRALAB_ANSIBLE_INVENTORY to the inventory as JSON", file=sys.stderr)
        return 2
    except json.JSONDecodeError as exc:
        print(f"error: DRALAB_ANSIBLE_INVENTORY/EXTRAVARS is not JSON ({exc})", file=sys.stderr)
        return 2
    return run_site(
        inv,
        extravars,
        os.environ.get("DRALAB_SSH_PRIVATE_KEY"),
        check=args.check,
        known_hosts=os.environ.get("DRALAB_ANSIBLE_KNOWN_HOSTS", ""),
    )


if __name__ == "__main__":
    sys.exit(main())
