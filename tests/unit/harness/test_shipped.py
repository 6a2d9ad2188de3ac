"""The shipped labs and profiles load, and Lab 20 keeps the uuid out of its manifests."""

from __future__ import annotations

import re

import pytest

from harness.loader import list_labs, load_suite, resolve_lab, shipped_labs
from harness.profile import builtin_profiles, load_profile
from harness.schema import load_lab

UUID = re.compile(r"[0-9A-F]{8}-[0-9A-F]{8}-[0-9A-F]{8}-[0-9A-F]{8}-[0-9A-F]{8}|GPU-[0-9a-f-]{36}")


def test_every_shipped_lab_loads() -> None:
    names = {lab.name for lab in list_labs()}
    assert {"lab20-ascend-hami-dra", "nvidia-gpu-share"} <= names


def test_lab20_has_every_step_of_the_lab_and_the_proved_table() -> None:
    lab = load_lab(resolve_lab("lab20-ascend-hami-dra"))
    assert [s.id for s in lab.steps] == [
        "components", "first-workload", "conversion", "allocation", "node-layer", "share", "enforcement",
        "exhaust", "control-memory", "release", "reallocate", "cleanup",
    ]  # fmt: skip
    assert len(lab.proved) == 9
    assert all(any(p.id in s.proves for s in lab.steps) for p in lab.proved)
    assert lab.namespace_labels == {"hami.io/webhook": "ignore"}


@pytest.mark.parametrize("lab_yaml", shipped_labs(), ids=lambda p: p.parent.name)
def test_manifests_never_hard_code_a_device_uuid(lab_yaml) -> None:
    for manifest in lab_yaml.parent.rglob("*.yaml"):
        if manifest.name == "lab.yaml":
            continue
        assert not UUID.search(manifest.read_text()), f"{manifest} hard-codes a uuid: capture it from the slice"
    assert not UUID.search(lab_yaml.read_text()), "lab.yaml hard-codes a uuid: capture it from the ResourceSlice"


def test_the_suite_lists_shipped_labs() -> None:
    from pathlib import Path

    suite = Path(__file__).resolve().parents[2] / "e2e" / "labs.yaml"
    assert [p.parent.name for p in load_suite(suite)] == [
        "lab20-ascend-hami-dra", "nvidia-gpu-share", "gpu-type-selection", "team-budgets", "preempt-sharers",
        "failed-prepare-isolation", "migrate-from-hami-dra", "prefer-types-fallback", "topology-align",
        "admin-access",
    ]  # fmt: skip


@pytest.mark.parametrize("name", builtin_profiles())
def test_shipped_profiles_load(name: str) -> None:
    profile = load_profile(name)
    assert profile.name == name


def test_local_profile_uses_one_cluster_per_inventory() -> None:
    local = load_profile("local")
    assert local.cluster_name_for("lab20") == "dralab"
    assert local.cluster_name_for(None) == "dralab"
    assert local.cluster_name_for("nvidia-gpus") == "dralab-nvidia-gpus"


def test_another_kubernetes_version_gets_clusters_of_its_own() -> None:
    from dralab.errors import UserError
    from harness.profile import with_kubernetes

    local = load_profile("local")
    assert with_kubernetes(local, None) is local
    assert with_kubernetes(local, "v1.35.4").cluster_name_for(None) == "dralab"  # the default: the same cluster
    v137 = with_kubernetes(local, "1.37.2")
    assert v137.kubernetes == "v1.37.2"
    assert v137.cluster_name_for(None) == "dralab-v1-37"
    assert v137.cluster_name_for("team-gpus") == "dralab-team-gpus-v1-37"
    with pytest.raises(UserError, match="not one dralab builds"):
        with_kubernetes(local, "v1.36.0")
    with pytest.raises(UserError, match="does not bring its cluster up"):
        with_kubernetes(load_profile("kind"), "v1.37.2")
