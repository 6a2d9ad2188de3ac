"""The pytest plugin: a lab becomes ordered step items; failures, skips and reports behave."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

OBJECTS = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "seed", "namespace": "default"},
            "data": {"k": "v"}},
           {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}]  # fmt: skip


class Recorder:
    """Collects the test reports of an in-process pytest run."""

    def __init__(self) -> None:
        self.reports: list[pytest.TestReport] = []
        self.collected: list[str] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" or report.outcome != "passed":
            self.reports.append(report)

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        self.collected = [i.nodeid for i in items]
        self.markers = {i.name: sorted(m.name for m in i.iter_markers()) for i in items}


def _setup(tmp_path: Path, steps: list[dict]) -> tuple[Path, Path]:
    (tmp_path / "objects.yaml").write_text(yaml.safe_dump_all([OBJECTS[1], OBJECTS[0]]))
    profile = tmp_path / "memory.yaml"
    profile.write_text(yaml.safe_dump({"name": "memory", "cluster": {"source": "memory", "objects": "objects.yaml"}}))
    lab_dir = tmp_path / "mylab"
    lab_dir.mkdir()
    doc = {"apiVersion": "dralab.io/v1alpha1", "kind": "Lab", "name": "mylab", "title": "My lab",
           "proved": [{"id": "p", "claim": "the seed is there", "evidence": "k=v"}], "catch": [{"events": {}}],
           "steps": steps}  # fmt: skip
    (lab_dir / "lab.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return lab_dir, profile


def _ini(tmp_path: Path) -> Path:
    ini = tmp_path / "pytest.ini"
    ini.write_text("[pytest]\n")
    return ini


def _run(tmp_path: Path, steps: list[dict], *extra: str) -> tuple[int, Recorder, Path]:
    lab_dir, profile = _setup(tmp_path, steps)
    recorder = Recorder()
    reports = tmp_path / "reports"
    code = pytest.main(
        [str(lab_dir), "-p", "harness.plugin", "--profile", str(profile), "--reports-dir", str(reports),
         "--run-id", "r1", "-p", "no:cacheprovider", "-q", "--rootdir", str(tmp_path), "-c", str(_ini(tmp_path)),
         *extra],
        plugins=[recorder],
    )  # fmt: skip
    return int(code), recorder, reports / "r1"


SEED = {"assert": {"resource": {"kind": "ConfigMap", "name": "seed", "namespace": "default"},
                   "match": {"data": {"k": "v"}}}, "evidence": "seed found"}  # fmt: skip
BAD = {"assert": {"resource": {"kind": "ConfigMap", "name": "seed", "namespace": "default"},
                  "match": {"data": {"k": "nope"}}}, "timeout": 0.1}  # fmt: skip


def test_steps_are_items_in_order_and_a_failure_skips_the_rest(tmp_path: Path) -> None:
    steps = [{"id": "one", "proves": ["p"], "try": [SEED]}, {"id": "two", "try": [BAD]},
             {"id": "three", "try": [SEED]}]  # fmt: skip
    code, rec, run = _run(tmp_path, steps)
    assert code == 1
    assert [n.split("::")[-1] for n in rec.collected] == ["01-one", "02-two", "03-three"]
    assert "e2e" in rec.markers["01-one"]
    outcomes = [(r.nodeid.split("::")[-1], r.outcome) for r in rec.reports]
    assert outcomes == [("01-one", "passed"), ("02-two", "failed"), ("03-three", "skipped")]
    failed = rec.reports[1]
    assert 'data.k: expected "nope", got "v"' in failed.longreprtext
    assert "--- events:" in failed.longreprtext  # the lab's catch collectors ran
    skipped = rec.reports[2]
    assert "step 'two' failed earlier" in skipped.longrepr[2]
    md = (run / "report.md").read_text()
    assert "### What This Lab Proved" in md and "| the seed is there | k=v | ✅ passed | **seed found**" in md
    html = (run / "report.html").read_text()
    assert "<h3>What This Lab Proved</h3>" in html
    cases = ET.parse(run / "junit.xml").getroot().findall(".//testcase")
    assert [c.get("name") for c in cases] == ["01-one", "02-two", "03-three"]
    assert cases[1].find("failure") is not None and cases[2].find("skipped") is not None
    assert (tmp_path / "reports" / "latest").resolve() == run.resolve()


def test_a_green_lab_exits_zero(tmp_path: Path) -> None:
    code, _rec, run = _run(tmp_path, [{"id": "one", "try": [SEED]}])
    assert code == 0
    assert "✅ passed" in (run / "report.md").read_text()


def test_unknown_profile_fails_the_first_step_and_skips_the_others(tmp_path: Path) -> None:
    lab_dir, _ = _setup(tmp_path, [{"id": "one", "try": [SEED]}, {"id": "two", "try": [SEED]}])
    recorder = Recorder()
    code = pytest.main([str(lab_dir), "-p", "harness.plugin", "--profile", "no-such-profile", "--reports-dir",
                        str(tmp_path / "r"), "-p", "no:cacheprovider", "-q", "--rootdir", str(tmp_path),
                        "-c", str(_ini(tmp_path))],
                       plugins=[recorder])  # fmt: skip
    assert code == 1
    first, second = recorder.reports
    assert first.outcome == "failed" and "unknown profile 'no-such-profile'" in first.longreprtext
    assert second.outcome == "skipped" and "could not start" in second.longrepr[2]


def test_lab_steps_share_an_xdist_scope_and_other_tests_do_not() -> None:
    from harness.plugin import lab_scope

    assert lab_scope("tests/e2e/labs.yaml::lab20-ascend-hami-dra::01-components") == (
        "tests/e2e/labs.yaml::lab20-ascend-hami-dra"
    )
    assert lab_scope("labs/nvidia-gpu-share/lab.yaml::nvidia-gpu-share::03-exhaust") == (
        "labs/nvidia-gpu-share/lab.yaml::nvidia-gpu-share"
    )
    assert lab_scope("tests/unit/harness/test_cdi.py::test_x") is None
    assert lab_scope("tests/unit/test_a.py::TestLab::test_b") is None


def test_xdist_scheduler_groups_lab_steps() -> None:
    pytest.importorskip("xdist")
    from types import SimpleNamespace

    from harness.plugin import pytest_xdist_make_scheduler

    config = SimpleNamespace(getvalue=lambda name: "load", option=SimpleNamespace(dist="load", tx=["popen"] * 2,
                             numprocesses=2, maxschedchunk=None), getoption=lambda *a, **k: None)  # fmt: skip
    sched = pytest_xdist_make_scheduler(config, log=None)  # type: ignore[arg-type]
    assert sched._split_scope("tests/e2e/labs.yaml::lab20::02-first") == "tests/e2e/labs.yaml::lab20"
    assert sched._split_scope("tests/unit/x.py::test_a") == "tests/unit/x.py::test_a"
    none = SimpleNamespace(getvalue=lambda name: "each")
    assert pytest_xdist_make_scheduler(none, log=None) is None  # type: ignore[arg-type]
