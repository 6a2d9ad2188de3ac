"""pytest plugin entry point of the harness."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("dralab", "dralab lab harness")
    group.addoption("--profile", default="local", help="cluster profile: local, kind, ascend-310p, nvidia, or a file")
    group.addoption("--kubeconfig", default=None, help="use an existing cluster instead of bringing one up")
