"""Chart test fixtures: a helm built from its Go module, and a renderer returning parsed objects.

The unit tier builds nothing from Go, so these tests use helm when `make tools` (which `make test`
and CI's chart job run first) has built it, and otherwise skip saying how to get it.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from dralab_kit.provision.chart import chart_dir

Render = Callable[..., list[dict[str, Any]]]


HELM_MISSING = (
    "needs helm built from its Go module, and the unit tier builds nothing from Go: "
    "run `make tools` once (minutes; `make test` and CI's chart job do), then these tests run"
)


@pytest.fixture(scope="session")
def helm() -> Path:
    """helm from dralab's cache when it is built and current; the test is skipped otherwise."""
    from dralab_kit.provision.tools import built_tool

    path = built_tool("helm")
    if path is None:
        if os.environ.get("DRALAB_REQUIRE_TOOLS"):  # CI's chart job: a skip there would hide the checks
            pytest.fail(f"DRALAB_REQUIRE_TOOLS is set but helm is not built: {HELM_MISSING}")
        pytest.skip(HELM_MISSING)
    return path


def run_helm(
    helm: Path, *args: str, values: dict[str, Any] | None = None, check: bool = True
) -> subprocess.CompletedProcess:
    cmd = [str(helm), *args]
    if values is not None:
        cmd += ["-f", "-"]
    return subprocess.run(
        cmd, input=yaml.safe_dump(values or {}), capture_output=True, text=True, check=check, timeout=120
    )


@pytest.fixture(scope="session")
def render(helm: Path) -> Render:
    """``render(values, namespace=..., release=...)``: the chart's objects as dicts, in output order."""

    def _render(values: dict[str, Any] | None = None, namespace: str = "dralab-system", release: str = "dralab"):
        out = run_helm(helm, "template", release, str(chart_dir()), "--namespace", namespace, values=values or {})
        return [doc for doc in yaml.safe_load_all(out.stdout) if doc]

    return _render
