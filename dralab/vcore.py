"""vcore from Python: where the built enforcement library, probe and fake runtimes live, building
them, and running the probe with a claim's environment against the fake runtime.

The probe prints ``key=value`` records (one per line, the first word names the record); the
library logs an over-quota refusal as one line on stderr. Parsing is pure
(:func:`parse_probe_output`) so it is tested without running anything.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dralab.errors import UserError

#: Physical memory of the fake card unless the environment says otherwise (Lab 20's 310P3).
DEFAULT_FAKE_TOTAL_MIB = 21525
#: Environment variables that name the shared accounting region, per vendor.
REGION_VARS = {"ascend": "NPU_LOCAL_SHM_PATH", "nvidia": "CUDA_DEVICE_MEMORY_SHARED_CACHE"}
_VENDOR_ALIASES = {"ascend": "ascend", "npu": "ascend", "nvidia": "nvidia", "cuda": "nvidia"}
_REFUSAL = re.compile(
    r"memory quota exceeded on device (?P<dev>\d+): request (?P<req>[\d.]+) MiB, "
    r"used (?P<used>[\d.]+) MiB, limit (?P<limit>[\d.]+) MiB"
)


def source_dir() -> Path:
    """The vcore source tree (``DRALAB_VCORE_DIR`` overrides the repository's ``vcore/``)."""
    override = os.environ.get("DRALAB_VCORE_DIR")
    return Path(override) if override else Path(__file__).resolve().parent.parent / "vcore"


def build_dir() -> Path:
    return source_dir() / "build"


def library_path() -> Path:
    """The enforcement library the driver mounts and preloads."""
    return build_dir() / "libvcore.so"


def probe_path() -> Path:
    return build_dir() / "vcore-probe"


def fake_runtime_dir() -> Path:
    """Directory holding the fake libcuda.so.1, libnvidia-ml.so.1 and libascendcl.so."""
    return build_dir() / "fake"


def ensure_built(*make_args: str) -> None:
    """Run ``make`` in vcore/ (cheap when up to date); ``make_args`` (targets, ``VAR=value``)
    default to ``all``.

    Concurrent callers (pytest-xdist workers) serialise on a lock file in the build directory.
    """
    missing = [tool for tool in ("make", os.environ.get("CC", "gcc")) if shutil.which(tool) is None]
    if missing:
        raise UserError(f"building vcore needs {' and '.join(missing)}: install them (e.g. apt-get install gcc make)")
    from filelock import FileLock

    build_dir().mkdir(parents=True, exist_ok=True)
    with FileLock(str(build_dir() / ".build.lock"), timeout=300):
        proc = subprocess.run(
            ["make", "-s", f"-j{min(os.cpu_count() or 1, 8)}", "-C", str(source_dir()), *(make_args or ("all",))],
            capture_output=True,
            text=True,
            check=False,
        )
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise UserError(f"building vcore failed (make -C {source_dir()}):\n{tail}")


@dataclass(frozen=True)
class Allocation:
    """One allocation attempt of the probe."""

    n: int
    request_mib: float
    code: int
    granted: bool
    allocated_mib: float


@dataclass(frozen=True)
class Refusal:
    """The library's over-quota line: ``request X MiB, used Y MiB, limit Z MiB``."""

    device: int
    request_mib: float
    used_mib: float
    limit_mib: float
    line: str


@dataclass(frozen=True)
class MemInfo:
    """What the runtime reported (cuMemGetInfo / aclrtGetMemInfo) at one point of the probe."""

    total_mib: float
    free_mib: float


@dataclass(frozen=True)
class ProbeResult:
    vendor: str
    returncode: int
    allocations: list[Allocation] = field(default_factory=list)
    info: dict[str, MemInfo] = field(default_factory=dict)
    refusal: Refusal | None = None
    error: str | None = None
    log_lines: list[str] = field(default_factory=list)
    stdout: str = ""
    stderr: str = ""

    @property
    def granted_mib(self) -> list[float]:
        """Sizes of the allocations the runtime granted, in order."""
        return [a.request_mib for a in self.allocations if a.granted]

    @property
    def refused(self) -> Allocation | None:
        """The allocation the runtime refused (the probe stops there), if any."""
        return next((a for a in self.allocations if not a.granted), None)

    @property
    def total_mib(self) -> float | None:
        """Device total as the runtime reported it before allocating."""
        before = self.info.get("before")
        return before.total_mib if before else None

    @property
    def free_mib(self) -> float | None:
        before = self.info.get("before")
        return before.free_mib if before else None


def _fields(line: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in line.split()[1:]:
        key, sep, value = part.partition("=")
        if sep:
            out[key] = value.strip('"')
    return out


def parse_probe_output(stdout: str, stderr: str, returncode: int, vendor: str) -> ProbeResult:
    """Turn the probe's records and the library's log lines into a :class:`ProbeResult`."""
    allocations: list[Allocation] = []
    info: dict[str, MemInfo] = {}
    error: str | None = None
    for line in stdout.splitlines():
        kind = line.split(" ", 1)[0]
        values = _fields(line)
        if kind == "alloc":
            allocations.append(
                Allocation(
                    n=int(values["n"]),
                    request_mib=float(values["request_mib"]),
                    code=int(values["code"]),
                    granted=values["granted"] == "1",
                    allocated_mib=float(values["allocated_mib"]),
                )
            )
        elif kind == "info" and values.get("code") == "0" and "total_mib" in values:
            info[values["when"]] = MemInfo(float(values["total_mib"]), float(values["free_mib"]))
        elif kind == "error":
            error = line
    log_lines = [line for line in stderr.splitlines() if line.startswith("vcore[")]
    refusal = None
    for line in log_lines:
        match = _REFUSAL.search(line)
        if match:
            refusal = Refusal(
                device=int(match["dev"]),
                request_mib=float(match["req"]),
                used_mib=float(match["used"]),
                limit_mib=float(match["limit"]),
                line=line,
            )
    if error is None and returncode != 0:
        error = (stderr.strip().splitlines() or [f"probe exited {returncode}"])[-1]
    return ProbeResult(
        vendor=vendor,
        returncode=returncode,
        allocations=allocations,
        info=info,
        refusal=refusal,
        error=error,
        log_lines=log_lines,
        stdout=stdout,
        stderr=stderr,
    )


def normalise_vendor(vendor: str) -> str:
    try:
        return _VENDOR_ALIASES[vendor.lower()]
    except KeyError:
        raise UserError(f"vcore probe: unknown vendor {vendor!r}: use 'ascend' or 'nvidia'") from None


def probe_environment(env: Mapping[str, str], vendor: str, region_dir: Path) -> dict[str, str]:
    """The probe's environment: the claim's env, the library preloaded, the fake runtime first.

    The claim names the shared region by its path inside the container; here it is moved into
    ``region_dir`` (same file name) so runs never touch the host's /hami-* or /tmp paths.
    """
    vendor = normalise_vendor(vendor)
    out = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "VCORE_FAKE_TOTAL_MIB": str(DEFAULT_FAKE_TOTAL_MIB),
        **env,
    }
    for var in REGION_VARS.values():
        name = Path(env[var]).name if env.get(var) else f"vcore-{vendor}.cache"
        out[var] = str(region_dir / name)
    out["LD_PRELOAD"] = str(library_path())
    fake = str(fake_runtime_dir())
    out["LD_LIBRARY_PATH"] = f"{fake}:{env['LD_LIBRARY_PATH']}" if env.get("LD_LIBRARY_PATH") else fake
    return out


def run_probe(
    env: Mapping[str, str],
    vendor: str,
    steps_mib: Sequence[float] | None = None,
    *,
    region_dir: Path | None = None,
    max_steps: int = 1000,
    timeout: float = 60.0,
) -> ProbeResult:
    """Run the probe with a claim's environment, the library preloaded, on the fake runtime.

    ``steps_mib`` are allocated in order and the last one repeats until the runtime refuses (or
    ``max_steps``); ``None`` means 2050 MiB steps, Lab 20's Step 8. The fake card's size comes from
    ``VCORE_FAKE_TOTAL_MIB`` in ``env`` (default 21525).
    """
    vendor = normalise_vendor(vendor)
    ensure_built()
    steps = [float(s) for s in (steps_mib or [2050])]
    if any(s <= 0 for s in steps):
        raise UserError("vcore probe: steps must be positive sizes in MiB")
    args = [
        str(probe_path()),
        "--vendor",
        vendor,
        "--steps",
        ",".join(f"{s:g}" for s in steps),
        "--max-steps",
        str(max_steps),
    ]
    with tempfile.TemporaryDirectory(prefix="vcore-probe-") as tmp:
        proc_env = probe_environment(env, vendor, Path(region_dir) if region_dir else Path(tmp))
        proc = subprocess.run(args, env=proc_env, capture_output=True, text=True, timeout=timeout, check=False)
    return parse_probe_output(proc.stdout, proc.stderr, proc.returncode, vendor)
