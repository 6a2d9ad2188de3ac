"""Helpers for the harness tests: labs written into tmp_path and an in-memory environment."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.environment import Environment
from harness.profile import parse_profile
from harness.schema import Lab, load_lab
from harness.testing import FakeCluster

LabFactory = Callable[..., Lab]


@pytest.fixture
def write_lab(tmp_path: Path) -> LabFactory:
    """Write a lab (steps and optional manifests) into tmp_path and load it."""

    def make(steps: list[dict[str, Any]], files: dict[str, Any] | None = None, **top: Any) -> Lab:
        folder = tmp_path / "lab"
        folder.mkdir(exist_ok=True)
        for name, content in (files or {}).items():
            path = folder / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content if isinstance(content, str) else yaml.safe_dump(content))
        doc = {"apiVersion": "dralab.io/v1alpha1", "kind": "Lab", "name": "demo", "steps": steps, **top}
        (folder / "lab.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
        return load_lab(folder)

    return make


@pytest.fixture
def cluster() -> FakeCluster:
    return FakeCluster()


@pytest.fixture
def make_env(cluster: FakeCluster, tmp_path: Path) -> Callable[..., Environment]:
    def make(capabilities: tuple[str, ...] = ("node-files", "component-logs"), name: str = "memory") -> Environment:
        profile = parse_profile(
            {"name": name, "cluster": {"source": "memory"}, "capabilities": list(capabilities)}, "test"
        )
        logs = tmp_path / "logs"
        logs.mkdir(exist_ok=True)
        return Environment(
            profile=profile,
            client=cluster,
            capabilities=frozenset(capabilities),
            cluster_name="memory",
            node_root=lambda node: tmp_path / "nodes" / node,
            logs_dir=logs,
        )

    return make
