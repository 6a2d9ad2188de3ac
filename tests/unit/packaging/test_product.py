"""The product (what the image and the chart run) apart from the kit: two distributions, their imports, docstrings.

The product is the ``dralab`` distribution (the root pyproject.toml): ``dralab.model``, ``kube``,
``webhook``, ``driver``, ``monitor``, ``migrate``, ``dralab.config`` and the small shared modules at
``dralab/``'s top level. The kit is ``dralab-kit`` (kit/pyproject.toml), what builds and tests it:
``dralab_kit.cluster``, ``bench``, ``pulumi``, ``provision``, ``gobuild``, ``image``, ``harness`` and
the ``labs``. The kit depends on the product and adds its commands to ``dralab`` through entry
points; the product never imports the kit.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import click
import pytest

from dralab import cli as dralab_cli
from dralab import plugins

ROOT = Path(__file__).resolve().parents[3]
PRODUCT_PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
KIT_PROJECT = tomllib.loads((ROOT / "kit" / "pyproject.toml").read_text())
PRODUCT = ["dralab.model", "dralab.kube", "dralab.webhook", "dralab.driver", "dralab.monitor", "dralab.migrate"]
KIT = ["dralab_kit", "harness", "labs", "dralab_infra"]  # top-level packages of the kit (and its Pulumi program)
# where each top-level package lives in the checkout
SOURCES = {"dralab": ROOT, "dralab_kit": ROOT / "kit", "harness": ROOT / "kit"}
# packages whose docstring lists every module (:mod:`.name`); every other package may name some
LISTED = [*PRODUCT, "dralab.driver.devices", "dralab.webhook.controllers", "dralab_kit", "dralab_kit.cluster.node",
          "dralab_kit.faults", "dralab_kit.faults.scenarios", "dralab_kit.fuzz", "dralab_kit.fixtures"]
MOD_REF = re.compile(r":mod:`([\w.]+)`")
TOOLING = ("pytest", "pulumi", "ansible", "matplotlib")


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower()


def test_the_product_depends_on_no_test_provisioning_or_plotting_tool() -> None:
    project = PRODUCT_PROJECT["project"]
    requirements = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        requirements += extra
    tooling = [n for n in map(_name, requirements) if n.startswith(TOOLING)]
    assert tooling == [], f"dralab (its dependencies or extras) holds tooling: {tooling} (it belongs to the kit)"


def test_the_kit_is_a_distribution_of_its_own_that_depends_on_the_product() -> None:
    kit = KIT_PROJECT["project"]
    assert kit["name"] == "dralab-kit"
    assert "dralab" in [_name(d) for d in kit["dependencies"]]
    assert {"provision", "bench", "lab", "test"} <= set(kit["optional-dependencies"])
    assert "dralab-kit[provision,bench,lab]" in kit["optional-dependencies"]["test"]
    # the product's package discovery sees only dralab/: the kit is not under it any more
    assert PRODUCT_PROJECT["tool"]["setuptools"]["packages"]["find"]["include"] == ["dralab*"]
    assert not (ROOT / "harness").exists() and not (ROOT / "labs").exists()
    for moved in ("cluster", "bench", "pulumi", "provision", "gobuild", "image"):
        assert not (ROOT / "dralab" / moved).exists(), f"dralab/{moved} belongs to the kit (kit/dralab_kit/)"


def test_the_kit_brings_every_kit_command_and_the_product_none() -> None:
    entry_points = KIT_PROJECT["project"]["entry-points"]
    commands = entry_points[plugins.COMMANDS_GROUP]
    assert sorted(commands) == sorted(dralab_cli.KIT_COMMANDS)
    assert not set(commands) & set(dralab_cli.COMMANDS)
    assert "entry-points" not in PRODUCT_PROJECT["project"]
    for name, ref in commands.items():
        module, _, attr = ref.partition(":")
        assert isinstance(getattr(importlib.import_module(module), attr), click.Command), name
    assert set(entry_points[plugins.SCHEMAS_GROUP]) == {"profile", "lab", "infra"}


IMPORT_ALL = """
import importlib, json, pkgutil, sys
import dralab
names = ["dralab"] + [m.name for m in pkgutil.walk_packages(dralab.__path__, "dralab.")]
for name in names:
    importlib.import_module(name)
print(json.dumps({"imported": names, "modules": sorted(sys.modules)}))
"""


def test_importing_the_product_imports_nothing_of_the_kit() -> None:
    out = subprocess.run([sys.executable, "-c", IMPORT_ALL], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    assert len(seen["imported"]) > 50  # every module of the product, not a package or two
    assert set(PRODUCT) | {"dralab.cli", "dralab.config", "dralab.schema_cli", "dralab.versions"} <= set(
        seen["imported"]
    )
    kit = [m for m in seen["modules"] if any(m == k or m.startswith(k + ".") for k in KIT)]
    assert kit == [], f"the product imports kit modules: {kit}"


def test_the_product_names_no_kit_module_in_its_source() -> None:
    # a lazy import inside a function escapes the import test above; the source does not
    pattern = re.compile(r"^\s*(?:from|import)\s+(dralab_kit|harness|labs|dralab_infra)\b", re.M)
    found = [str(p.relative_to(ROOT)) for p in (ROOT / "dralab").rglob("*.py") if pattern.search(p.read_text())]
    assert found == [], f"product modules that import the kit: {found}"


def _without_the_kit(monkeypatch: pytest.MonkeyPatch) -> None:
    real = plugins.entry_refs
    monkeypatch.setattr(
        plugins, "entry_refs", lambda group: {} if group.startswith("dralab.") else real(group)
    )  # fmt: skip


@pytest.mark.parametrize("argv", [["cluster", "up"], ["lab", "list"], ["bench", "--help"], ["infra"], ["image"]])
def test_a_kit_command_without_the_kit_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    _without_the_kit(monkeypatch)
    with pytest.raises(SystemExit) as exit_info:
        dralab_cli.main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert f"`dralab {argv[0]}` is a command of the lab kit (dralab-kit)" in err
    assert "pip install dralab-kit" in err and "pip install -e ./kit" in err


def test_help_lists_kit_commands_only_where_the_kit_is_installed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def commands() -> set[str]:
        with pytest.raises(SystemExit) as exit_info:
            dralab_cli.main(["--help"])
        assert exit_info.value.code == 0
        text = capsys.readouterr().out.split("Commands:", 1)[1]
        return set(re.findall(r"^  (\S+)", text, re.M))  # a wrapped line goes on further in

    with_kit = commands()
    assert set(dralab_cli.KIT_COMMANDS) | set(dralab_cli.COMMANDS) <= with_kit
    _without_the_kit(monkeypatch)
    assert commands() == set(dralab_cli.COMMANDS)
    with pytest.raises(SystemExit) as exit_info:
        dralab_cli.main(["no-such-command"])
    assert exit_info.value.code == 2
    assert "No such command" in capsys.readouterr().err


def test_schema_offers_the_kits_formats_only_where_the_kit_is_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    from dralab import schema_cli

    assert {"config", "profile", "lab", "infra"} <= set(schema_cli.schemas())
    _without_the_kit(monkeypatch)
    assert set(schema_cli.schemas()) == {"config"}


def _packages() -> list[tuple[str, Path]]:
    out = []
    for top, base in SOURCES.items():
        for init in sorted((base / top).rglob("__init__.py")):
            folder = init.parent
            out.append((".".join(folder.relative_to(base).parts), folder))
    return out


def _folder(package: str) -> Path:
    return SOURCES[package.split(".")[0]].joinpath(*package.split("."))


def _children(folder: Path) -> set[str]:
    modules = {p.stem for p in folder.glob("*.py") if p.name != "__init__.py"}
    return modules | {d.name for d in folder.iterdir() if (d / "__init__.py").is_file()}


def _named(package: str, folder: Path) -> set[str]:
    """The package's own modules its docstring names (``:mod:`.name``` or ``:mod:`package.name```)."""
    doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text())) or ""
    out = set()
    for ref in MOD_REF.findall(doc):
        if ref.startswith("."):
            out.add(ref[1:].split(".")[0])
        elif ref.startswith(package + "."):
            out.add(ref.removeprefix(package + ".").split(".")[0])
    return out


@pytest.mark.parametrize(("package", "folder"), _packages(), ids=[p for p, _ in _packages()])
def test_a_package_docstring_names_no_module_that_is_gone(package: str, folder: Path) -> None:
    gone = _named(package, folder) - _children(folder)
    assert not gone, f"{package}'s docstring names modules it does not have: {sorted(gone)}"


@pytest.mark.parametrize("package", LISTED)
def test_a_listed_package_docstring_names_every_module(package: str) -> None:
    folder = _folder(package)
    missing = _children(folder) - _named(package, folder)
    assert not missing, f"{package}'s docstring does not name {sorted(missing)} (write :mod:`.name`: its job)"
