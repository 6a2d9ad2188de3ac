"""Fixtures for the vcore tests: the library built once per session, and a runner that starts the C
test programs with the library preloaded against the fake runtimes, one shared region per test."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from dralab.vcore import build_dir, ensure_built, fake_runtime_dir, library_path


@pytest.fixture(scope="session")
def vcore_build() -> Path:
    ensure_built()
    return build_dir()


@dataclass
class VcoreRunner:
    build: Path
    tmp: Path

    @property
    def region(self) -> Path:
        """The shared region file every process of this test uses."""
        return self.tmp / "vcore.cache"

    def env(self, extra: dict[str, str] | None = None, preload: bool = True) -> dict[str, str]:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LD_LIBRARY_PATH": str(fake_runtime_dir()),
            "VCORE_FAKE_TOTAL_MIB": "21525",
            "CUDA_DEVICE_MEMORY_SHARED_CACHE": str(self.region),
            "NPU_LOCAL_SHM_PATH": str(self.region),
        }
        if preload:
            env["LD_PRELOAD"] = str(library_path())
        env.update(extra or {})
        return env

    def program(self, name: str) -> str:
        return str(self.build / "tests" / name)

    def run(
        self, name: str, *args: str, env: dict[str, str] | None = None, preload: bool = True, timeout: float = 30
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.program(name), *args],
            env=self.env(env, preload),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def start(self, name: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [self.program(name), *args],
            env=self.env(env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )


@pytest.fixture
def vc(vcore_build: Path, tmp_path: Path) -> VcoreRunner:
    return VcoreRunner(vcore_build, tmp_path)


def fields(line: str) -> dict[str, str]:
    """``key=value`` pairs of one output line."""
    return dict(part.split("=", 1) for part in line.split() if "=" in part)


@pytest.fixture
def kv():
    return fields
