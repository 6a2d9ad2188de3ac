"""The local base image: Debian bookworm with Python, made with mmdebstrap because no registry is reachable.

One base serves both Dockerfile arguments, ``PYTHON_IMAGE`` and ``DEBIAN_IMAGE``: the runtime and
wheel stages need Python and ``python3 -m venv``; the vcore stage installs make and gcc with apt at
build time exactly as it does on ``debian:bookworm-slim``, and only its two output files leave it.
Baking gcc into the base would put a compiler into the runtime image, and a second base would cost
a second mmdebstrap run (about 35 s on an idle machine, over 2 min on a busy one) for nothing.

Like ``debian:*-slim`` the tree has no documentation, man pages or translations (dpkg path
excludes), and its apt sources include bookworm-updates and bookworm-security, so the packages
installed are the patched ones.

Cache: the image is named ``dralab.local/base/python:bookworm-<key>`` where ``<key>`` hashes every
input (suite, architecture, variant, packages, sources, dpkg options, environment, recipe version),
and lives in the private buildah storage (``dralab_kit.image.store``) next to a stamp ``base/<key>.json``.
A build whose key is in the storage skips mmdebstrap; a changed input makes a new key. Time is not
an input, so a base ages: ``dralab image build --refresh-base`` remakes it with today's updates.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from dralab.util import atomic_write
from dralab_kit.image.store import Buildah
from dralab_kit.image.tools import find_program, run_logged

RECIPE_VERSION = 1  # bump when the steps below change what the image holds
BASE_REPOSITORY = "dralab.local/base/python"
MIRROR = "http://deb.debian.org/debian"
SECURITY_MIRROR = "http://deb.debian.org/debian-security"
PATH_ENV = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class BaseSpec:
    """Everything the base image is made from; its hash names the image."""

    arch: str
    suite: str = "bookworm"
    variant: str = "minbase"
    packages: tuple[str, ...] = ("python3", "python3-venv", "ca-certificates")
    dpkg_options: tuple[str, ...] = (
        "path-exclude=/usr/share/man/*",
        "path-exclude=/usr/share/info/*",
        "path-exclude=/usr/share/locale/*",
        "path-exclude=/usr/share/doc/*",
        "path-include=/usr/share/doc/*/copyright",  # licences stay
    )
    # a scratch image has no config: without PATH a Dockerfile's `ENV PATH=...:$PATH` would drop /usr/bin
    env: tuple[str, ...] = (f"PATH={PATH_ENV}", "LANG=C.UTF-8")
    recipe: int = RECIPE_VERSION
    sources: tuple[str, ...] = ()  # apt source lines; () means the suite, its updates and its security updates

    def source_lines(self) -> tuple[str, ...]:
        return self.sources or (
            f"deb {MIRROR} {self.suite} main",
            f"deb {MIRROR} {self.suite}-updates main",
            f"deb {SECURITY_MIRROR} {self.suite}-security main",
        )

    def key(self) -> str:
        """A short hash of every input (the sources as used, packages in any order)."""
        doc = asdict(self) | {"packages": sorted(self.packages), "sources": list(self.source_lines())}
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]

    def image_name(self) -> str:
        return f"{BASE_REPOSITORY}:{self.suite}-{self.key()}"


def mmdebstrap_argv(spec: BaseSpec, tarball: Path, program: str = "mmdebstrap") -> list[str]:
    """mmdebstrap writing the root file system of ``spec`` as a tar (root mode: the build runs as root)."""
    argv = [program, "--mode=root", f"--variant={spec.variant}", f"--architectures={spec.arch}",
            f"--include={','.join(spec.packages)}"]  # fmt: skip
    argv += [f"--dpkgopt={opt}" for opt in spec.dpkg_options]
    return [*argv, spec.suite, str(tarball), *spec.source_lines()]


def config_args(spec: BaseSpec, container: str) -> list[str]:
    """``buildah config`` arguments: what a scratch image lacks and a Dockerfile stage expects."""
    args = ["config", "--os", "linux", "--arch", spec.arch, "--cmd", "/bin/bash",
            "--label", f"dev.dralab.base.key={spec.key()}"]  # fmt: skip
    for item in spec.env:
        args += ["--env", item]
    return [*args, container]


def stamp_path(cache: Path, spec: BaseSpec) -> Path:
    return cache / "base" / f"{spec.key()}.json"


def ensure_base(
    buildah: Buildah,
    cache: Path,
    spec: BaseSpec,
    refresh: bool = False,
    say: Callable[[str], None] = lambda _msg: None,
) -> tuple[str, bool]:
    """The base image's name, made first when the storage lacks it (or ``refresh``); ``(name, made)``."""
    name = spec.image_name()
    stamp = stamp_path(cache, spec)
    if not refresh and stamp.is_file() and buildah.has_image(name):
        return name, False
    mmdebstrap = find_program("mmdebstrap")
    started = time.monotonic()
    tmp_root = cache / "tmp"
    tmp_root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="base-", dir=tmp_root) as tmp:
        tarball = Path(tmp) / "rootfs.tar"
        say(f"mmdebstrap {spec.suite} {spec.variant} + {', '.join(spec.packages)} ({spec.arch})")
        run_logged(mmdebstrap_argv(spec, tarball, mmdebstrap), buildah.log, "mmdebstrap (the base image's tree)",
                   hint="check that the Debian mirror is reachable: apt-get update must work")  # fmt: skip
        say(f"tree ready: {tarball.stat().st_size / 2**20:.0f} MiB")
        container = f"dralab-base-{spec.key()}"
        if buildah.has_container(container):  # left by an interrupted run
            buildah.run("rm", container, what="buildah rm (a stale working container)")
        buildah.run("from", "--name", container, "scratch", what="buildah from scratch")
        buildah.run("add", "--quiet", container, str(tarball), "/", what="buildah add (the base tree)")
        buildah.run(*config_args(spec, container), what="buildah config (the base image)")
        buildah.run("commit", "--rm", "--quiet", container, name, what="buildah commit (the base image)")
    seconds = round(time.monotonic() - started, 1)
    atomic_write(stamp, json.dumps({"image": name, "spec": asdict(spec), "made": time.time(), "seconds": seconds},
                                   indent=2) + "\n")  # fmt: skip
    return name, True
