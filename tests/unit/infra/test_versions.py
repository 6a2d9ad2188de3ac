"""Kubernetes versions: defined once, gates per version, every writer of versions and gates tied to it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from dralab import versions
from dralab.errors import UserError
from dralab.versions import KUBERNETES_VERSION, SUPPORTED_KUBERNETES_VERSIONS, feature_gates_for, gate_stage
from dralab_kit.cluster import build, components
from dralab_kit.provision import kubeadm

ROOT = Path(__file__).resolve().parents[3]


def test_the_default_is_lab_20s_and_is_the_one_every_module_uses() -> None:
    assert KUBERNETES_VERSION == "v1.35.4" == SUPPORTED_KUBERNETES_VERSIONS[0]
    assert build.K8S_VERSION is KUBERNETES_VERSION
    assert components.K8S_VERSION is KUBERNETES_VERSION
    stack = yaml.safe_load((ROOT / "infra" / "Pulumi.yaml").read_text())
    assert stack["config"]["kubernetesVersion"]["default"] == KUBERNETES_VERSION
    example = yaml.safe_load((ROOT / "infra" / "Pulumi.baremetal.example.yaml").read_text())
    assert example["config"]["dralab:kubernetesVersion"] == KUBERNETES_VERSION
    minor = KUBERNETES_VERSION.rsplit(".", 1)[0]
    assert versions.KIND_NODE_IMAGE.startswith(f"kindest/node:{minor}.")


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("v1.35.4", {"DRAConsumableCapacity": True}),  # alpha, off by default: must be turned on
        ("v1.36.3", {}),  # beta and on by default: left out
        ("v1.37.2", {}),
    ],
)
def test_consumable_capacity_is_passed_only_where_it_is_off(version: str, expected: dict) -> None:
    assert feature_gates_for(version) == expected


def test_optional_gates_follow_each_versions_stage() -> None:
    wanted = ("DRAConsumableCapacity", "DRADeviceTaints", "DRAPrioritizedList", "DRAExtendedResource")
    assert feature_gates_for("v1.35.4", wanted) == {
        "DRAConsumableCapacity": True, "DRADeviceTaints": True, "DRAExtendedResource": True,
    }  # DRAPrioritizedList is beta and on in 1.35
    assert feature_gates_for("v1.37.2", wanted) == {}  # all on, DRAPrioritizedList locked (GA)
    assert gate_stage("DRAPrioritizedList", "v1.37.2") == ("ga", True, True)
    assert gate_stage("DRADeviceTaints", "v1.36.3") == ("beta", True, False)


def test_a_gate_a_version_does_not_have_cannot_be_wanted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(versions.GATE_STAGES, "DRAFromTheFuture", ((36, "alpha", False, False),))
    with pytest.raises(UserError, match=r"v1\.35\.4 has no feature gate DRAFromTheFuture"):
        feature_gates_for("v1.35.4", ("DRAFromTheFuture",))
    assert feature_gates_for("v1.36.3", ("DRAFromTheFuture",)) == {"DRAFromTheFuture": True}


def test_only_supported_versions_are_built() -> None:
    with pytest.raises(UserError, match=r"not one dralab builds: use one of v1\.35\.4, v1\.36\.3, v1\.37\.2"):
        versions.check_supported("v1.36.0")
    assert versions.check_supported("1.37.2") == "v1.37.2"


def test_components_pass_no_gate_flag_where_none_is_needed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(components.EXTRA_GATES_ENV, raising=False)
    assert components.feature_gates("v1.35.4") == "DRAConsumableCapacity=true"
    assert components.feature_gates("v1.37.2") == ""
    monkeypatch.setenv(components.EXTRA_GATES_ENV, "DRADeviceTaints=true")
    assert components.feature_gates("v1.35.4") == "DRAConsumableCapacity=true,DRADeviceTaints=true"


def test_kubeadm_writes_each_versions_gates() -> None:
    docs = {d["kind"]: d for d in kubeadm.kubeadm_config(kubernetes_version="v1.37.2", advertise_address="192.0.2.1",
                                                         node_name="n1")}
    assert docs["ClusterConfiguration"]["apiServer"]["extraArgs"] == []
    assert docs["KubeletConfiguration"]["featureGates"] == {}


def test_each_supported_version_has_its_wrapper_modules() -> None:
    wrappers = ROOT / "kit" / "dralab_kit" / "gobuild" / "wrappers"
    for version in SUPPORTED_KUBERNETES_VERSIONS:
        for toolset in (*build.TOOLSETS, *build.NODE_TOOLSETS):
            ts = build.for_version(toolset, version)
            gomod = (wrappers / ts.wrapper / "go.mod").read_text()
            if toolset.wrapper in build.VERSIONED_WRAPPERS:
                assert f"k8s.io/kubernetes {version}" in gomod, (ts.wrapper, version)
                assert build.binary_path(next(iter(ts.packages)), version).parent.name in (version, "cni")


# --- the copies of GATE_STAGES outside the package: the Ansible role's table and the README's ---------

COLLECTION = ROOT / "playbooks" / "collections" / "ansible_collections" / "dralab" / "node"


def _role_filters():
    import importlib.util

    spec = importlib.util.spec_from_file_location("dralab_node_filters", COLLECTION / "plugins/filter/node_filters.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_roles_gate_table_and_the_readmes_are_generated_from_gate_stages() -> None:
    from dralab_kit.provision import gate_table

    fix = "run python -m dralab_kit.provision.gate_table sync"
    assert gate_table.ROLE_VARS.read_text() == gate_table.role_vars_text(), fix
    readme = gate_table.README.read_text()
    assert readme == gate_table.readme_with_table(readme), fix
    stages = yaml.safe_load(gate_table.ROLE_VARS.read_text())["kubelet_feature_gates_stages"]
    assert stages[35]["DRAConsumableCapacity"] == "pass" and stages[36]["DRAConsumableCapacity"] == "default"
    assert stages[37]["DRAAdminAccess"] == "locked"
    assert min(stages) == versions.MIN_MINOR and max(stages) >= 37


def test_the_readme_rows_say_each_gates_stage_per_version() -> None:
    from dralab_kit.provision import gate_table

    rows = {line.split(" (")[0].strip("| "): [c.strip() for c in line.strip("|").split("|")[1:]]
            for line in gate_table.README.read_text().splitlines() if line.startswith("| DRA")}  # fmt: skip
    assert set(rows) == set(versions.GATE_STAGES)
    for gate, cells in rows.items():
        for version, cell in zip(SUPPORTED_KUBERNETES_VERSIONS, cells, strict=False):
            stage, on, locked = gate_stage(gate, version)
            words = [w.strip() for w in cell.split(",")]
            assert words[0].lower() == stage, (gate, version, cell)
            assert words[1] == ("locked" if locked else "on" if on else "off"), (gate, version, cell)


@pytest.mark.parametrize("version", [*SUPPORTED_KUBERNETES_VERSIONS, "v1.34.2", "v1.38.0"])
def test_the_roles_filter_chooses_the_gates_feature_gates_for_chooses(version: str) -> None:
    from dralab_kit.provision import gate_table

    stages = yaml.safe_load(gate_table.role_vars_text())["kubelet_feature_gates_stages"]
    choose = _role_filters().feature_gates_for
    for wanted in [("DRAConsumableCapacity",), tuple(versions.GATE_STAGES), ("DRADeviceTaints", "NotADRAGate")]:
        assert choose(stages, version, list(wanted)) == feature_gates_for(version, wanted), (version, wanted)


def test_the_roles_filter_refuses_what_versions_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    filters = _role_filters()
    stages = {35: {"DRAConsumableCapacity": "pass"}, 36: {"DRAConsumableCapacity": "default", "DRANew": "pass"}}
    with pytest.raises(ValueError, match=r"v1\.35\.4 has no feature gate DRANew: use a newer version"):
        filters.feature_gates_for(stages, "v1.35.4", ["DRANew"])
    assert filters.feature_gates_for(stages, "v1.36.3", ["DRANew"]) == {"DRANew": True}
    with pytest.raises(ValueError, match=r"v1\.33\.1 is too old for dralab: it needs v1\.35 or newer"):
        filters.feature_gates_for(stages, "v1.33.1", [])
    with pytest.raises(ValueError, match="set kubelet_feature_gates_kubernetes_version"):
        filters.feature_gates_for(stages, "", [])
    assert filters.kubernetes_version("Kubernetes v1.36.3\n") == "v1.36.3"
    assert filters.kubernetes_version("kubelet: command not found") == ""
