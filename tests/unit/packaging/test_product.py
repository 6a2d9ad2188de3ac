"""The product (what the image and the chart run) apart from the kit: its dependencies, its imports, its docstrings.

The product is ``dralab.model``, ``kube``, ``webhook``, ``driver``, ``monitor``, ``migrate`` and
``dralab.config``; the kit is what builds and tests it (``dralab_kit.cluster``, ``bench``, ``pulumi``,
``provision``, ``gobuild``, ``image`` and ``harness``).
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PRODUCT = ["dralab.model", "dralab.kube", "dralab.webhook", "dralab.driver", "dralab.monitor", "dralab.migrate"]
KIT = ["dralab_kit.cluster", "dralab_kit.bench", "dralab_kit.pulumi", "dralab_kit.provision", "dralab_kit.gobuild", "dralab_kit.image",
       "harness"]  # fmt: skip
# packages whose docstring lists every module (:mod:`.name`); every other package may name some
LISTED = [*PRODUCT, "dralab.driver.devices", "dralab_kit.cluster.node"]
MOD_REF = re.compile(r":mod:`([\w.]+)`")


def test_the_product_depends_on_no_test_provisioning_or_plotting_tool() -> None:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = [re.split(r"[<>=!~\[; ]", d, maxsplit=1)[0].lower() for d in deps]
    tooling = [n for n in names if n.startswith(("pytest", "pulumi", "ansible", "matplotlib"))]
    assert tooling == [], f"core dependencies of dralab hold tooling: {tooling} (move them to an extra)"


IMPORT_ALL = """
import importlib, json, pkgutil, sys
names = ["dralab.config"]
for pkg in json.loads(sys.argv[1]):
    names += [pkg] + [m.name for m in pkgutil.walk_packages(importlib.import_module(pkg).__path__, pkg + ".")]
for name in names:
    importlib.import_module(name)
print(json.dumps({"imported": names, "modules": sorted(sys.modules)}))
"""


def test_importing_the_product_imports_nothing_of_the_kit() -> None:
    out = subprocess.run([sys.executable, "-c", IMPORT_ALL, json.dumps(PRODUCT)], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    assert len(seen["imported"]) > 50  # every module of the product, not a package or two
    kit = [m for m in seen["modules"] if any(m == k or m.startswith(k + ".") for k in KIT)]
    assert kit == [], f"the product imports kit modules: {kit}"


def _packages() -> list[tuple[str, Path]]:
    out = []
    for init in sorted([*(ROOT / "dralab").rglob("__init__.py"), *(ROOT / "harness").rglob("__init__.py")]):
        folder = init.parent
        out.append((".".join(folder.relative_to(ROOT).parts), folder))
    return out


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
    folder = ROOT.joinpath(*package.split("."))
    missing = _children(folder) - _named(package, folder)
    assert not missing, f"{package}'s docstring does not name {sorted(missing)} (write :mod:`.name`: its job)"
