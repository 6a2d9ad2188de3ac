"""The preflight: each missing piece, on a fake machine, gives one line that names it and its fix."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from dralab.errors import UserError
from dralab_kit.cluster import preflight
from dralab_kit.cluster.preflight import Host

TOOLS = {"gcc": "/usr/bin/gcc", "pkg-config": "/usr/bin/pkg-config", "busybox": "/bin/busybox"}
FILES = {"/sys/fs/cgroup", "/sys/fs/cgroup/memory"}


def host(**changes: object) -> Host:
    """A machine that has everything; ``changes`` take pieces away."""
    whole = Host(
        which=TOOLS.get,
        exists=FILES.__contains__,
        read_text=lambda path: "nodev\tproc\nnodev\toverlay\n" if path == "/proc/filesystems" else "",
        euid=lambda: 0,
        go_problem=lambda: None,
        pkg_config_has=lambda name: name == "libseccomp",
        can_unshare_mount=lambda: True,
    )
    return dataclasses.replace(whole, **changes)


def without(tool: str) -> object:
    return lambda name: None if name == tool else TOOLS.get(name)


def test_a_complete_machine_has_no_problem() -> None:
    assert preflight.check_build(host(), real_node=True) == []
    assert preflight.check_node_host(host()) == []


@pytest.mark.parametrize(
    ("changes", "real_node", "names", "fix"),
    [
        ({"go_problem": lambda: "the Go toolchain was not found; install Go >= 1.25"}, False, "Go", "install Go"),
        ({"which": without("gcc")}, False, "gcc", "apt-get install -y gcc"),
        ({"which": without("pkg-config")}, True, "pkg-config", "libseccomp-dev"),
        ({"pkg_config_has": lambda name: False}, True, "libseccomp", "apt-get install -y gcc pkg-config libseccomp"),
        ({"which": without("busybox")}, True, "busybox", "busybox"),
    ],
)
def test_each_missing_build_piece_is_one_line_with_its_fix(
    changes: dict, real_node: bool, names: str, fix: str
) -> None:
    [problem] = preflight.check_build(host(**changes), real_node=real_node)
    assert names in problem.what
    assert fix in problem.fix
    assert "\n" not in problem.line()


def test_the_local_profile_does_not_ask_for_the_node_packages() -> None:
    assert preflight.check_build(host(which=without("busybox"), pkg_config_has=lambda n: False), real_node=False) == []


@pytest.mark.parametrize(
    ("changes", "names", "fix"),
    [
        ({"euid": lambda: 1000}, "root", "run it as root"),
        ({"can_unshare_mount": lambda: False}, "mount namespaces", "unshare --mount"),
        ({"read_text": lambda path: "nodev\tproc\n"}, "overlayfs", "modprobe overlay"),
        ({"exists": lambda path: False}, "cgroups", "/sys/fs/cgroup"),
    ],
)
def test_each_missing_node_host_feature_is_one_line_with_its_fix(changes: dict, names: str, fix: str) -> None:
    [problem] = preflight.check_node_host(host(**changes))
    assert names in problem.what
    assert fix in problem.fix


def test_cgroup_v2_counts_as_cgroups() -> None:
    v2 = {"/sys/fs/cgroup", "/sys/fs/cgroup/cgroup.controllers"}
    assert preflight.check_node_host(host(exists=v2.__contains__)) == []


def test_require_lists_every_problem_in_one_error() -> None:
    problems = preflight.check_build(host(which=lambda name: None), real_node=True)
    with pytest.raises(UserError) as exc:
        preflight.require(problems, "build the cluster binaries")
    text = str(exc.value)
    assert text.startswith("cannot build the cluster binaries; this machine lacks:")
    assert text.count("\n  - ") == len(problems) == 3  # gcc, pkg-config, busybox
    preflight.require([], "anything")  # nothing missing: no error


def test_the_package_list_has_the_profiles_make_and_ci_install() -> None:
    packages = preflight.debian_packages()
    assert set(packages) == {"local", "node", "chart", "test"}
    assert "libseccomp-dev" in packages["node"] and "libseccomp-dev" not in packages["local"]
    assert "busybox" in packages["node"]


def test_the_shipped_list_is_the_one_the_script_reads() -> None:
    root = Path(__file__).resolve().parents[3]
    script = (root / "scripts" / "system-packages").read_text()
    assert "kit/dralab_kit/cluster/debian-packages.txt" in script
