"""The three pain labs: every proved row has a step behind it, and each lab pins a GPU of its own."""

from __future__ import annotations

import re

import pytest

from dralab.model.inventory import load_inventory
from dralab.model.vendors import load_vendor_table
from harness.loader import resolve_lab
from harness.schema import load_lab

LABS = ("team-budgets", "preempt-sharers", "failed-prepare-isolation")
DEVICE = re.compile(r"devices\[name=(gpu-\d+)\]")


@pytest.mark.parametrize("name", LABS)
def test_every_proved_row_is_backed_by_a_step(name: str) -> None:
    lab = load_lab(resolve_lab(name))
    assert lab.proved, f"{name} has no What This Lab Proved table"
    assert all(any(p.id in s.proves for s in lab.steps) for p in lab.proved)
    assert {"local", "node"} <= set(lab.profiles)
    assert lab.prerequisites["inventory"] == "team-gpus"


def test_each_lab_uses_its_own_gpu_of_the_inventory() -> None:
    gpus = {name: set(DEVICE.findall(resolve_lab(name).read_text())) for name in LABS}
    assert all(len(found) == 1 for found in gpus.values()), gpus
    chosen = [next(iter(found)) for found in gpus.values()]
    assert len(set(chosen)) == len(LABS)  # side by side on one cluster, never on one device
    inventory = load_inventory("team-gpus", load_vendor_table())
    names = {d.name for n in inventory.nodes for d in n.devices}
    assert set(chosen) <= names
