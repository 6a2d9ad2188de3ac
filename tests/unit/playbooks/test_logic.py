"""The roles' pure logic: the containerd CRI config editor and the Jinja filters (no Ansible run)."""

from __future__ import annotations

import importlib.util
import sys
import tomllib
from pathlib import Path

import pytest

PLAYBOOKS = Path(__file__).resolve().parents[3] / "playbooks"
COLLECTION = PLAYBOOKS / "collections" / "ansible_collections" / "dralab" / "node"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


cri = _load("dralab_containerd_cri_config", COLLECTION / "plugins" / "modules" / "containerd_cri_config.py")
filters = _load("dralab_filters", COLLECTION / "plugins" / "filter" / "node_filters.py")

CDI = [
    {"table": "", "key": "enable_cdi", "value": True, "versions": [2, 3]},
    {"table": "", "key": "cdi_spec_dirs", "value": ["/etc/cdi", "/var/run/cdi"]},
]
ASCEND = [
    {"table": "containerd.runtimes.ascend", "key": "runtime_type", "value": "io.containerd.runc.v2"},
    {"table": "containerd.runtimes.ascend.options", "key": "BinaryName", "value": "/usr/local/bin/ascend-rt"},
]

V3 = """\
version = 3
root = '/var/lib/containerd'

[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'

  [plugins.'io.containerd.cri.v1.runtime']
    enable_selinux = false
    cdi_spec_dirs = ['/etc/cdi',
                     '/var/run/cdi']
    enable_cdi = false # set by hand

    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = 'io.containerd.runc.v2'
"""


def test_version_2_layout_from_an_empty_file_is_valid_toml() -> None:
    text, version, changed = cri.apply("", CDI + ASCEND, 2)
    assert version == 2 and len(changed) == 4
    doc = tomllib.loads(text)
    plugin = doc["plugins"]["io.containerd.grpc.v1.cri"]
    assert doc["version"] == 2
    assert plugin["enable_cdi"] is True and plugin["cdi_spec_dirs"] == ["/etc/cdi", "/var/run/cdi"]
    assert plugin["containerd"]["runtimes"]["ascend"]["options"]["BinaryName"] == "/usr/local/bin/ascend-rt"


def test_version_3_layout_edits_only_the_keys_it_sets() -> None:
    text, version, changed = cri.apply(V3, CDI + ASCEND, 2)
    assert version == 3
    doc = tomllib.loads(text)
    runtime = doc["plugins"]["io.containerd.cri.v1.runtime"]
    assert runtime["enable_cdi"] is True
    assert runtime["enable_selinux"] is False
    assert runtime["containerd"]["runtimes"]["runc"]["runtime_type"] == "io.containerd.runc.v2"
    assert runtime["containerd"]["runtimes"]["ascend"]["runtime_type"] == "io.containerd.runc.v2"
    assert doc["plugins"]["io.containerd.cri.v1.images"]["snapshotter"] == "overlayfs"
    # the multi-line array already held the wanted dirs: left exactly as written
    assert "cdi_spec_dirs = ['/etc/cdi',\n                     '/var/run/cdi']" in text
    assert [c.rsplit(".", 1)[-1] for c in changed] == ["enable_cdi", "runtime_type", "BinaryName"]
    assert "[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.ascend]" in text


def test_a_second_apply_changes_nothing() -> None:
    for start, default in (("", 2), ("", 3), (V3, 2)):
        once, _, _ = cri.apply(start, CDI + ASCEND, default)
        twice, _, changed = cri.apply(once, CDI + ASCEND, default)
        assert twice == once and changed == []


def test_version_4_skips_the_deprecated_enable_cdi() -> None:
    text, version, _changed = cri.apply("version = 4\n", CDI, 2)
    assert version == 4
    runtime = tomllib.loads(text)["plugins"]["io.containerd.cri.v1.runtime"]
    assert "enable_cdi" not in runtime and runtime["cdi_spec_dirs"] == ["/etc/cdi", "/var/run/cdi"]


def test_a_version_1_config_is_refused_with_the_fix() -> None:
    with pytest.raises(cri.ConfigError, match="containerd config migrate"):
        cri.apply("[plugins.cri]\n  enable_selinux = false\n", CDI, 2)


def test_a_key_set_elsewhere_is_caught_before_writing() -> None:
    inline = 'version = 2\n[plugins]\n  "io.containerd.grpc.v1.cri" = { enable_cdi = false }\n'
    with pytest.raises(cri.ConfigError):
        cri.apply(inline, CDI, 2)


def test_key_and_value_helpers() -> None:
    assert cri.split_key("plugins.\"io.containerd.grpc.v1.cri\".containerd") == (
        "plugins", "io.containerd.grpc.v1.cri", "containerd",
    )  # fmt: skip
    assert cri.split_key("plugins.'io.containerd.cri.v1.runtime'") == ("plugins", "io.containerd.cri.v1.runtime")
    assert cri.parse_value("[\"a\", 'b',\n # c\n ]") == ["a", "b"]
    assert cri.parse_value("true # on") is True
    assert cri.render_value(["/etc/cdi", 1, False]) == '["/etc/cdi", 1, false]'


LAB20_DEVICE_SHARE = """\
        NPU ID                         : 4
        Chip Count                     : 1

        Device-share Status            : True
        Chip ID                        : 0

        NPU ID                         : 5
        Chip Count                     : 2

        Device-share Status            : False
        Chip ID                        : 0

        Device-share Status            : True
        Chip ID                        : 1
"""


def test_device_share_output_as_lab20_prints_it() -> None:
    assert filters.npu_smi_device_share(LAB20_DEVICE_SHARE) == [
        {"npu_id": 4, "chip_id": 0, "enabled": True},
        {"npu_id": 5, "chip_id": 0, "enabled": False},
        {"npu_id": 5, "chip_id": 1, "enabled": True},
    ]
    results = [{"item": 5, "stdout": LAB20_DEVICE_SHARE.split("\n\n", 2)[2]}]
    assert filters.npu_chips_to_enable(results) == [{"npu_id": 5, "chip_id": 0}]


def test_npu_ids_from_the_list() -> None:
    text = "\tTotal Count : 2\n\n\tNPU ID : 4\n\tChip Count : 1\n\n\tNPU ID : 5\n\tChip Count : 1\n"
    assert filters.npu_smi_ids(text) == [4, 5]
    assert filters.npu_smi_ids("") == []


@pytest.mark.parametrize(
    ("version", "minimum", "ok"),
    [("25.5.1", "25.5", True), ("25.5", "25.5", True), ("25.3.0", "25.5", False), ("26.0.rc1", "25.5", True),
     ("", "25.5", False), ("24.1.RC3", "25.5", False)],
)  # fmt: skip
def test_driver_version_comparison(version: str, minimum: str, ok: bool) -> None:
    assert filters.version_at_least(version, minimum) is ok


def test_driver_version_file() -> None:
    assert filters.npu_driver_version("Version=25.5.1\nascendhal_version=7.35.23\n") == "25.5.1"
    assert filters.npu_driver_version("nothing here") == ""


def test_feature_gate_flag_merge() -> None:
    want = {"DRAConsumableCapacity": True}
    assert (
        filters.merge_gate_flag(["kube-scheduler", "--v=2"], want)[-1] == "--feature-gates=DRAConsumableCapacity=true"
    )
    merged = filters.merge_gate_flag(["x", "--feature-gates=A=true,DRAConsumableCapacity=false"], want)
    assert merged == ["x", "--feature-gates=A=true,DRAConsumableCapacity=true"]
    done = ["x", "--feature-gates=DRAConsumableCapacity=true,A=false"]
    assert filters.merge_gate_flag(done, want) == done
    assert filters.gates_missing({"A": True}, {"A": True, "B": True}) == {"B": True}
    assert filters.gates_missing(None, {}) == {}


def test_site_yml_passes_ansible_syntax_check() -> None:
    import subprocess

    proc = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "--syntax-check", "-i", "localhost,", "site.yml"],
        cwd=PLAYBOOKS,
        capture_output=True,
        stdin=subprocess.DEVNULL,  # ansible refuses a non-blocking stdin, which a runner may hand down
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize(
    ("output", "layout"),
    [
        ("containerd containerd.io 1.7.29 442cb34bda9a6a0fed82a2ca7cade05c5c749582", 2),
        ("containerd github.com/containerd/containerd/v2 v2.2.0 1c4457e00facac03ce1d75f7b6777a7a851e5c41", 3),
        ("containerd github.com/containerd/containerd/v2 v2.3.1 abc", 4),
        ("containerd github.com/containerd/containerd/v2 v2.10.0 abc", 4),
        ("", 2),
    ],
)
def test_containerd_layout_from_its_version(output: str, layout: int) -> None:
    assert filters.containerd_layout(output) == layout
