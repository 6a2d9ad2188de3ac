"""Container images without a registry: OCI layout archives built from local files.

Two images, both imported into containerd's ``k8s.io`` namespace with ``ctr images import``:

- ``PAUSE_IMAGE``: the pod sandbox, a static binary built from ``pause.c`` with ``gcc -static``.
- ``LAB_IMAGE``: busybox (Debian's ``busybox`` package, every applet linked; ``sleep`` replaced by
  ``sleep.c``, which exits on SIGTERM even as a container's PID 1 - Debian's static busybox
  would run its own ``sleep`` applet instead, so pod deletions would wait out the grace period)
  plus vcore's fake
  runtimes (libascendcl, libcuda, libnvidia-ml) and the probe. The probe is linked dynamically
  and its libc travels with it, because ``LD_PRELOAD`` and ``/etc/ld.so.preload`` (how the CDI
  spec injects vcore) do nothing for a static binary.

The archive is an OCI image layout (``oci-layout``, ``index.json`` naming the image through the
``io.containerd.image.name`` annotation, blobs) with one uncompressed layer; files get fixed
owners and mtimes so the same inputs give the same digests.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import platform
import re
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from dralab.errors import UserError

PAUSE_IMAGE = "dralab.local/pause:1.0"
LAB_IMAGE = "dralab.local/lab:1.0"
BUSYBOX_CANDIDATES = ("/bin/busybox", "/usr/bin/busybox")
FAKE_LIB_DIR = "/usr/lib"
PROBE_PATH = "/usr/local/bin/vcore-probe"
_LDD_LINE = re.compile(r"(?:\S+ => )?(/\S+) \(0x[0-9a-f]+\)")
_MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar"
_MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
_MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"


def oci_arch(machine: str | None = None) -> str:
    """The OCI architecture name of this machine (x86_64 -> amd64, aarch64 -> arm64)."""
    machine = machine or platform.machine()
    return {"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64", "amd64": "amd64"}.get(machine, machine)


@dataclass
class Layer:
    """Files of one image layer: directories, regular files (from host paths) and symlinks."""

    dirs: dict[str, int] = field(default_factory=dict)
    files: dict[str, tuple[Path, int]] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)

    def add_dir(self, path: str, mode: int = 0o755) -> None:
        parts = path.strip("/").split("/")
        for i in range(1, len(parts) + 1):
            self.dirs.setdefault("/".join(parts[:i]), mode if i == len(parts) else 0o755)

    def add_file(self, path: str, source: Path, mode: int | None = None) -> None:
        self.add_dir(str(Path(path).parent))
        real = source.resolve()
        self.files[path.strip("/")] = (real, mode if mode is not None else (real.stat().st_mode & 0o7777))

    def add_link(self, path: str, target: str) -> None:
        self.add_dir(str(Path(path).parent))
        self.links[path.strip("/")] = target

    def tar_bytes(self) -> bytes:
        """The layer as a deterministic tar (sorted, owner 0:0, mtime 0)."""
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
            entries: list[tuple[str, str]] = [(p, "d") for p in self.dirs]
            entries += [(p, "f") for p in self.files] + [(p, "l") for p in self.links]
            for name, kind in sorted(entries):
                info = tarfile.TarInfo(name)
                info.uid = info.gid = 0
                info.mtime = 0
                if kind == "d":
                    info.type, info.mode = tarfile.DIRTYPE, self.dirs[name]
                    tar.addfile(info)
                elif kind == "l":
                    info.type, info.linkname, info.mode = tarfile.SYMTYPE, self.links[name], 0o777
                    tar.addfile(info)
                else:
                    source, mode = self.files[name]
                    data = source.read_bytes()
                    info.size, info.mode = len(data), mode
                    tar.addfile(info, io.BytesIO(data))
        return buf.getvalue()


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def write_oci_archive(
    out: Path, name: str, layer: Layer, entrypoint: list[str], env: Iterable[str] = (), arch: str | None = None
) -> str:
    """Write ``name`` as an OCI layout tar at ``out``; returns the manifest digest."""
    layer_tar = layer.tar_bytes()
    layer_digest = _digest(layer_tar)
    config = {
        "architecture": arch or oci_arch(),
        "os": "linux",
        "config": {"Entrypoint": entrypoint, "Env": list(env), "WorkingDir": "/"},
        "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
        "history": [{"created_by": "dralab_kit.cluster.node.images", "created": "1970-01-01T00:00:00Z"}],
        "created": "1970-01-01T00:00:00Z",
    }
    config_bytes = json.dumps(config, sort_keys=True).encode()
    manifest = {
        "schemaVersion": 2,
        "mediaType": _MEDIA_MANIFEST,
        "config": {"mediaType": _MEDIA_CONFIG, "digest": _digest(config_bytes), "size": len(config_bytes)},
        "layers": [{"mediaType": _MEDIA_LAYER, "digest": layer_digest, "size": len(layer_tar)}],
    }
    manifest_bytes = json.dumps(manifest, sort_keys=True).encode()
    manifest_digest = _digest(manifest_bytes)
    tag = name.rsplit(":", 1)[-1]
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [
            {
                "mediaType": _MEDIA_MANIFEST,
                "digest": manifest_digest,
                "size": len(manifest_bytes),
                "annotations": {"io.containerd.image.name": name, "org.opencontainers.image.ref.name": tag},
                "platform": {"architecture": config["architecture"], "os": "linux"},
            }
        ],
    }
    blobs = [layer_tar, config_bytes, manifest_bytes]
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    with tarfile.open(tmp, mode="w") as tar:
        _add_bytes(tar, "oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode())
        _add_bytes(tar, "index.json", json.dumps(index, sort_keys=True).encode())
        for blob in blobs:
            _add_bytes(tar, f"blobs/sha256/{_digest(blob).split(':', 1)[1]}", blob)
    os.replace(tmp, out)
    return manifest_digest


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), 0o644, 0
    tar.addfile(info, io.BytesIO(data))


def compile_static(source_name: str, work: Path) -> Path:
    """One of this package's C files built with ``gcc -static``."""
    gcc = shutil.which(os.environ.get("CC", "gcc"))
    if gcc is None:
        raise UserError("building the node images needs gcc: install it (apt-get install gcc)")
    work.mkdir(parents=True, exist_ok=True)
    source = Path(__file__).with_name(source_name)
    binary = work / source.stem
    proc = subprocess.run(
        [gcc, "-static", "-O2", "-s", "-o", str(binary), str(source)], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise UserError(f"gcc -static of {source} failed (is the static libc, libc6-dev, installed?):\n{proc.stderr}")
    return binary


def build_pause(out: Path, work: Path) -> str:
    """The pause image: ``pause.c`` compiled with ``gcc -static``."""
    binary = compile_static("pause.c", work)
    layer = Layer()
    layer.add_file("pause", binary, 0o755)
    return write_oci_archive(out, PAUSE_IMAGE, layer, ["/pause"])


def shared_libraries(binary: Path) -> list[Path]:
    """Absolute paths of the libraries (and loader) ``binary`` loads, as ``ldd`` resolves them."""
    proc = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise UserError(f"ldd {binary} failed: {proc.stderr.strip() or proc.stdout.strip()}")
    return parse_ldd(proc.stdout)


def parse_ldd(text: str) -> list[Path]:
    """Library paths from ``ldd`` output (``linux-vdso`` and unresolved entries are skipped)."""
    out = []
    for line in text.splitlines():
        match = _LDD_LINE.search(line.strip())
        if match:
            out.append(Path(match.group(1)))
    return out


def find_busybox() -> Path:
    """Debian's busybox (the dynamic build: its shell runs ``sleep`` from PATH, see ``sleep.c``)."""
    for candidate in BUSYBOX_CANDIDATES:
        path = Path(candidate)
        if path.is_file():
            return path
    raise UserError("the lab image needs busybox: install it with `apt-get install -y busybox`")


def is_static(binary: Path) -> bool:
    """True when ``binary`` loads no shared library (a static busybox runs its own applets first)."""
    proc = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=False)
    return proc.returncode != 0 or not parse_ldd(proc.stdout)


def busybox_applets(busybox: Path) -> list[str]:
    proc = subprocess.run([str(busybox), "--list"], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise UserError(f"{busybox} --list failed: {proc.stderr.strip()}")
    return sorted(a for a in proc.stdout.split() if a and "/" not in a and a != "busybox")


def lab_layer(busybox: Path, probe: Path, fake_dir: Path, library: Path) -> Layer:
    """busybox with every applet, the probe and its libraries, the fake runtimes."""
    layer = Layer()
    layer.add_file("bin/busybox", busybox, 0o755)
    if not is_static(busybox):
        for lib in shared_libraries(busybox):
            layer.add_file(str(lib), lib)
    for applet in busybox_applets(busybox):
        layer.add_link(f"bin/{applet}", "busybox")
    layer.add_file(PROBE_PATH, probe, 0o755)
    needed: dict[str, Path] = {}
    for binary in (probe, library, *sorted(p for p in fake_dir.iterdir() if p.is_file() and not p.is_symlink())):
        for lib in shared_libraries(binary):
            needed.setdefault(str(lib), lib)
    for path, lib in needed.items():
        layer.add_file(path, lib)
    for entry in sorted(fake_dir.iterdir()):
        target = f"{FAKE_LIB_DIR}/{entry.name}"
        if entry.is_symlink():
            layer.add_link(target, os.readlink(entry))
        else:
            layer.add_file(target, entry, 0o755)
    layer.add_dir("tmp", 0o1777)
    layer.add_dir("etc")
    layer.add_dir("dev")
    layer.add_dir("proc")
    layer.add_dir("sys")
    return layer


def build_lab(out: Path, work: Path) -> str:
    """The lab image (vcore is built first if needed)."""
    from dralab import vcore

    vcore.ensure_built()
    work.mkdir(parents=True, exist_ok=True)
    etc = work / "etc"
    etc.mkdir(exist_ok=True)
    (etc / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n")
    (etc / "group").write_text("root:x:0:\nnogroup:x:65534:\n")
    layer = lab_layer(find_busybox(), vcore.probe_path(), vcore.fake_runtime_dir(), vcore.library_path())
    layer.links.pop("bin/sleep", None)
    layer.add_file("bin/sleep", compile_static("sleep.c", work), 0o755)  # exits on SIGTERM as PID 1
    layer.add_file("etc/passwd", etc / "passwd", 0o644)
    layer.add_file("etc/group", etc / "group", 0o644)
    env = ["PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/root"]
    return write_oci_archive(out, LAB_IMAGE, layer, ["/bin/sh"], env)


def build_images(folder: Path) -> dict[str, Path]:
    """Both archives under ``folder``; ``{image name: archive}``."""
    with tempfile.TemporaryDirectory(prefix="dralab-img-") as tmp:
        pause = folder / "pause.oci.tar"
        lab = folder / "lab.oci.tar"
        build_pause(pause, Path(tmp) / "pause")
        build_lab(lab, Path(tmp) / "lab")
    return {PAUSE_IMAGE: pause, LAB_IMAGE: lab}
