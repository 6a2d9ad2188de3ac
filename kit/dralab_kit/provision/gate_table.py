"""The DRA gate table (``versions.GATE_STAGES``) written out where Python cannot reach it.

Two copies live outside the package: the ``kubelet_feature_gates`` role's vars (the Ansible
collection ships on its own and imports nothing of dralab) and the gate table in
``kit/dralab_kit/cluster/README.md``. Both are rendered here from the one table;
``python -m dralab_kit.provision.gate_table sync`` rewrites them and ``check`` (and a unit test) fails
when either drifts.
"""

from __future__ import annotations

import argparse
import sys

from dralab.versions import GATE_STAGES, MIN_MINOR, SUPPORTED_KUBERNETES_VERSIONS, gate_stage
from dralab_kit import CHECKOUT

# The KEP behind each gate, for the docs.
KEPS = {
    "DRAConsumableCapacity": 5075,
    "DRAPrioritizedList": 4816,
    "DRADeviceTaints": 5055,
    "DRAResourceClaimDeviceStatus": 4817,
    "DRAExtendedResource": 5004,
    "DRAAdminAccess": 5018,
}

REPO = CHECKOUT
ROLE_VARS = REPO / "playbooks/collections/ansible_collections/dralab/node/roles/kubelet_feature_gates/vars/main.yml"
README = REPO / "kit/dralab_kit/cluster/README.md"
BEGIN, END = "<!-- gate-table: begin (python -m dralab_kit.provision.gate_table sync) -->", "<!-- gate-table: end -->"


def newest_minor() -> int:
    """The newest minor the table says anything about (a later one behaves like it)."""
    table = max(entry[0] for entries in GATE_STAGES.values() for entry in entries)
    supported = max(int(v.split(".")[1]) for v in SUPPORTED_KUBERNETES_VERSIONS)
    return max(table, supported)


def handling(gate: str, minor: int) -> str | None:
    """What a component of ``1.<minor>`` needs for ``gate`` on: ``pass`` (off by default, so
    ``gate=true`` is passed), ``default`` (on by default: left out), ``locked`` (left out; passing
    it is an error in later releases); None when that minor does not know the gate."""
    stage = gate_stage(gate, f"v1.{minor}.0")
    if stage is None:
        return None
    _, on, locked = stage
    return "locked" if locked else ("default" if on else "pass")


def role_stages() -> dict[int, dict[str, str]]:
    """Per minor from MIN_MINOR to the newest, the gates it knows and their handling."""
    return {
        minor: {gate: how for gate in sorted(GATE_STAGES) if (how := handling(gate, minor)) is not None}
        for minor in range(MIN_MINOR, newest_minor() + 1)
    }


def role_vars_text() -> str:
    """The text of the role's vars/main.yml."""
    lines = [
        "---",
        "# Generated from dralab/versions.py (GATE_STAGES) by",
        "# `python -m dralab_kit.provision.gate_table sync`; do not edit (a unit test compares them).",
        "# Per Kubernetes minor, each DRA gate the version knows: pass (off by default: the role passes",
        "# <gate>=true when it is wanted), default (on by default) or locked (GA and locked); both of",
        "# the last are left out. A minor newer than the last row behaves like the last row.",
        "kubelet_feature_gates_stages:",
    ]
    for minor, gates in role_stages().items():
        lines.append(f"  {minor}:")
        lines += [f"    {gate}: {how}" for gate, how in gates.items()]
    return "\n".join(lines) + "\n"


def _cell(gate: str, version: str) -> str:
    stage = gate_stage(gate, version)
    if stage is None:
        return "unknown"
    name, on, locked = stage
    label = "GA" if name == "ga" else name
    return f"{label}, {'locked' if locked else ('on' if on else 'off')}"


def _history(gate: str) -> str:
    steps = []
    for minor, name, on, locked in GATE_STAGES[gate]:
        label = "GA" if name == "ga" else name
        steps.append(f"{label} {'locked' if locked else ('on' if on else 'off')} from 1.{minor}")
    return "; ".join(steps)


def readme_table() -> str:
    """The gate table of kit/dralab_kit/cluster/README.md, between its markers."""
    versions = SUPPORTED_KUBERNETES_VERSIONS
    head = "| gate (KEP) | " + " | ".join(v.removeprefix("v") for v in versions) + " | history |"
    rows = [head, "| --- |" + " --- |" * (len(versions) + 1)]
    for gate in sorted(GATE_STAGES, key=lambda g: list(KEPS).index(g)):
        cells = " | ".join(_cell(gate, v) for v in versions)
        rows.append(f"| {gate} ({KEPS[gate]}) | {cells} | {_history(gate)} |")
    return "\n".join([BEGIN, *rows, END])


def readme_with_table(text: str) -> str:
    """``text`` (the README) with the part between the markers replaced by :func:`readme_table`."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"{README} has no gate-table markers: put {BEGIN!r} and {END!r} where the table goes")
    return text[:start] + readme_table() + text[end + len(END) :]


def main(argv: list[str] | None = None) -> int:
    """``python -m dralab_kit.provision.gate_table sync|check``: regenerate or verify both copies."""
    parser = argparse.ArgumentParser(
        prog="python -m dralab_kit.provision.gate_table",
        description="Keep the Ansible role's gate table and the cluster README's in step with GATE_STAGES.",
    )
    parser.add_argument("action", choices=["sync", "check"])
    args = parser.parse_args(argv)
    wanted = {ROLE_VARS: role_vars_text(), README: readme_with_table(README.read_text())}
    stale = [path for path, text in wanted.items() if not path.is_file() or path.read_text() != text]
    if args.action == "sync":
        from dralab.util import atomic_write

        for path in stale:
            atomic_write(path, wanted[path])
        return 0
    for path in stale:
        print(f"{path} is out of date: run python -m dralab_kit.provision.gate_table sync", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
