"""The GitHub workflows: lint, unit, chart and quick-benchmark jobs beside the kind job, every action pinned by SHA,
and the CI entry point installing what the arm64 tests need. Static checks; actionlint runs in
test_image_and_workflow.py when it is built."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]
WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))
PINNED = re.compile(r"^\s*(?:-\s+)?uses:\s+[\w.-]+/[\w./-]+@[0-9a-f]{40} # v\d+(\.\d+)*\s*$")


def _jobs(name: str) -> dict:
    return yaml.safe_load((REPO / ".github" / "workflows" / name).read_text())["jobs"]


def test_every_action_is_pinned_by_full_commit_sha_with_its_release() -> None:
    uses = [
        (path.name, line)
        for path in WORKFLOWS
        for line in path.read_text().splitlines()
        if re.match(r"^\s*(-\s+)?uses:", line)
    ]
    assert uses, "no actions found"
    unpinned = [(name, line.strip()) for name, line in uses if not PINNED.match(line)]
    assert unpinned == []


def test_one_release_per_action() -> None:
    seen: dict[str, set[str]] = {}
    for path in WORKFLOWS:
        for action, sha in re.findall(r"uses:\s+([\w./-]+)@([0-9a-f]{40})", path.read_text()):
            seen.setdefault(action, set()).add(sha)
    assert {a: s for a, s in seen.items() if len(s) > 1} == {}


def test_lint_unit_chart_and_bench_jobs_run_the_projects_entry_points() -> None:
    jobs = _jobs("ci.yml")
    assert set(jobs) == {"lint", "unit", "chart", "bench-quick"}
    runs = {name: "\n".join(s.get("run", "") for s in job["steps"]) for name, job in jobs.items()}
    assert "make lint" in runs["lint"] and "test_workflows.py" in runs["lint"]
    assert ".ci/run unit" in runs["unit"]
    assert "make chart-tools" in runs["chart"] and "tests/unit/chart" in runs["chart"]
    assert ".ci/run bench-quick" in runs["bench-quick"]
    uploads = [s["with"]["path"] for s in jobs["bench-quick"]["steps"] if "upload-artifact" in s.get("uses", "")]
    assert uploads == ["reports/bench-quick/"], "the quick results must be kept as an artifact"
    # where helm/actionlint are built, a missing tool fails the job instead of skipping the checks
    for name in ("lint", "chart"):
        assert any(s.get("env", {}).get("DRALAB_REQUIRE_TOOLS") == "1" for s in jobs[name]["steps"]), name
    assert "e2e-kind" in _jobs("e2e-kind.yml")


def test_make_test_installs_the_arm64_cross_toolchain_and_qemu() -> None:
    """CI runs `make test`, whose `test` profile of the one package list brings the arm64 tools."""
    from dralab_kit.cluster.preflight import debian_packages

    assert {"gcc-aarch64-linux-gnu", "libc6-dev-arm64-cross", "qemu-user"} <= set(debian_packages()["test"])
    assert "scripts/system-packages local node chart test" in (REPO / "Makefile").read_text()
    # what tests/unit/vcore/test_arm64.py needs to run instead of skipping
    gate = (REPO / "tests" / "unit" / "vcore" / "test_arm64.py").read_text()
    assert '"aarch64-linux-gnu-gcc"' in gate and '"qemu-aarch64"' in gate


def test_kind_job_uses_the_helm_version_dralab_builds() -> None:
    steps = {s["name"]: s for s in _jobs("e2e-kind.yml")["e2e-kind"]["steps"]}
    helm = next(s for s in steps.values() if s.get("uses", "").startswith("azure/setup-helm@"))
    assert helm["with"]["version"] == "${{ steps.kind.outputs.helm_version }}"
    assert "HELM_VERSION" in steps["Generate the kind config"]["run"]


def test_ci_entry_records_the_quick_benchmarks_where_the_workflow_uploads_them() -> None:
    text = (REPO / ".ci" / "run").read_text()
    assert "set -- test bench-quick" in text, "a bare .ci/run runs the tests, then records the quick benchmarks"
    makefile = (REPO / "Makefile").read_text()
    out = re.search(r"^BENCH_QUICK_OUT \?= (\S+)$", makefile, re.M)
    assert out is not None and out[1] == "reports/bench-quick"
    recipe = makefile.split("\nbench-quick:", 1)[1].split("\n\n", 1)[0]
    assert "--quick --out $(BENCH_QUICK_OUT)" in recipe and "bench report --results $(BENCH_QUICK_OUT)" in recipe
