"""Chart test fixtures: a helm built from its Go module, and a renderer returning parsed objects."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from dralab.provision.chart import chart_dir

Render = Callable[..., list[dict[str, Any]]]


@pytest.fixture(scope="session")
def helm() -> Path:
    """helm, built once per machine into dralab's cache (seconds when cached, minutes the first time)."""
    from dralab.provision.tools import ensure_helm

    return ensure_helm()


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
