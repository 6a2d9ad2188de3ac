"""Build Go programs from a wrapper module shipped with dralab.

A wrapper module is a go.mod + go.sum under ``kit/dralab_kit/gobuild/wrappers/<name>/`` that pins the
program's module (and, for Kubernetes, a replace line for every staging module), so
``go build <package>`` works where ``go install <package>@<version>`` does not. Each wrapper is
its own module so one program's dependency graph never moves another's.

``build_go_tools`` builds all missing binaries of one wrapper in a single ``go build`` (the
compile work is shared), writes them atomically into ``out_dir`` and records a stamp per binary
(hash of go.mod, go.sum, package, ldflags, Go version) so a second call skips what is built.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import filelock

from dralab.errors import UserError
from dralab.util import atomic_write
from dralab_kit.gobuild.toolchain import GoToolchain, explain_failure, find_go, go_env, is_error_line

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

_MAJOR_SUFFIX = re.compile(r"^v[0-9]+$")


def cache_root() -> Path:
    """dralab's cache directory: ``$DRALAB_CACHE`` or ``~/.cache/dralab``."""
    return Path(os.environ.get("DRALAB_CACHE") or Path.home() / ".cache" / "dralab")


def wrapper_names() -> list[str]:
    """Names of the wrapper modules shipped with dralab."""
    folder = resources.files("dralab_kit.gobuild").joinpath("wrappers")
    return sorted(p.name for p in folder.iterdir() if p.is_dir() and p.joinpath("go.mod").is_file())


def exec_name(package: str) -> str:
    """The file name ``go build -o DIR/`` gives a main package (a trailing ``/vN`` is skipped)."""
    parts = package.rstrip("/").split("/")
    if len(parts) > 1 and _MAJOR_SUFFIX.match(parts[-1]):
        return parts[-2]
    return parts[-1]


def normalize_packages(packages: Mapping[str, str] | Sequence[str]) -> dict[str, str]:
    """``{binary name: package}`` from a mapping or a list of packages (named like ``go build`` names them)."""
    if isinstance(packages, Mapping):
        out = dict(packages)
    else:
        out = {exec_name(pkg): pkg for pkg in packages}
        if len(out) != len(packages):
            raise UserError(f"two packages would build binaries with the same name: {list(packages)}")
    if not out:
        raise UserError("no Go packages to build")
    exec_names = [exec_name(pkg) for pkg in out.values()]
    if len(set(exec_names)) != len(exec_names):
        raise UserError(f"packages {list(out.values())} collide in one go build; build them in separate calls")
    return out


def stamp_key(go_mod: bytes, go_sum: bytes, package: str, ldflags: str, go_version: str, env: Mapping[str, str]) -> str:
    """What a built binary depends on; a change in any part means it is rebuilt."""
    digest = hashlib.sha256()
    for part in (go_mod, go_sum, package.encode(), ldflags.encode(), go_version.encode()):
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    digest.update(json.dumps(sorted(env.items())).encode())
    return digest.hexdigest()


@dataclass
class BuildResult:
    """What one call did: binaries built now, binaries already there, their paths, the time taken."""

    wrapper: str
    paths: dict[str, Path]
    built: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    seconds: float = 0.0
    log: Path | None = None


def _wrapper_files(wrapper_name: str) -> tuple[bytes, bytes]:
    folder = resources.files("dralab_kit.gobuild").joinpath("wrappers", wrapper_name)
    if not folder.joinpath("go.mod").is_file():
        known = ", ".join(wrapper_names()) or "none"
        raise UserError(f"no Go wrapper module named {wrapper_name!r} (known: {known})")
    go_mod = folder.joinpath("go.mod").read_bytes()
    go_sum = folder.joinpath("go.sum").read_bytes() if folder.joinpath("go.sum").is_file() else b""
    return go_mod, go_sum


def _prepare_workdir(wrapper_name: str, go_mod: bytes, go_sum: bytes) -> Path:
    """A writable copy of the wrapper module (package data may be read-only or zipped)."""
    work = cache_root() / "gobuild" / wrapper_name
    work.mkdir(parents=True, exist_ok=True)
    for name, data in (("go.mod", go_mod), ("go.sum", go_sum)):
        target = work / name
        if not target.is_file() or target.read_bytes() != data:
            atomic_write(target, data)
    return work


def _stamp_path(out_dir: Path, name: str) -> Path:
    return out_dir / ".stamps" / f"{name}.json"


def is_built(out_dir: Path, name: str, key: str) -> bool:
    """True when ``out_dir/name`` exists and was built from exactly ``key``."""
    binary, stamp = out_dir / name, _stamp_path(out_dir, name)
    if not binary.is_file() or not stamp.is_file():
        return False
    try:
        return json.loads(stamp.read_text()).get("key") == key
    except (OSError, ValueError):
        return False


class _Progress:
    """Shows which phase a build is in and how many packages were compiled, on stderr.

    On a terminal it is one live rich line. Elsewhere (a CI log) rich draws nothing until the end,
    so a plain line is printed every ``interval`` seconds instead: a build of many minutes never
    looks hung.
    """

    HEARTBEAT_S = 20.0  # below 30 s, however late the heartbeat thread gets scheduled

    def __init__(
        self, title: str, enabled: bool, stream: TextIO | None = None, interval: float = HEARTBEAT_S
    ) -> None:
        self.title = title
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self.interval = interval
        self.downloads = 0
        self.packages = 0
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._started = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def interactive(self) -> bool:
        isatty = getattr(self.stream, "isatty", None)
        return bool(isatty and isatty())

    def __enter__(self) -> _Progress:
        self._started = time.monotonic()
        if self.enabled and self.interactive:
            from rich.console import Console
            from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            self._progress = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                TimeElapsedColumn(),
                console=Console(file=self.stream),
                transient=False,
            )
            self._progress.__enter__()
            self._task = self._progress.add_task(self.title, total=None)
        elif self.enabled:
            self._say(f"{self.title}: started (a line every {self.interval:.0f}s until it ends)")
            self._thread = threading.Thread(
                target=self.heartbeat, args=(self._stop.wait,), name="gobuild-progress", daemon=True
            )
            self._thread.start()
        return self

    def summary(self) -> str:
        """One line: the phase counters and the time since the build started."""
        elapsed = int(time.monotonic() - self._started)
        detail = f"{self.downloads} modules downloaded, " if self.downloads else ""
        return f"{self.title}: {detail}{self.packages} packages compiled, {elapsed // 60}m{elapsed % 60:02d}s"

    def heartbeat(self, wait: Callable[[float], bool]) -> None:
        """Print :meth:`summary` every ``interval`` until ``wait`` (an Event's wait) says the build ended."""
        while not wait(self.interval):
            self._say(self.summary())

    def _say(self, text: str) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()

    def line(self, text: str) -> None:
        if text.startswith("go: downloading"):
            self.downloads += 1
        elif text and not text.startswith(("go:", "#", " ")):
            self.packages += 1
        if self._progress is not None and self._task is not None:  # both set together in __enter__
            detail = f"{self.downloads} modules downloaded, " if self.downloads else ""
            self._progress.update(self._task, description=f"{self.title} ({detail}{self.packages} packages compiled)")

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.__exit__(None, None, None)
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._say(f"{self.summary()}, go build ended")


@contextmanager
def _build_lock(wrapper_name: str, progress: bool) -> Iterator[None]:
    """One build per wrapper module at a time on this machine (parallel test workers, two shells).

    The wrapper's work directory (go.mod copy, build.log) is shared by every build of it; the
    caller checks the stamps again once it holds the lock, so a waiter skips what the other built.
    """
    path = cache_root() / "gobuild" / f"{wrapper_name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = filelock.FileLock(str(path))
    try:
        lock.acquire(timeout=0)
    except filelock.Timeout:
        if progress:
            print(f"waiting for another build of {wrapper_name} to finish (lock {path})", file=sys.stderr, flush=True)
        lock.acquire()
    try:
        yield
    finally:
        lock.release()


def build_go_tools(
    wrapper_name: str,
    packages: Mapping[str, str] | Sequence[str],
    out_dir: str | os.PathLike[str],
    ldflags: str = "",
    env: Mapping[str, str] | None = None,
    *,
    force: bool = False,
    go: str | None = None,
    progress: bool = True,
) -> BuildResult:
    """Build ``packages`` of wrapper module ``wrapper_name`` into ``out_dir``; skip binaries already built.

    ``packages`` is a list of main packages (binaries named as ``go build`` names them) or a
    mapping ``{binary name: package}``. ``ldflags`` is passed to ``go build -ldflags``
    (``-s -w`` is always added); ``env`` adds environment variables (``CGO_ENABLED=0`` by
    default). Raises UserError with one line when Go (>= 1.25) or the module proxy is missing.
    """
    start = time.monotonic()
    wanted = normalize_packages(packages)
    out = Path(out_dir)
    go_mod, go_sum = _wrapper_files(wrapper_name)
    tool = find_go(go)
    build_env = {"CGO_ENABLED": "0", **(env or {})}
    keys = {name: stamp_key(go_mod, go_sum, pkg, ldflags, tool.version_text, build_env) for name, pkg in wanted.items()}
    paths = {name: out / name for name in wanted}
    todo = [name for name in wanted if force or not is_built(out, name, keys[name])]
    result = BuildResult(wrapper=wrapper_name, paths=paths, skipped=[n for n in wanted if n not in todo])
    if not todo:
        result.seconds = time.monotonic() - start
        return result
    with _build_lock(wrapper_name, progress):
        if not force:  # another process may have built them while this one waited for the lock
            todo = [name for name in todo if not is_built(out, name, keys[name])]
            result.skipped = [n for n in wanted if n not in todo]
        if todo:
            work = _prepare_workdir(wrapper_name, go_mod, go_sum)
            result.log = work / "build.log"
            go_cache_present = _go_cache_present(tool)
            build_started = time.monotonic()
            _run_go_build(tool, work, {n: wanted[n] for n in todo}, out, ldflags, build_env, result.log, progress)
            # measured, not assumed: the duration of this go build, kept with the stamps and in the cache's log
            record = build_record(wrapper_name, {n: wanted[n] for n in todo}, go_mod, tool.version_text,
                                  time.monotonic() - build_started, go_cache_present)  # fmt: skip
            for name in todo:
                stamp = {"key": keys[name], "package": wanted[name], "build": record}
                atomic_write(_stamp_path(out, name), json.dumps(stamp) + "\n")
            record_build(record)
    result.built = todo
    result.seconds = time.monotonic() - start
    return result


def built_paths(
    wrapper_name: str,
    packages: Mapping[str, str] | Sequence[str],
    out_dir: str | os.PathLike[str],
    ldflags: str = "",
    env: Mapping[str, str] | None = None,
    *,
    go: str | None = None,
) -> dict[str, Path] | None:
    """The paths :func:`build_go_tools` would return when every binary is built and current, else None.

    Builds nothing: for callers that must stay fast (the unit tier) and use a tool only when present.
    """
    wanted = normalize_packages(packages)
    out = Path(out_dir)
    try:
        go_mod, go_sum = _wrapper_files(wrapper_name)
        tool = find_go(go)
    except UserError:
        return None
    build_env = {"CGO_ENABLED": "0", **(env or {})}
    for name, pkg in wanted.items():
        if not is_built(out, name, stamp_key(go_mod, go_sum, pkg, ldflags, tool.version_text, build_env)):
            return None
    return {name: out / name for name in wanted}


def _run_go_build(
    tool: GoToolchain,
    work: Path,
    todo: dict[str, str],
    out: Path,
    ldflags: str,
    build_env: Mapping[str, str],
    log_path: Path,
    progress: bool,
) -> None:
    """One ``go build -v`` for all of ``todo``, into a temp dir, then renamed into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    full_env = {**os.environ, **build_env, "GOTOOLCHAIN": "local"}
    goflags = full_env.get("GOFLAGS", "")
    if "-mod=" not in goflags:
        full_env["GOFLAGS"] = (goflags + " -mod=readonly").strip()
    flags = ("-s -w " + ldflags).strip()
    tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=out))
    cmd = [tool.path, "build", "-v", "-trimpath", "-ldflags", flags, "-o", str(tmp) + os.sep, *todo.values()]
    # the error lines as they come (the first ones are the cause; parallel compiles print on after them)
    errors: list[str] = []
    title = f"building {', '.join(todo)} with {tool.version_text}"
    try:
        with log_path.open("w") as log, _Progress(title, progress) as bar:
            log.write(" ".join(cmd) + "\n")
            proc = subprocess.Popen(
                cmd, cwd=work, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            )
            assert proc.stdout is not None
            for raw in proc.stdout:
                line = raw.rstrip("\n")
                log.write(raw)
                if len(errors) < 200 and is_error_line(line):
                    errors.append(line)
                bar.line(line)
            rc = proc.wait()
        if rc != 0:
            goproxy = go_env(tool, "GOPROXY")
            what = f"go build of {', '.join(todo)} (log: {log_path})"
            raise UserError(explain_failure("\n".join(errors), what, goproxy))
        for name, pkg in todo.items():
            built = tmp / exec_name(pkg)
            if not built.is_file():
                raise UserError(f"go build did not produce {exec_name(pkg)} for {pkg} (log: {log_path})")
            os.replace(built, out / name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# Build times, measured when a build really happens ---------------------------------------------
BUILD_TIMES = "build-times.jsonl"


def build_times_path() -> Path:
    """Where every real build appends its duration and tool versions: ``<cache>/gobuild/build-times.jsonl``."""
    return cache_root() / "gobuild" / BUILD_TIMES


def _go_cache_present(tool: GoToolchain) -> bool | None:
    """Whether Go's build cache held anything before this build (an empty one makes it a cold build)."""
    try:
        folder = Path(go_env(tool, "GOCACHE"))
    except Exception:  # a Go that cannot say: the record says "unknown" rather than guess
        return None
    try:
        return any(entry.is_dir() and any(os.scandir(entry)) for entry in os.scandir(folder))
    except OSError:
        return False


def module_versions(go_mod: bytes, packages: Sequence[str]) -> dict[str, str]:
    """The required version of each module that provides one of ``packages`` (from the wrapper's go.mod).

    A wrapper that builds its own main package names what it wraps in ``tool`` lines; those count too.
    """
    out: dict[str, str] = {}
    lines = go_mod.decode(errors="replace").splitlines()
    packages = [*packages, *(line.split()[1] for line in lines if line.startswith("tool ") and len(line.split()) > 1)]
    for line in lines:
        parts = line.strip().removeprefix("require").split()
        if len(parts) >= 2 and parts[1].startswith("v"):
            module, version = parts[0], parts[1]
            if any(pkg == module or pkg.startswith(module + "/") for pkg in packages):
                out[module] = version
    return out


def build_record(
    wrapper: str, built: Mapping[str, str], go_mod: bytes, go_version: str, seconds: float, go_cache: bool | None
) -> dict[str, object]:
    """One real build: what was built together, from which module versions, with which Go, how long it took."""
    return {
        "wrapper": wrapper,
        "binaries": sorted(built),
        "modules": module_versions(go_mod, list(built.values())),
        "go": go_version,
        "seconds": round(seconds, 1),
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "go_cache_was_present": go_cache,
        "cpus": len(os.sched_getaffinity(0)),
        "load_average_end": [round(x, 2) for x in os.getloadavg()],
    }


def record_build(record: Mapping[str, object]) -> None:
    """Append ``record`` to the cache's build-time log (best effort: a read-only cache only loses the record)."""
    path = build_times_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as fh:
            fh.write(json.dumps(dict(record)) + "\n")
    except OSError:
        pass


def read_build_times(path: Path | None = None) -> list[dict[str, object]]:
    """Every recorded build, oldest first (torn or foreign lines skipped)."""
    path = path or build_times_path()
    if not path.is_file():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict) and "wrapper" in item and "seconds" in item:
            out.append(item)
    return out
