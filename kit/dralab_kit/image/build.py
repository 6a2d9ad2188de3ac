"""Build the repository's Dockerfile with buildah into an OCI archive that containerd imports.

Steps, each timed: the base image (``dralab_kit.image.base``, cached), ``buildah bud`` on it, ``buildah
push`` to an ``oci-archive``, and the containerd name annotation (``dralab_kit.image.oci``).

``buildah bud`` runs with chroot isolation: its default OCI runtime (crun) fails on this kind of
machine with "cgroups in hybrid mode not supported", and chroot needs neither cgroups nor a network
namespace (RUN steps use the host's network, so pip and apt reach their mirrors). ``--pull=never``
because there is no registry: every FROM must name an image of the private storage. ``--layers``
keeps each step's result, so a second build reruns only the steps whose inputs changed (a change
under dralab/ reruns the wheel and the runtime's pip install, not vcore's apt-get and make).

Local builds are for this machine's architecture only: the runtime stage RUNs pip in the target
architecture, which needs qemu binfmt emulation that lab machines lack. Multi-arch images come
from the release workflow (docker buildx, cross-compiled vcore, the same Dockerfile).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import filelock

from dralab.errors import UserError
from dralab.util import atomic_write
from dralab_kit.cluster.node.images import oci_arch
from dralab_kit.image import oci
from dralab_kit.image.base import BaseSpec, ensure_base
from dralab_kit.image.store import Buildah, Store, image_cache
from dralab_kit.image.tools import find_program, require_linux, require_root

IMAGE_REPOSITORY = "dralab.local/dralab"
DEBIAN_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_STEP = re.compile(r"^(?:\[(\d+)/(\d+)\] )?STEP (\d+)/(\d+): (.*)$")


def image_name(tag: str) -> str:
    if not _TAG.match(tag):
        raise UserError(f"invalid image tag {tag!r}: letters, digits, '_', '.' and '-', at most 128, not starting "
                        "with '.' or '-'")  # fmt: skip
    return f"{IMAGE_REPOSITORY}:{tag}"


def target_arch(platform: str | None, host: str) -> str:
    """The OCI architecture of ``--platform`` (``linux/<arch>``), which must be this machine's."""
    if not platform:
        return host
    os_name, _, arch = platform.partition("/")
    arch = oci_arch(arch.split("/")[0]) if arch else ""
    if os_name != "linux" or not arch:
        raise UserError(f"--platform {platform!r}: expected linux/<arch>, e.g. linux/{host}")
    if arch != host:
        raise UserError(
            f"--platform {platform}: local builds make images for this machine's architecture ({host}) only, "
            "because the runtime stage runs pip in the target architecture (no qemu emulation here). "
            "Multi-arch images come from .github/workflows/release.yml (docker buildx), or build on an "
            f"{arch} machine"
        )
    return arch


def find_context(explicit: Path | None = None) -> Path:
    """The build context: ``explicit``, else the checkout dralab is imported from, else the working directory."""
    import dralab

    candidates = [explicit] if explicit else [Path(dralab.__file__).resolve().parents[1], Path.cwd()]
    for folder in candidates:
        if folder is not None and (folder / "Dockerfile").is_file() and (folder / "dralab").is_dir():
            return folder.resolve()
    where = explicit or Path.cwd()
    raise UserError(f"no Dockerfile and dralab/ in {where}: run from a dralab checkout or pass --context CHECKOUT")


@dataclass(frozen=True)
class BuildSpec:
    """One build: what to build, from which bases, under which name, into which archive."""

    context: Path
    tag: str
    arch: str
    python_image: str
    debian_image: str
    archive: Path
    layers: bool = True
    ca_bundle: str | None = None  # the host's CA bundle, for the pip steps (see ca_bundle)

    @property
    def name(self) -> str:
        return image_name(self.tag)

    @property
    def dockerfile(self) -> Path:
        return self.context / "Dockerfile"


def ca_bundle(env: Mapping[str, str], is_file: Callable[[str], bool] = os.path.isfile) -> str | None:
    """The CA bundle the host's pip trusts: PIP_CERT, REQUESTS_CA_BUNDLE, SSL_CERT_FILE or Debian's.

    Passed to the Dockerfile's pip steps as the ``ca-bundle`` secret: where HTTPS goes through a
    TLS-intercepting proxy, the base's own CA list fails with CERTIFICATE_VERIFY_FAILED.
    """
    for candidate in (env.get("PIP_CERT"), env.get("REQUESTS_CA_BUNDLE"), env.get("SSL_CERT_FILE"), DEBIAN_CA_BUNDLE):
        if candidate and is_file(candidate):
            return candidate
    return None


def bud_args(spec: BuildSpec) -> list[str]:
    """``buildah bud`` arguments (after the storage flags) for ``spec``."""
    # --force-rm: a failed step's working container (and its overlay mount) is removed as well
    args = ["bud", "--isolation", "chroot", "--pull=never", "--force-rm", "--platform", f"linux/{spec.arch}",
            "--build-arg", f"PYTHON_IMAGE={spec.python_image}", "--build-arg", f"DEBIAN_IMAGE={spec.debian_image}",
            "-f", str(spec.dockerfile), "-t", spec.name]  # fmt: skip
    if spec.ca_bundle:
        args += ["--secret", f"id=ca-bundle,src={spec.ca_bundle}"]
    if spec.layers:
        args.append("--layers")
    return [*args, str(spec.context)]


def push_args(name: str, archive: Path) -> list[str]:
    """``buildah push`` arguments writing ``name`` as an OCI archive that keeps the name."""
    return ["push", "--quiet", "--format", "oci", name, f"oci-archive:{archive}:{name}"]


class StepProgress:
    """Turns buildah's output into one line per Dockerfile step, with the time since the build began."""

    def __init__(self, say: Callable[[str], None], clock: Callable[[], float] = time.monotonic, width: int = 100):
        self.say, self.clock, self.width = say, clock, width
        self.started = clock()
        self.steps = 0
        self.cached = 0

    def __call__(self, line: str) -> None:
        if line.startswith("--> Using cache"):
            self.cached += 1
            return
        match = _STEP.match(line)
        if not match:
            return
        self.steps += 1
        stage = f"[stage {match[1]}/{match[2]}] " if match[1] else ""
        text = f"{stage}step {match[3]}/{match[4]}: {' '.join(match[5].split())}"
        if len(text) > self.width:
            text = text[: self.width - 3] + "..."
        self.say(f"  {self.clock() - self.started:6.1f}s  {text}")


@dataclass
class BuildResult:
    name: str
    archive: Path
    image_id: str
    base: str
    base_made: bool
    seconds: dict[str, float]  # phase -> seconds
    steps: int
    cached_steps: int
    archive_reused: bool
    log: Path


def content_tag(tag: str, image_id: str) -> str:
    """``<tag>-<first 12 hex of the image ID>``: a new name whenever the image's content changes."""
    return f"{tag}-{image_id.removeprefix('sha256:')[:12]}"


def _stamp(archive: Path) -> Path:
    return archive.with_name(archive.name + ".json")


def archive_is_current(archive: Path, name: str, image_id: str) -> bool:
    """True when ``archive`` was written from this very image under this name (its stamp says so)."""
    try:
        stamp = json.loads(_stamp(archive).read_text())
    except (OSError, ValueError):
        return False
    return archive.is_file() and stamp == {"name": name, "image_id": image_id, "size": archive.stat().st_size}


def build(
    tag: str,
    archive: Path | None = None,
    platform: str | None = None,
    context: Path | None = None,
    python_image: str | None = None,
    debian_image: str | None = None,
    refresh_base: bool = False,
    layers: bool = True,
    say: Callable[[str], None] = lambda _msg: None,
    cache: Path | None = None,
    by_content: bool = False,
) -> BuildResult:
    """Build the image and write its archive; ``say`` gets the progress lines.

    ``by_content`` names the image ``<tag>-<image ID prefix>`` (``content_tag``). An archive in the
    cache's ``out/`` whose stamp names the same image is kept instead of pushed again.
    """
    require_linux()
    require_root()
    program = find_program("buildah")
    folder = cache or image_cache()
    name = image_name(tag)
    arch = target_arch(platform, oci_arch())
    root = find_context(context)
    default_out = folder / "out" / (f"dralab-local-{arch}.oci.tar" if by_content else f"dralab-{tag}-{arch}.oci.tar")
    out = (archive or default_out).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "logs" / f"build-{time.strftime('%Y%m%d-%H%M%S')}-{tag}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    say(f"log: {log}")
    seconds: dict[str, float] = {}
    with filelock.FileLock(str(folder / ".build.lock")):
        store = Store.under(folder)
        store.prepare()
        buildah = Buildah(store, program, log)
        say(f"storage: {store.folder} ({store.driver})")
        t0 = time.monotonic()
        if python_image:
            base, made = python_image, False
        else:
            base, made = ensure_base(buildah, folder, BaseSpec(arch=arch), refresh=refresh_base,
                                     say=lambda m: say(f"  base: {m}"))  # fmt: skip
        seconds["base"] = time.monotonic() - t0
        say(f"base {base}: {'made' if made else 'cached'} ({seconds['base']:.1f}s)")
        spec = BuildSpec(root, tag, arch, base, debian_image or base, out, layers, ca_bundle(os.environ))
        if spec.ca_bundle:
            say(f"pip steps trust the host's CA bundle {spec.ca_bundle} (a build secret, not in any layer)")
        t0 = time.monotonic()
        progress = StepProgress(say)
        say(f"buildah bud {spec.dockerfile} -> {name}")
        buildah.run(*bud_args(spec), what="buildah bud (the Dockerfile)", on_line=progress,
                    hint="a RUN step that failed printed its error above; fix it and build again (finished "
                         "steps are reused)")  # fmt: skip
        seconds["bud"] = time.monotonic() - t0
        say(f"built {name} in {seconds['bud']:.1f}s ({progress.steps} steps, {progress.cached} from cache)")
        image_id = buildah.output("inspect", "--type", "image", "--format", "{{.FromImageID}}", name)
        if by_content:
            name = image_name(content_tag(tag, image_id))
            buildah.run("tag", spec.name, name, what=f"buildah tag {name}")
        t0 = time.monotonic()
        reused = archive is None and archive_is_current(out, name, image_id)
        if reused:
            say(f"archive already holds {name} ({image_id[:19]})")
        else:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.unlink(missing_ok=True)  # written afresh, never over an older archive
            if archive is None:
                _stamp(out).unlink(missing_ok=True)
            buildah.run(*push_args(name, out), what=f"buildah push (the archive {out})")
            oci.name_for_containerd(out, name)
            if archive is None:  # only the cache's own archives get a stamp beside them
                stamp = {"name": name, "image_id": image_id, "size": out.stat().st_size}
                atomic_write(_stamp(out), json.dumps(stamp, sort_keys=True), durable=False)
        seconds["archive"] = time.monotonic() - t0
        size = out.stat().st_size / 2**20
        say(f"archive {'kept' if reused else 'written'} in {seconds['archive']:.1f}s: {size:.0f} MiB")
    return BuildResult(name, out, image_id, base, made, seconds, progress.steps, progress.cached, reused, log)


def ensure_image(say: Callable[[str], None] = lambda _msg: None, context: Path | None = None) -> tuple[str, Path]:
    """dralab's image for this checkout as ``(name, OCI archive)``, for clusters that import it (no registry).

    Named ``dralab.local/dralab:<version>-<image ID prefix>``: changed sources give a new name, so a
    ``helm upgrade`` rolls the pods onto them; unchanged sources reuse every layer and the archive
    (seconds). The archive is ``${DRALAB_CACHE:-~/.cache/dralab}/image/out/dralab-local-<arch>.oci.tar``.
    """
    from dralab import __version__

    result = build(__version__, context=context, say=say, by_content=True)
    return result.name, result.archive


# What the Dockerfile copies (the rest of the checkout is in .dockerignore): a change here is a new image.
CONTEXT_INPUTS = ("Dockerfile", "pyproject.toml", "README.md", "dralab", "vcore")


def context_digest(context: Path | None = None) -> str:
    """A digest of the build's inputs, without building: what Pulumi compares to decide on a new import.

    Names and contents of the files under ``CONTEXT_INPUTS``, less compiled caches and vcore's build folder.
    """
    import hashlib

    root = find_context(context)
    digest = hashlib.sha256()
    for top in CONTEXT_INPUTS:
        base = root / top
        files = sorted(p for p in base.rglob("*") if p.is_file()) if base.is_dir() else [base]
        for path in files:
            rel = path.relative_to(root).as_posix()
            if "__pycache__" in rel or rel.startswith("vcore/build/") or not path.is_file():
                continue
            digest.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]
