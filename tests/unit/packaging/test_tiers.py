"""The unit tier builds nothing from Go: its tests may use helm or actionlint only when already built."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
# calls that build a Go program (or the Pulumi toolchain) when it is missing
BUILDING = re.compile(r"\b(ensure_helm|ensure_actionlint|ensure_tool|build_tools|missing_binaries)\(|\bbuild\.build\(")


def test_no_unit_test_triggers_a_go_build() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted((ROOT / "tests" / "unit").rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if BUILDING.search(line)
    ]
    assert offenders == [], "use dralab_kit.provision.tools.built_tool and skip, or move the test to tests/integration"


def test_readme_tier_table_says_how_unit_tests_get_their_tools() -> None:
    row = next(line for line in (ROOT / "README.md").read_text().splitlines() if line.startswith("| unit |"))
    assert "make tools" in row and "builds nothing from Go" in row, row
