"""Go build progress outside a terminal (a line at least every 30 s) and the one-build-per-wrapper lock.

Nothing is built: a shell script stands in for ``go``, and the heartbeat is driven by a scripted wait.
"""

from __future__ import annotations

import io
import stat
from pathlib import Path

import pytest

from dralab_kit.gobuild import build_go_tools
from dralab_kit.gobuild.builder import _Progress, built_paths

# A stand-in for `go`: prints what `go build -v` prints and writes the binary; it also reports
# whether the wrapper's build lock is free while it runs (flock -n fails on a held lock).
FAKE_GO = r"""#!/bin/sh
case "$1" in
  version) echo "go version go1.26.1 linux/amd64" ;;
  env) echo "https://proxy.example" ;;
  build)
    if flock -n "$DRALAB_CACHE/gobuild/etcd.lock" true; then echo free > "$LOCK_SEEN"; else echo held > "$LOCK_SEEN"; fi
    echo "go: downloading go.etcd.io/etcd/server/v3 v3.6.0"
    echo "go.etcd.io/etcd/server/v3"
    while [ $# -gt 0 ]; do case "$1" in -o) out="$2"; shift 2 ;; *) shift ;; esac; done
    printf '#!/bin/sh\n' > "$out/server"; chmod +x "$out/server" ;;
esac
"""


class NotATerminal(io.StringIO):
    def isatty(self) -> bool:
        return False


def scripted_wait(answers: list[bool], asked: list[float]):
    """An Event.wait stand-in: records the interval asked for, answers 'stopped?' from the script."""

    def wait(timeout: float) -> bool:
        asked.append(timeout)
        return answers.pop(0)

    return wait


def test_heartbeat_prints_the_counters_each_interval_until_the_build_ends() -> None:
    out = NotATerminal()
    progress = _Progress("building etcd", True, stream=out)
    progress.line("go: downloading go.etcd.io/etcd/server/v3 v3.6.0")
    progress.line("go.etcd.io/etcd/server/v3/etcdserver")
    progress.line("go.etcd.io/etcd/server/v3")
    asked: list[float] = []
    progress.heartbeat(scripted_wait([False, False, True], asked))
    lines = out.getvalue().splitlines()
    assert len(lines) == 2, lines
    assert all(line.startswith("building etcd: 1 modules downloaded, 2 packages compiled, ") for line in lines)
    assert asked == [progress.interval] * 3
    assert progress.interval <= 30


def test_outside_a_terminal_the_heartbeat_starts_and_stops_with_the_build() -> None:
    out = NotATerminal()
    with _Progress("building kwok", True, stream=out) as progress:
        assert progress._thread is not None and progress._thread.is_alive()
        progress.line("sigs.k8s.io/kwok/cmd/kwok")
    assert not progress._thread.is_alive()
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("building kwok: started")
    assert lines[-1].startswith("building kwok: 1 packages compiled, ") and lines[-1].endswith("go build ended")


def test_disabled_progress_prints_nothing() -> None:
    out = NotATerminal()
    with _Progress("building kwok", False, stream=out) as progress:
        progress.line("sigs.k8s.io/kwok/cmd/kwok")
    assert out.getvalue() == "" and progress._thread is None


@pytest.fixture
def fake_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    go = tmp_path / "go"
    go.write_text(FAKE_GO)
    go.chmod(go.stat().st_mode | stat.S_IEXEC)
    seen = tmp_path / "lock-seen"
    monkeypatch.setenv("DRALAB_GO", str(go))
    monkeypatch.setenv("DRALAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LOCK_SEEN", str(seen))
    return seen


def test_a_build_with_progress_in_a_log_says_what_it_did(fake_go: Path, tmp_path: Path, capsys) -> None:
    result = build_go_tools("etcd", {"etcd": "go.etcd.io/etcd/server/v3"}, tmp_path / "bin", progress=True)
    assert result.built == ["etcd"]
    err = capsys.readouterr().err  # captured by pytest: not a terminal
    assert "1 modules downloaded, 1 packages compiled" in err and "go build ended" in err


def test_go_build_runs_under_the_wrappers_lock(fake_go: Path, tmp_path: Path) -> None:
    build_go_tools("etcd", {"etcd": "go.etcd.io/etcd/server/v3"}, tmp_path / "bin", progress=False)
    assert fake_go.read_text().strip() == "held"


def test_built_paths_answers_without_building(fake_go: Path, tmp_path: Path) -> None:
    out = tmp_path / "bin"
    assert built_paths("etcd", {"etcd": "go.etcd.io/etcd/server/v3"}, out) is None
    assert not fake_go.exists(), "asking must not run go build"
    build_go_tools("etcd", {"etcd": "go.etcd.io/etcd/server/v3"}, out, progress=False)
    assert built_paths("etcd", {"etcd": "go.etcd.io/etcd/server/v3"}, out) == {"etcd": out / "etcd"}
    # another ldflags value is another binary: not built yet
    assert built_paths("etcd", {"etcd": "go.etcd.io/etcd/server/v3"}, out, "-X v=2") is None


def test_built_paths_without_go_is_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRALAB_GO", str(tmp_path / "no-such-go"))
    assert built_paths("etcd", {"etcd": "go.etcd.io/etcd/server/v3"}, tmp_path / "bin") is None
