"""The generic Go builder: version checks, error messages, skip-if-built, with a fake ``go``."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from dralab.errors import UserError
from dralab_kit.gobuild import build_go_tools, wrapper_names
from dralab_kit.gobuild.builder import exec_name, is_built, normalize_packages, stamp_key
from dralab_kit.gobuild.toolchain import (
    check_version,
    explain_failure,
    is_error_line,
    looks_like_proxy_failure,
    parse_go_version,
)

FAKE_GO = r"""#!/bin/sh
case "$1" in
  version) echo "go version ${FAKE_GO_VERSION:-go1.26.1} linux/amd64" ;;
  env) echo "https://proxy.example" ;;
  build)
    echo build >> "$FAKE_GO_COUNT"
    if [ -n "$FAKE_GO_FAIL" ]; then echo "go: downloading x"; echo "$FAKE_GO_FAIL"; exit 1; fi
    shift; out=""; pkgs=""
    while [ $# -gt 0 ]; do
      case "$1" in
        -o) out="$2"; shift 2 ;;
        -ldflags) echo "$2" > "$FAKE_GO_COUNT.ldflags"; shift 2 ;;
        -*) shift ;;
        *) pkgs="$pkgs $1"; shift ;;
      esac
    done
    for p in $pkgs; do
      name=$(basename "$p")
      case "$name" in v[0-9]*) name=$(basename "$(dirname "$p")") ;; esac
      echo "$p"
      printf '#!/bin/sh\necho %s\n' "$name" > "$out/$name"
      chmod +x "$out/$name"
    done ;;
esac
"""


@pytest.fixture
def fake_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    go = tmp_path / "go"
    go.write_text(FAKE_GO)
    go.chmod(go.stat().st_mode | stat.S_IEXEC)
    counter = tmp_path / "count"
    counter.touch()
    monkeypatch.setenv("DRALAB_GO", str(go))
    monkeypatch.setenv("DRALAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("FAKE_GO_COUNT", str(counter))
    monkeypatch.delenv("FAKE_GO_FAIL", raising=False)
    return counter


def _builds(counter: Path) -> int:
    return len(counter.read_text().split())


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("go version go1.26.8 linux/amd64", (1, 26, 8)),
        ("go version go1.25 linux/arm64", (1, 25, 0)),
        ("go version go1.25rc1 linux/amd64", (1, 25, 0)),
        ("bash: go: command not found", None),
    ],
)
def test_parse_go_version(text, version):
    assert parse_go_version(text) == version


def test_check_version():
    check_version((1, 25, 0), "go")
    check_version((1, 26, 3), "go")
    with pytest.raises(UserError, match=r"Go 1\.24\.7, but Go >= 1\.25 is needed"):
        check_version((1, 24, 7), "go")
    with pytest.raises(UserError, match="could not read the version"):
        check_version(None, "go")


def test_proxy_failures_are_explained():
    out = 'go: k8s.io/api@v0.35.4: Get "https://proxy.golang.org/...": dial tcp: lookup proxy.golang.org: no such host'
    assert looks_like_proxy_failure(out)
    msg = explain_failure(out, "go build of etcd", "https://proxy.golang.org")
    assert "module proxy is not reachable" in msg and "GOPROXY=https://proxy.golang.org" in msg
    assert "\n" not in msg
    assert looks_like_proxy_failure("module lookup disabled by GOPROXY=off")
    other = explain_failure("a.go:1: syntax error\n", "go build of x", "off")
    assert other == "go build of x failed:\n  a.go:1: syntax error"


def test_exec_name_and_packages():
    assert exec_name("k8s.io/kubernetes/cmd/kube-apiserver") == "kube-apiserver"
    assert exec_name("go.etcd.io/etcd/server/v3") == "server"
    assert normalize_packages(["a/cmd/x", "b/cmd/y"]) == {"x": "a/cmd/x", "y": "b/cmd/y"}
    assert normalize_packages({"etcd": "go.etcd.io/etcd/server/v3"}) == {"etcd": "go.etcd.io/etcd/server/v3"}
    with pytest.raises(UserError, match="same name"):
        normalize_packages(["a/cmd/x", "b/cmd/x"])
    with pytest.raises(UserError, match="no Go packages"):
        normalize_packages([])


def test_stamp_key_depends_on_every_input():
    base = stamp_key(b"mod", b"sum", "pkg", "-X a=b", "go1.26.1", {"CGO_ENABLED": "0"})
    assert base == stamp_key(b"mod", b"sum", "pkg", "-X a=b", "go1.26.1", {"CGO_ENABLED": "0"})
    variants = [
        stamp_key(b"mod2", b"sum", "pkg", "-X a=b", "go1.26.1", {"CGO_ENABLED": "0"}),
        stamp_key(b"mod", b"sum2", "pkg", "-X a=b", "go1.26.1", {"CGO_ENABLED": "0"}),
        stamp_key(b"mod", b"sum", "pkg2", "-X a=b", "go1.26.1", {"CGO_ENABLED": "0"}),
        stamp_key(b"mod", b"sum", "pkg", "-X a=c", "go1.26.1", {"CGO_ENABLED": "0"}),
        stamp_key(b"mod", b"sum", "pkg", "-X a=b", "go1.26.2", {"CGO_ENABLED": "0"}),
        stamp_key(b"mod", b"sum", "pkg", "-X a=b", "go1.26.1", {"CGO_ENABLED": "1"}),
    ]
    assert base not in variants and len(set(variants)) == len(variants)


def test_shipped_wrappers_have_go_mod_and_sum():
    names = wrapper_names()
    assert {"kubernetes", "etcd", "kwok"} <= set(names)
    root = Path(__file__).resolve().parents[3] / "kit" / "dralab_kit" / "gobuild" / "wrappers"
    k8s = (root / "kubernetes" / "go.mod").read_text()
    assert "k8s.io/kubernetes v1.35." in k8s
    for staging in ("api", "apimachinery", "client-go", "dynamic-resource-allocation", "kubelet", "kube-scheduler"):
        assert f"k8s.io/{staging} => k8s.io/{staging} v0.35." in k8s, staging
    assert "go.etcd.io/etcd/server/v3 v3.6." in (root / "etcd" / "go.mod").read_text()
    assert "sigs.k8s.io/kwok v0." in (root / "kwok" / "go.mod").read_text()
    for name in ("kubernetes", "etcd", "kwok"):
        assert (root / name / "go.sum").stat().st_size > 0


def test_builds_then_skips_then_rebuilds_on_change(fake_go, tmp_path):
    out = tmp_path / "bin"
    first = build_go_tools("etcd", {"etcd": "go.etcd.io/etcd/server/v3"}, out, "-X v=1", progress=False)
    assert first.built == ["etcd"] and first.skipped == []
    assert os.access(out / "etcd", os.X_OK)
    assert "-X v=1" in (Path(str(fake_go) + ".ldflags")).read_text()
    assert _builds(fake_go) == 1

    second = build_go_tools("etcd", {"etcd": "go.etcd.io/etcd/server/v3"}, out, "-X v=1", progress=False)
    assert second.built == [] and second.skipped == ["etcd"]
    assert _builds(fake_go) == 1, "an already built binary must not be rebuilt"

    third = build_go_tools("etcd", {"etcd": "go.etcd.io/etcd/server/v3"}, out, "-X v=2", progress=False)
    assert third.built == ["etcd"]
    forced = build_go_tools("etcd", {"etcd": "go.etcd.io/etcd/server/v3"}, out, "-X v=2", force=True, progress=False)
    assert forced.built == ["etcd"]
    assert _builds(fake_go) == 3
    assert not [p for p in out.iterdir() if p.name.startswith(".build-")], "temp build dirs are cleaned up"


def test_missing_binary_is_rebuilt(fake_go, tmp_path):
    out = tmp_path / "bin"
    result = build_go_tools("kwok", ["sigs.k8s.io/kwok/cmd/kwok"], out, progress=False)
    key = result.paths["kwok"]
    key.unlink()
    assert not is_built(out, "kwok", "anything")
    again = build_go_tools("kwok", ["sigs.k8s.io/kwok/cmd/kwok"], out, progress=False)
    assert again.built == ["kwok"]


def test_go_missing_is_a_user_error(monkeypatch, tmp_path):
    monkeypatch.setenv("DRALAB_GO", str(tmp_path / "no-such-go"))
    monkeypatch.setenv("DRALAB_CACHE", str(tmp_path / "cache"))
    with pytest.raises(UserError, match=r"Go toolchain was not found; install Go >= 1\.25"):
        build_go_tools("etcd", {"etcd": "go.etcd.io/etcd/server/v3"}, tmp_path / "bin", progress=False)


def test_old_go_is_a_user_error(fake_go, monkeypatch, tmp_path):
    monkeypatch.setenv("FAKE_GO_VERSION", "go1.24.3")
    with pytest.raises(UserError, match=r"Go 1\.24\.3, but Go >= 1\.25 is needed"):
        build_go_tools("etcd", {"etcd": "go.etcd.io/etcd/server/v3"}, tmp_path / "bin", progress=False)
    assert _builds(fake_go) == 0


def test_unreachable_proxy_is_a_user_error(fake_go, monkeypatch, tmp_path):
    monkeypatch.setenv("FAKE_GO_FAIL", "go: example.com/m@v1: dial tcp 10.0.0.1:443: connect: connection refused")
    with pytest.raises(UserError, match="module proxy is not reachable") as info:
        build_go_tools("etcd", {"etcd": "go.etcd.io/etcd/server/v3"}, tmp_path / "bin", progress=False)
    assert "GOPROXY=https://proxy.example" in str(info.value)
    assert not (tmp_path / "bin" / "etcd").exists()


def test_unknown_wrapper_is_a_user_error(fake_go, tmp_path):
    with pytest.raises(UserError, match="no Go wrapper module named 'nope'"):
        build_go_tools("nope", ["x/cmd/y"], tmp_path / "bin", progress=False)


# Recorded ``go build -v`` logs (tests/unit/cluster/fixtures/build-logs, recordings made on this
# kind of machine; only the cache path and the proxy's host are replaced): the message shows the
# first error lines, never the last downloaded package, and a hint where the cause is known.
LOGS = Path(__file__).parent / "fixtures" / "build-logs"


def _explain(name: str) -> str:
    body = (LOGS / name).read_text().split("\n", 1)[1]  # the first line is the command dralab ran
    return explain_failure(body, "go build of x (log: /tmp/x.log)", "https://goproxy.invalid")


def test_runc_without_libseccomp_shows_the_pkg_config_line_and_the_package_to_install() -> None:
    msg = _explain("runc-without-libseccomp.log")
    assert "Package libseccomp was not found in the pkg-config search path." in msg
    assert "github.com/urfave/cli" not in msg  # the last line of the log: a package name, not the cause
    assert "hint:" in msg and "apt-get install -y libseccomp-dev pkg-config" in msg
    assert "(log: /tmp/x.log)" in msg


def test_a_compile_error_shows_its_file_lines_and_no_hint() -> None:
    msg = _explain("compile-error.log")
    assert msg.splitlines()[1:] == [
        "  # example.com/broken",
        "  ./main.go:6:14: undefined: undefinedName",
        "  ./main.go:7:6: declared and not used: x",
        '  ./main.go:7:14: cannot use "text" (untyped string constant) as int value in variable declaration',
    ]
    assert "hint:" not in msg


def test_a_module_the_proxy_refuses_is_not_called_unreachable() -> None:
    msg = _explain("module-download-failure.log")
    assert "not reachable" not in msg
    assert "github.com/urfave/cli@v1.99.77" in msg and "403 Forbidden" in msg
    assert "go: downloading" not in msg  # a download line is not an error line
    assert "does not serve a module version" in msg


def test_error_lines_are_not_progress_lines() -> None:
    assert not is_error_line("github.com/urfave/cli")
    assert not is_error_line("go: downloading github.com/urfave/cli v1.22.16")
    assert not is_error_line("   ")
    assert is_error_line("# github.com/seccomp/libseccomp-golang")
    assert is_error_line("gcc: error: unrecognized option")


def test_long_failures_are_cut_with_a_count() -> None:
    body = "\n".join(f"./a.go:{i}:1: undefined: x{i}" for i in range(20))
    msg = explain_failure(body, "go build of y", "off")
    assert msg.count("\n  ./a.go") == 8 and "... 12 more line(s) in the log" in msg
