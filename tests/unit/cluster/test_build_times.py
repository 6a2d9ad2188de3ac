"""Build durations are recorded when a build really happens (never written as a constant)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from dralab_kit.gobuild import build_go_tools
from dralab_kit.gobuild.builder import build_times_path, module_versions, read_build_times
from tests.unit.cluster.test_gobuild import FAKE_GO

GO_MOD = b"""module example.com/wrapper

go 1.25

require (
\tgo.etcd.io/etcd/server/v3 v3.6.5
\tgolang.org/x/sys v0.30.0 // indirect
)

require sigs.k8s.io/kwok v0.7.0
"""


@pytest.fixture
def go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "go"
    path.write_text(FAKE_GO)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    counter = tmp_path / "count"
    counter.touch()
    monkeypatch.setenv("DRALAB_GO", str(path))
    monkeypatch.setenv("DRALAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("FAKE_GO_COUNT", str(counter))
    monkeypatch.delenv("FAKE_GO_FAIL", raising=False)
    return counter


def test_module_versions_come_from_the_wrappers_go_mod() -> None:
    assert module_versions(GO_MOD, ["go.etcd.io/etcd/server/v3"]) == {"go.etcd.io/etcd/server/v3": "v3.6.5"}
    assert module_versions(GO_MOD, ["sigs.k8s.io/kwok/cmd/kwok"]) == {"sigs.k8s.io/kwok": "v0.7.0"}
    assert module_versions(GO_MOD, ["k8s.io/other"]) == {}
    own_main = GO_MOD + b"\ntool sigs.k8s.io/kwok/cmd/kwok\n"  # a wrapper with its own main package
    assert module_versions(own_main, ["example.com/wrapper"]) == {"sigs.k8s.io/kwok": "v0.7.0"}


def test_a_real_build_records_its_duration_and_a_skipped_one_does_not(go: Path, tmp_path: Path) -> None:
    out = tmp_path / "bin"
    build_go_tools("etcd", {"etcd": "go.etcd.io/etcd/server/v3"}, out, progress=False)
    (record,) = read_build_times()
    assert record["wrapper"] == "etcd" and record["binaries"] == ["etcd"]
    assert record["go"] == "go1.26.1" and isinstance(record["seconds"], float) and record["seconds"] >= 0
    assert "go.etcd.io/etcd/server/v3" in record["modules"]
    assert record["finished"].endswith("Z")
    stamp = json.loads((out / ".stamps" / "etcd.json").read_text())
    assert stamp["build"] == record
    build_go_tools("etcd", {"etcd": "go.etcd.io/etcd/server/v3"}, out, progress=False)  # already built: skipped
    assert len(read_build_times()) == 1


def test_torn_lines_in_the_log_are_skipped(go: Path) -> None:
    path = build_times_path()
    path.parent.mkdir(parents=True)
    path.write_text('{"wrapper": "a", "seconds": 1.0}\n{"wrap\nnot json\n[1]\n')
    assert read_build_times() == [{"wrapper": "a", "seconds": 1.0}]
