"""Attack: a key written twice in a file silently replaces the first.

PyYAML keeps the last value of a repeated key and says nothing, so a config reading
``maxClaimsPerPod: 16`` at the top can run with the ``1000`` written further down, and a lab step
with two ``expect:`` (or ``evidence:``) keeps only one, dropping the other without a trace
(``labs/preempt-sharers`` had two ``evidence:`` in one step). Now every YAML file dralab loads goes
through ``dralab.yamlio``, which refuses the file naming file, line and key.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dralab.errors import UserError
from harness.schema import load_lab

REPO = Path(__file__).resolve().parents[2]


def test_config_with_a_hidden_second_value_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "dralab.yaml"
    config.write_text("webhook:\n  maxClaimsPerPod: 16\n  lifecycle: claim\n  maxClaimsPerPod: 1000\n")
    proc = subprocess.run([sys.executable, "-m", "dralab.cli", "config", "show", "--config", str(config)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == (f"error: {config}:4: duplicate key 'maxClaimsPerPod' in one mapping (first at line 2): "
                           "remove or rename one of them\n")


def test_lab_step_with_two_expectations_is_refused(tmp_path: Path) -> None:
    lab = tmp_path / "lab.yaml"
    lab.write_text(
        "apiVersion: dralab.io/v1alpha1\nkind: Lab\nname: twice\nsteps:\n  - id: s\n    try:\n"
        "      - assert:\n          resource: Pod/p\n          match: {status: {phase: Running}}\n"
        "        evidence: running\n        evidence: not running\n"
    )
    with pytest.raises(UserError, match=rf"^{lab}:11: duplicate key 'evidence'"):
        load_lab(lab)


def test_the_shipped_offender_is_fixed() -> None:
    lab = load_lab(REPO / "kit" / "labs" / "preempt-sharers")
    assert lab.name == "preempt-sharers"
