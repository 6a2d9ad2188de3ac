"""System packages have one source: the list beside the preflight, used by make, CI and the README."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from dralab_kit.cluster.preflight import debian_packages

ROOT = Path(__file__).resolve().parents[3]
LIST = "kit/dralab_kit/cluster/debian-packages.txt"


def test_ci_installs_no_package_of_its_own() -> None:
    """.ci/run goes through make, so CI installs exactly what a developer's make installs."""
    ci = (ROOT / ".ci" / "run").read_text()
    code = "\n".join(line for line in ci.splitlines() if not line.lstrip().startswith("#"))
    assert "apt-get" not in code and "dpkg" not in code
    assert re.search(r"^make \"\$@\"$", code, re.M)


def test_workflows_install_no_debian_package_by_hand() -> None:
    for workflow in (ROOT / ".github" / "workflows").glob("*.yml"):
        assert "apt-get install" not in workflow.read_text(), workflow.name


def make_deps(makefile: str) -> dict[str, list[str]]:
    """Each plain target of the Makefile and its prerequisites."""
    return {m[1]: m[2].split() for m in re.finditer(r"^([a-z][a-z-]*):(?!=)([^\n]*)$", makefile, re.M)}


def test_make_targets_install_their_profiles_packages_before_building() -> None:
    makefile = (ROOT / "Makefile").read_text()
    deps = make_deps(makefile)
    assert deps["lab"][0] == "system-local" and "binaries-local" in deps["lab"] and "binaries" not in deps["lab"]
    assert deps["test"][0] == "system-test" and "binaries" in deps["test"]
    assert "system-node" in deps["binaries"]
    assert "system-local" in deps["vcore"] and "system-local" in deps["binaries-local"]
    for profile in debian_packages():
        assert f"system-{profile}" in deps


def test_the_readme_names_the_list() -> None:
    readme = (ROOT / "README.md").read_text()
    assert LIST in readme and "scripts/system-packages" in readme


def test_the_local_profile_needs_no_runc_dependency() -> None:
    packages = debian_packages()
    assert "libseccomp-dev" not in packages["local"] and "libseccomp-dev" in packages["node"]


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="the script checks packages with dpkg-query")
def test_the_script_names_the_apt_line_when_it_may_not_install(tmp_path: Path) -> None:
    """A package that is surely missing: the script stops with the exact apt-get line, installing nothing."""
    fake_root = tmp_path / "repo"
    (fake_root / "scripts").mkdir(parents=True)
    (fake_root / "kit" / "dralab_kit" / "cluster").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "system-packages", fake_root / "scripts" / "system-packages")
    (fake_root / LIST).write_text("demo: dralab-no-such-package-xyz  # never installed\n")
    env = {**os.environ, "DRALAB_NO_APT": "1"}
    proc = subprocess.run(
        ["bash", str(fake_root / "scripts" / "system-packages"), "demo"], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 1
    assert "sudo apt-get install -y dralab-no-such-package-xyz" in proc.stderr
    unknown = subprocess.run(["bash", str(fake_root / "scripts" / "system-packages"), "nope"],
                             capture_output=True, text=True, env=env)
    assert unknown.returncode == 2 and "no profile 'nope'" in unknown.stderr
