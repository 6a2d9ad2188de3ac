"""Packaging: the kit's extras split by job, the harness plugin loaded only where asked, bounds on generated code."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

from dralab.cli import main
from dralab.extras import MODULE_EXTRAS, missing_extra

ROOT = Path(__file__).resolve().parents[3]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
KIT = tomllib.loads((ROOT / "kit" / "pyproject.toml").read_text())["project"]
EXTRAS: dict[str, list[str]] = KIT["optional-dependencies"]
PYPROJECTS = {"dralab": PROJECT, "dralab-kit": KIT}


def names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower() for r in requirements}


def test_each_job_has_its_own_extra() -> None:
    assert {"pulumi", "pulumi-kubernetes", "ansible-runner", "ansible-core"} <= names(EXTRAS["provision"])
    assert {"matplotlib", "hypothesis"} <= names(EXTRAS["bench"])
    assert {"pytest-xdist", "pytest-testinfra", "ruff"} <= names(EXTRAS["test"])
    assert names(EXTRAS["lab"]) == {"pytest"}
    # the tests exercise provisioning, the benchmarks and lab replays, so `./kit[test]` brings those extras along
    assert "dralab-kit[provision,bench,lab]" in EXTRAS["test"]
    # nothing of provisioning, plotting, testing or linting in what `pip install dralab` (and the image) installs
    assert not names(PROJECT["dependencies"]) & {"pulumi", "ansible-core", "matplotlib", "ruff", "pytest"}


def test_every_mapped_extra_exists() -> None:
    for distribution, extra in set(MODULE_EXTRAS.values()):
        project = PYPROJECTS[distribution]
        assert project["name"] == distribution
        assert extra is None or extra in project["optional-dependencies"], (distribution, extra)


def test_kubernetes_is_bounded_above_because_its_generated_internals_are_used() -> None:
    (kube,) = [r for r in PROJECT["dependencies"] if r.startswith("kubernetes")]
    assert "<" in kube, kube
    assert metadata.version("kubernetes").split(".")[0] == re.search(r">=(\d+)", kube)[1]  # type: ignore[index]


def test_the_harness_is_no_pytest11_plugin() -> None:
    # an entry point would load the harness (and its options) into every pytest run where dralab is installed
    assert "pytest11" not in PROJECT.get("entry-points", {})
    assert "pytest11" not in KIT.get("entry-points", {})
    installed = {ep.value for ep in metadata.entry_points(group="pytest11")}
    assert "harness.plugin" not in installed, "an older install of dralab registered it: pip install -e . -e ./kit"


def _pytest_help(cwd: Path, *args: str, autoload: bool = False) -> str:
    """``pytest --help`` in ``cwd``; only the plugins named in ``args`` unless ``autoload`` (every installed one)."""
    env = {**os.environ, "PYTHONPATH": str(cwd), "COLUMNS": "200"}
    env.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
    if not autoload:
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args, "--help"],
        cwd=cwd, capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def test_pytest_outside_the_checkout_loads_the_plugin_only_when_asked(tmp_path: Path) -> None:
    assert "--dralab-profile" not in _pytest_help(tmp_path, autoload=True)
    asked = _pytest_help(tmp_path, "-p", "harness.plugin")
    assert "--dralab-profile=DRALAB_PROFILE, --profile=DRALAB_PROFILE" in asked
    assert "--dralab-kubernetes=VERSION, --kubernetes=VERSION" in asked


@pytest.mark.parametrize("order", ["harness first", "other first"])
def test_an_alias_another_plugin_defines_is_left_to_it(tmp_path: Path, order: str) -> None:
    (tmp_path / "other_profiler.py").write_text(
        "def pytest_addoption(parser):\n"
        "    parser.getgroup('other').addoption('--profile', action='store_true', help='the other plugin')\n"
    )
    plugins = ["-p", "harness.plugin", "-p", "other_profiler"]
    text = _pytest_help(tmp_path, *(plugins if order == "harness first" else plugins[2:] + plugins[:2]))
    assert "--dralab-profile=DRALAB_PROFILE" in text and "--profile=DRALAB_PROFILE" not in text
    assert re.search(r"--profile\s+the other plugin", text)
    assert "--dralab-kubernetes=VERSION, --kubernetes=VERSION" in text


def test_the_checkouts_conftest_does_not_register_the_plugin_twice() -> None:
    # the root conftest names harness.plugin as well; a second registration would be a ValueError
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:xdist", "tests/unit/model/test_naming.py"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_missing_extra_is_named_with_its_install_line() -> None:
    err = missing_extra(ModuleNotFoundError("No module named 'pulumi.runtime'", name="pulumi.runtime"))
    assert err is not None
    assert "pip install 'dralab-kit[provision]'" in str(err)
    assert "from a checkout: pip install -e './kit[provision]'" in str(err)
    nvidia = missing_extra(ModuleNotFoundError("No module named 'pynvml'", name="pynvml"))
    assert nvidia is not None and "pip install 'dralab[nvidia]'" in str(nvidia)
    assert missing_extra(ModuleNotFoundError("x", name="no_such_module")) is None


def test_cli_says_which_extra_a_benchmark_needs(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    for module in [m for m in sys.modules if m == "dralab_kit.bench.fuzz" or m.startswith("dralab_kit.fuzz")]:
        monkeypatch.delitem(sys.modules, module)  # imported afresh, so the missing hypothesis is seen
    monkeypatch.setitem(sys.modules, "hypothesis", None)  # import hypothesis -> ModuleNotFoundError
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "fuzz", "--help"])
    assert exit_info.value.code == 2
    assert "pip install 'dralab-kit[bench]'" in capsys.readouterr().err


def test_lab_run_without_pytest_names_the_lab_extra(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setitem(sys.modules, "pytest", None)  # import pytest -> ModuleNotFoundError
    with pytest.raises(SystemExit) as exit_info:
        main(["lab", "run", "lab20-ascend-hami-dra"])
    assert exit_info.value.code == 2
    assert "pip install 'dralab-kit[lab]'" in capsys.readouterr().err
