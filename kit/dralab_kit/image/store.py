"""Where buildah keeps images: a private storage under dralab's cache, never /var/lib/containers.

Layout under ``${DRALAB_CACHE:-~/.cache/dralab}/image/``:

- ``storage-<driver>/root`` and ``.../run``: buildah's graph root and run root (``--root``,
  ``--runroot``), also written as ``storage.conf`` and passed as ``CONTAINERS_STORAGE_CONF`` so the
  host's /etc/containers/storage.conf (driver options, mount programs) does not apply;
- ``base/<key>.json``: a stamp per base image (see ``dralab_kit.image.base``);
- ``logs/``: one log per build with everything buildah and mmdebstrap printed;
- ``out/``: the OCI archives.

The storage driver is overlay where the kernel offers it and the cache is not itself on overlayfs
(overlay on overlay fails, as inside most containers); vfs otherwise (full copies per layer: slower,
bigger, works everywhere). The driver is part of the folder name because a graph root cannot change
driver once made. Deleting ``image/`` removes everything a build left behind.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dralab.errors import UserError
from dralab_kit.image.tools import run_logged


def cache_root() -> Path:
    """dralab's cache, as dralab_kit.gobuild.cache_root has it (repeated: this package imports no build code)."""
    return Path(os.environ.get("DRALAB_CACHE") or Path.home() / ".cache" / "dralab")


def image_cache(root: Path | None = None) -> Path:
    return (root or cache_root()) / "image"


def mount_fstype(path: Path, mounts: str) -> str:
    """The file system type of the mount holding ``path``, from /proc/mounts text ("" if unknown)."""
    best, fstype = "", ""
    target = str(path)
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, fstype = point, fields[2]
    return fstype


def choose_driver(filesystems: str, fstype: str) -> str:
    """overlay when the kernel has it and the storage is not on overlayfs itself; vfs otherwise."""
    has_overlay = any(line.split()[-1] == "overlay" for line in filesystems.splitlines() if line.split())
    return "overlay" if has_overlay and fstype != "overlay" else "vfs"


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


@dataclass(frozen=True)
class Store:
    """buildah's private storage: global flags and environment for every buildah call."""

    folder: Path
    driver: str

    @classmethod
    def under(cls, cache: Path, driver: str | None = None) -> Store:
        """The store in ``cache`` (dralab's image cache), with the driver this machine supports."""
        if driver is None:
            driver = os.environ.get("DRALAB_IMAGE_STORAGE_DRIVER") or choose_driver(
                _read("/proc/filesystems"), mount_fstype(cache.resolve(), _read("/proc/mounts"))
            )
        return cls(cache / f"storage-{driver}", driver)

    @property
    def root(self) -> Path:
        return self.folder / "root"

    @property
    def runroot(self) -> Path:
        return self.folder / "run"

    @property
    def conf(self) -> Path:
        return self.folder / "storage.conf"

    def conf_text(self) -> str:
        return f'[storage]\ndriver = "{self.driver}"\ngraphroot = "{self.root}"\nrunroot = "{self.runroot}"\n'

    def prepare(self) -> None:
        """Create the folders and storage.conf (idempotent)."""
        self.root.mkdir(parents=True, exist_ok=True)
        self.runroot.mkdir(parents=True, exist_ok=True)
        text = self.conf_text()
        if not self.conf.is_file() or self.conf.read_text() != text:
            self.conf.write_text(text)

    def buildah(self, *args: str, program: str = "buildah") -> list[str]:
        """``buildah`` with this storage's global flags, then ``args``."""
        return [program, "--root", str(self.root), "--runroot", str(self.runroot),
                "--storage-driver", self.driver, *args]  # fmt: skip

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """The environment for buildah: our storage.conf instead of the host's."""
        env = dict(os.environ if base is None else base)
        env["CONTAINERS_STORAGE_CONF"] = str(self.conf)
        env.setdefault("BUILDAH_ISOLATION", "chroot")
        return env


@dataclass(frozen=True)
class Buildah:
    """buildah on a ``Store``: every call with the store's flags and environment, output into ``log``."""

    store: Store
    program: str
    log: Path

    def argv(self, *args: str) -> list[str]:
        return self.store.buildah(*args, program=self.program)

    def run(self, *args: str, what: str, on_line: Callable[[str], None] | None = None, hint: str = "") -> None:
        run_logged(self.argv(*args), self.log, what, env=self.store.env(), on_line=on_line, hint=hint)

    def output(self, *args: str) -> str:
        """The stripped stdout of a query; a failure is a ``UserError`` quoting buildah."""
        proc = subprocess.run(self.argv(*args), env=self.store.env(), capture_output=True, text=True, check=False,
                              timeout=120)  # fmt: skip
        if proc.returncode != 0:
            raise UserError(f"buildah {args[0]} failed: {proc.stderr.strip()}")
        return proc.stdout.strip()

    def succeeds(self, *args: str) -> bool:
        """True when the call exits 0 (a query: its output is not kept)."""
        proc = subprocess.run(self.argv(*args), env=self.store.env(), capture_output=True, check=False, timeout=120)
        return proc.returncode == 0

    def has_image(self, name: str) -> bool:
        return self.succeeds("inspect", "--type", "image", name)

    def has_container(self, name: str) -> bool:
        return self.succeeds("inspect", "--type", "container", name)
