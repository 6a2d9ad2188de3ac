"""A test run brings down the clusters it started, also when a test fails or the run is interrupted.

Each case runs pytest in a new process with the project's root ``conftest.py`` and its own
``DRALAB_HOME`` (a temp folder), starts a real local cluster there from a test, then fails or
interrupts; afterwards no cluster state and no process of that home may be left.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dralab_kit.cluster.api import ensure_cluster, list_clusters

from .processes import processes_naming

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[3]

ENDINGS = {
    "fails": "assert False, 'a failing test'",
    "interrupted": "raise KeyboardInterrupt",
}


@pytest.mark.parametrize("ending", sorted(ENDINGS))
def test_clusters_started_by_a_run_are_down_after_it(tmp_path: Path, ending: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    suite = tmp_path / "suite"
    suite.mkdir()
    shutil.copy(ROOT / "conftest.py", suite / "conftest.py")
    (suite / "pytest.ini").write_text("[pytest]\n")
    (suite / "test_probe.py").write_text(
        "from dralab_kit.cluster.api import ensure_cluster\n\n\n"
        "def test_brings_a_cluster_up_then_ends_badly():\n"
        "    ensure_cluster('probe')\n"
        f"    {ENDINGS[ending]}\n"
    )
    # a cluster that is up before the run is the developer's: it must stay
    monkeypatch.setenv("DRALAB_HOME", str(home))
    ensure_cluster("kept")
    env = {**os.environ, "DRALAB_HOME": str(home)}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", str(suite / "pytest.ini"),
         "--rootdir", str(suite), str(suite / "test_probe.py")],
        cwd=suite, env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    assert proc.returncode in (1, 2), proc.stdout[-2000:] + proc.stderr[-2000:]  # failed / interrupted
    try:
        assert list_clusters() == ["kept"]
        probe_root = home / "clusters" / "probe"
        assert processes_naming(str(probe_root)) == []
    finally:
        from dralab_kit.cluster.api import down

        down("kept", keep_logs=False)
    assert processes_naming(str(home)) == []
