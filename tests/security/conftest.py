"""Fixtures of the security tier: every test here replays one attack against a real component.

Shared by the SECURITY (webhook, vcore, chart, Pulumi) and DRIVER test files; cluster fixtures
come from ``tests/integration/conftest.py`` for the tests marked ``integration``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The checkout's root (charts, infra, vcore live under it)."""
    return REPO_ROOT
