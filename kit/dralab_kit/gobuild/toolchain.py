"""Finding a usable Go toolchain and explaining, in one line, why a build cannot start or failed.

Version parsing and error classification are pure functions so every branch is unit-tested;
``find_go`` is the only part that runs ``go``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass

from dralab.errors import UserError

MIN_GO = (1, 25)
INSTALL_HINT = (
    "install Go >= {min} from https://go.dev/dl/ and put its bin/ on PATH (or set DRALAB_GO to its go binary)"
)

_VERSION_RE = re.compile(r"\bgo(\d+)\.(\d+)(?:\.(\d+))?")

# Substrings of `go` output that mean the module proxy (or the network behind it) is not reachable.
_PROXY_MARKERS = (
    "dial tcp",
    "proxyconnect",
    "no such host",
    "connection refused",
    "i/o timeout",
    "TLS handshake timeout",
    "module lookup disabled by GOPROXY=off",
    "GOPROXY=off",
    "network is unreachable",
    "403 Forbidden",
    "407 Proxy Authentication Required",
    "Client.Timeout exceeded",
)


@dataclass(frozen=True)
class GoToolchain:
    """A Go toolchain found on this machine."""

    path: str
    version: tuple[int, int, int]

    @property
    def version_text(self) -> str:
        return "go" + ".".join(str(p) for p in self.version)


def parse_go_version(text: str) -> tuple[int, int, int] | None:
    """The version in ``go version`` output (``go version go1.26.8 linux/amd64`` -> (1, 26, 8)).

    Release candidates count as their minor release (``go1.25rc1`` -> (1, 25, 0)).
    """
    match = _VERSION_RE.search(text)
    if not match:
        return None
    return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)


def check_version(version: tuple[int, int, int] | None, path: str, minimum: tuple[int, int] = MIN_GO) -> None:
    """Raise a UserError when ``version`` is unknown or older than ``minimum``."""
    need = f"{minimum[0]}.{minimum[1]}"
    if version is None:
        raise UserError(f"could not read the version of {path}; " + INSTALL_HINT.format(min=need))
    if version[:2] < minimum:
        have = ".".join(str(p) for p in version)
        raise UserError(f"{path} is Go {have}, but Go >= {need} is needed; " + INSTALL_HINT.format(min=need))


# The proxy answered, and refused one module version: reachable, so not a network problem.
_PROXY_ANSWERED = ("server response:", "404 Not Found", "410 Gone", "This module version is not available")


def looks_like_proxy_failure(output: str) -> bool:
    """True when ``go`` failed because modules could not be fetched (proxy or network missing)."""
    if any(marker in output for marker in _PROXY_ANSWERED):
        return False
    return any(marker in output for marker in _PROXY_MARKERS)


# ``go build -v`` prints each package's import path as it compiles it and ``go: downloading ...``
# for each module: neither is an error, and the last of them is what a naive tail would show.
_PROGRESS_LINE = re.compile(r"^(go: (downloading|finding|extracting) .*|[A-Za-z0-9_.~+-]+(/[A-Za-z0-9_.~+-]+)*)$")
MAX_ERROR_LINES = 8

# (substrings of the output, the fix): causes a user can mend, first match wins.
_HINTS: tuple[tuple[tuple[str, ...], str], ...] = (
    (
        ("libseccomp", "seccomp.h"),
        "runc needs libseccomp's headers and static library, found through pkg-config: "
        "install them with `apt-get install -y libseccomp-dev pkg-config` (or run `scripts/system-packages node`)",
    ),
    (
        ('"pkg-config": executable file not found', "pkg-config: not found", "pkg-config: command not found"),
        "cgo asks pkg-config for C libraries: install it with `apt-get install -y pkg-config`",
    ),
    (
        ('"gcc": executable file not found', 'C compiler "gcc" not found', "gcc: not found", "gcc: command not found"),
        "cgo needs a C compiler: install gcc (`apt-get install -y gcc`)",
    ),
    (
        (*_PROXY_ANSWERED, "unknown revision", "invalid version"),
        "the module proxy does not serve a module version the build asks for: check the pinned version, "
        "or that GOPROXY points at a proxy that has it",
    ),
)


def is_error_line(line: str) -> bool:
    """Whether a line of ``go build -v`` output says something went wrong (not a progress line)."""
    text = line.strip()
    return bool(text) and not _PROGRESS_LINE.fullmatch(text)


def failure_hint(output: str) -> str | None:
    """The fix for a known cause of a failed build, or None."""
    for markers, hint in _HINTS:
        if any(m in output for m in markers):
            return hint
    return None


def explain_failure(output: str, what: str, goproxy: str) -> str:
    """Why ``what`` failed: its first error lines (not the last package it downloaded) and a hint.

    ``output`` is the build's output, or the error lines collected from it while it ran.
    """
    if looks_like_proxy_failure(output):
        return (
            f"{what} failed: the Go module proxy is not reachable (GOPROXY={goproxy or 'unset'}); "
            "set GOPROXY to a reachable proxy (default https://proxy.golang.org) or pre-fill GOMODCACHE, then retry"
        )
    errors = [ln.rstrip() for ln in output.splitlines() if is_error_line(ln)]
    if not errors:
        tail = [ln.strip() for ln in output.splitlines() if ln.strip()]
        return f"{what} failed without an error line (last output: {tail[-1] if tail else 'none'})"
    shown = errors[:MAX_ERROR_LINES]
    more = len(errors) - len(shown)
    text = f"{what} failed:\n" + "\n".join(f"  {ln}" for ln in shown)
    if more:
        text += f"\n  ... {more} more line(s) in the log"
    hint = failure_hint(output)
    return text + (f"\nhint: {hint}" if hint else "")


def find_go(go: str | None = None, minimum: tuple[int, int] = MIN_GO) -> GoToolchain:
    """Locate ``go`` (argument, $DRALAB_GO, then PATH) and check its version."""
    import os

    candidate = go or os.environ.get("DRALAB_GO") or shutil.which("go")
    if not candidate or not shutil.which(candidate):
        need = f"{minimum[0]}.{minimum[1]}"
        raise UserError("the Go toolchain was not found; " + INSTALL_HINT.format(min=need))
    try:
        out = subprocess.run([candidate, "version"], capture_output=True, text=True, timeout=60, check=False)
    except OSError as exc:
        raise UserError(f"cannot run {candidate}: {exc}") from None
    version = parse_go_version(out.stdout)
    check_version(version, candidate, minimum)
    assert version is not None
    return GoToolchain(path=candidate, version=version)


def go_env(tool: GoToolchain, name: str) -> str:
    """The value of one ``go env`` variable."""
    out = subprocess.run([tool.path, "env", name], capture_output=True, text=True, timeout=60, check=False)
    return out.stdout.strip()
