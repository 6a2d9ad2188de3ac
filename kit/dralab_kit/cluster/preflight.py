"""Checks before long work: what a build or a cluster needs, each missing piece in one line with its fix.

``dralab cluster build`` and ``dralab cluster up`` run these first, so a machine that lacks a
compiler, a library or a kernel feature is told within seconds, not after minutes of builds.
The checks are pure functions of a :class:`Host` (what the machine answers), so each one is
tested with a fake machine; :data:`THIS_HOST` asks the real one and changes nothing on it.

What each profile needs from the system's package manager is listed once, in
``debian-packages.txt`` beside this module (``scripts/system-packages`` installs it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from dralab.errors import UserError
from dralab_kit.gobuild.toolchain import MIN_GO, find_go

PACKAGES_FILE = "debian-packages.txt"


def debian_packages() -> dict[str, list[str]]:
    """Profile -> Debian packages, from the one list (comments and blank lines skipped)."""
    text = resources.files("dralab_kit.cluster").joinpath(PACKAGES_FILE).read_text()
    out: dict[str, list[str]] = {}
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        profile, _, names = line.partition(":")
        out[profile.strip()] = names.split()
    return out


def apt_line(packages: list[str]) -> str:
    return "apt-get install -y " + " ".join(packages)


@dataclass(frozen=True)
class Host:
    """What the checks ask of a machine; every field is a question with no side effect on it."""

    which: Callable[[str], str | None]
    exists: Callable[[str], bool]
    read_text: Callable[[str], str]
    euid: Callable[[], int]
    go_problem: Callable[[], str | None]  # None when a usable Go is found, else why not
    pkg_config_has: Callable[[str], bool]
    can_unshare_mount: Callable[[], bool]


@dataclass(frozen=True)
class Problem:
    """One missing piece: what is missing and the one thing that fixes it."""

    what: str
    fix: str

    def line(self) -> str:
        return f"{self.what}: {self.fix}"


def _go_problem() -> str | None:
    try:
        find_go(minimum=MIN_GO)
    except UserError as exc:
        return str(exc)
    return None


def _pkg_config_has(name: str) -> bool:
    try:
        return subprocess.run(["pkg-config", "--exists", name], timeout=10, check=False).returncode == 0
    except OSError:
        return False


def _can_unshare_mount() -> bool:
    """Whether this process may make a mount namespace (the real node's kubelet and containerd live in one)."""
    if not shutil.which("unshare"):
        return False
    try:
        proc = subprocess.run(["unshare", "--mount", "true"], capture_output=True, timeout=10, check=False)
    except OSError:
        return False
    return proc.returncode == 0


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


THIS_HOST = Host(
    which=shutil.which,
    exists=os.path.exists,
    read_text=_read,
    euid=os.geteuid,
    go_problem=_go_problem,
    pkg_config_has=_pkg_config_has,
    can_unshare_mount=_can_unshare_mount,
)


def check_build(host: Host, real_node: bool) -> list[Problem]:
    """What building the cluster binaries (and, with ``real_node``, the node's) needs."""
    packages = debian_packages()
    problems: list[Problem] = []
    go = host.go_problem()
    if go is not None:
        problems.append(Problem("Go", go))
    if host.which("gcc") is None:
        problems.append(Problem("gcc (vcore and cgo)", f"install it: {apt_line(['gcc'])}"))
    if real_node:
        node = packages["node"]
        if host.which("pkg-config") is None:
            problems.append(Problem("pkg-config (runc finds libseccomp through it)", f"install it: {apt_line(node)}"))
        elif not host.pkg_config_has("libseccomp"):
            problems.append(Problem("libseccomp (runc links it statically)", f"install it: {apt_line(node)}"))
        if host.which("busybox") is None:
            problems.append(Problem("busybox (the real node's lab image)", f"install it: {apt_line(node)}"))
    return problems


def check_node_host(host: Host) -> list[Problem]:
    """What running the real node (kubelet, containerd, runc) on this machine needs."""
    if host.euid() != 0:
        return [Problem("root", "the real node mounts, makes cgroups and network namespaces: run it as root")]
    problems = []
    if not host.can_unshare_mount():
        problems.append(Problem("mount namespaces", "`unshare --mount true` failed: run on a host (or a privileged "
                                "container) where root may create mount namespaces"))
    filesystems = host.read_text("/proc/filesystems")
    if "overlay" not in filesystems.split():
        problems.append(Problem("overlayfs (containerd's snapshotter)", "load it with `modprobe overlay`"))
    if not host.exists("/sys/fs/cgroup") or not (
        host.exists("/sys/fs/cgroup/cgroup.controllers") or host.exists("/sys/fs/cgroup/memory")
    ):
        problems.append(Problem("cgroups", "mount the cgroup filesystem at /sys/fs/cgroup (v1 or v2)"))
    return problems


def require(problems: list[Problem], doing: str) -> None:
    """Raise one UserError listing every problem, one line each, or return when there is none."""
    if problems:
        lines = "\n".join(f"  - {p.line()}" for p in problems)
        raise UserError(f"cannot {doing}; this machine lacks:\n{lines}")
