"""OCI image archives: name them for containerd, and read back what an image holds.

``buildah push IMG oci-archive:FILE:NAME`` records NAME only as ``org.opencontainers.image.ref.name``.
``ctr images import`` without ``--base-name`` keeps such a full reference only when it starts with
its own ``import-<date>`` prefix, so the image would arrive unnamed; ``io.containerd.image.name``
(as dralab_kit.cluster.node.images writes it) is taken as is. ``name_for_containerd`` adds it.

The reader checks the layout (``oci-layout``, ``index.json``, every blob present with its digest)
and lists the final file system, so tests and ``dralab image inspect`` can say what is inside
without a container runtime.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from dralab.errors import UserError

CONTAINERD_NAME = "io.containerd.image.name"
REF_NAME = "org.opencontainers.image.ref.name"
_CHUNK = 1 << 20


def name_for_containerd(archive: Path, name: str) -> None:
    """Rewrite ``archive`` with ``io.containerd.image.name: name`` on its manifests (atomic)."""
    tmp = archive.with_name(archive.name + ".tmp")
    with tarfile.open(archive, "r:") as src, tarfile.open(tmp, "w:", format=tarfile.PAX_FORMAT) as dst:
        for member in src:
            fh = src.extractfile(member) if member.isfile() else None
            if member.name.lstrip("./") == "index.json" and fh is not None:
                index = json.loads(fh.read())
                for manifest in index.get("manifests", []):
                    manifest.setdefault("annotations", {})[CONTAINERD_NAME] = name
                data = json.dumps(index, sort_keys=True).encode()
                member.size = len(data)
                dst.addfile(member, io.BytesIO(data))
            else:
                dst.addfile(member, fh)
    os.replace(tmp, archive)


@dataclass
class ImageInfo:
    """What an archive's (single) image says about itself."""

    names: list[str]
    manifest_digest: str
    architecture: str
    os: str
    user: str
    entrypoint: list[str]
    cmd: list[str]
    env: list[str]
    labels: dict[str, str]
    layers: list[tuple[str, int]] = field(default_factory=list)  # (digest, compressed size)

    @property
    def size(self) -> int:
        return sum(size for _, size in self.layers)


class Archive:
    """An OCI image layout in a tar file (one image)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._tar = tarfile.open(path, "r:")  # noqa: SIM115 (closed by __exit__)
        except (OSError, tarfile.TarError) as exc:
            raise UserError(f"{path} is not a readable tar archive: {exc}") from exc
        self._members = {m.name.removeprefix("./"): m for m in self._tar.getmembers()}

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, *_exc: object) -> None:
        self._tar.close()

    def _read(self, name: str) -> bytes:
        member = self._members.get(name)
        fh = self._tar.extractfile(member) if member is not None else None
        if fh is None:
            raise UserError(f"{self.path}: no {name} (not an OCI image layout archive)")
        return fh.read()

    def _json(self, name: str) -> Any:
        return json.loads(self._read(name))

    def blob_name(self, digest: str) -> str:
        algo, _, hexdigest = digest.partition(":")
        return f"blobs/{algo}/{hexdigest}"

    def verify(self) -> None:
        """The layout marker, and every blob's content matching its digest."""
        if self._json("oci-layout").get("imageLayoutVersion") != "1.0.0":
            raise UserError(f"{self.path}: oci-layout has no imageLayoutVersion 1.0.0")
        for name, member in self._members.items():
            if not name.startswith("blobs/sha256/") or not member.isfile():
                continue
            fh = self._tar.extractfile(member)
            assert fh is not None
            digest = hashlib.sha256()
            while chunk := fh.read(_CHUNK):
                digest.update(chunk)
            if digest.hexdigest() != name.rsplit("/", 1)[1]:
                raise UserError(f"{self.path}: blob {name} does not match its digest")

    def info(self) -> ImageInfo:
        index = self._json("index.json")
        manifests = index.get("manifests") or []
        if index.get("schemaVersion") != 2 or len(manifests) != 1:
            raise UserError(f"{self.path}: index.json must list exactly one image manifest")
        desc = manifests[0]
        manifest = self._json(self.blob_name(desc["digest"]))
        config = self._json(self.blob_name(manifest["config"]["digest"]))
        inner = config.get("config") or {}
        annotations = desc.get("annotations") or {}
        names = [annotations[k] for k in (CONTAINERD_NAME, REF_NAME) if k in annotations]
        missing = [x["digest"] for x in manifest["layers"] if self.blob_name(x["digest"]) not in self._members]
        if missing:
            raise UserError(f"{self.path}: layers missing from the archive: {', '.join(missing)}")
        return ImageInfo(
            names=list(dict.fromkeys(names)),
            manifest_digest=desc["digest"],
            architecture=config.get("architecture", ""),
            os=config.get("os", ""),
            user=inner.get("User", ""),
            entrypoint=inner.get("Entrypoint") or [],
            cmd=inner.get("Cmd") or [],
            env=inner.get("Env") or [],
            labels=inner.get("Labels") or {},
            layers=[(layer["digest"], int(layer["size"])) for layer in manifest["layers"]],
        )

    def layer_entries(self, digest: str) -> Iterator[tarfile.TarInfo]:
        member = self._members.get(self.blob_name(digest))
        fh = self._tar.extractfile(member) if member is not None else None
        if fh is None:
            raise UserError(f"{self.path}: layer {digest} is missing")
        with tarfile.open(fileobj=fh, mode="r|*") as layer:  # gzip or plain, streamed
            yield from layer

    def files(self) -> dict[str, tarfile.TarInfo]:
        """The image's final file system: every layer applied in order, whiteouts honoured."""
        tree: dict[str, tarfile.TarInfo] = {}
        for digest, _ in self.info().layers:
            for entry in self.layer_entries(digest):
                path = PurePosixPath("/", entry.name.removeprefix("./"))
                base = path.name
                if base == ".wh..wh..opq":  # opaque directory: hide what lower layers had in it
                    prefix = f"{path.parent}/"
                    for key in [k for k in tree if k.startswith(prefix)]:
                        del tree[key]
                elif base.startswith(".wh."):
                    gone = str(path.parent / base.removeprefix(".wh."))
                    for key in [k for k in tree if k == gone or k.startswith(gone + "/")]:
                        del tree[key]
                else:
                    tree[str(path)] = entry
        return tree


def site_packages(files: dict[str, tarfile.TarInfo]) -> list[str]:
    """Top-level names in every site-packages of the image (packages, modules, *.dist-info)."""
    names: set[str] = set()
    for path in files:
        parts = PurePosixPath(path).parts
        if "site-packages" in parts:
            i = parts.index("site-packages")
            if len(parts) > i + 1:
                names.add(parts[i + 1])
    return sorted(names)
