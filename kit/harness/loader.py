"""Finding labs: the ones shipped in the ``labs`` package, a lab folder, or a suite file.

``resolve_lab("lab20-ascend-hami-dra")`` finds a shipped lab by name; a path to a folder (or to
its ``lab.yaml``) works too. A suite file (``kind: LabSuite``, e.g. ``tests/e2e/labs.yaml``) lists
the labs the test suite replays.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from dralab import yamlio
from dralab.errors import UserError
from harness.schema import API_VERSION, Lab, load_lab


def labs_root() -> Path:
    """The folder of the shipped labs."""
    import labs

    return Path(labs.__file__).resolve().parent


def shipped_labs() -> list[Path]:
    """``lab.yaml`` of every shipped lab, by folder name."""
    return sorted(p for p in labs_root().glob("*/lab.yaml"))


def resolve_lab(ref: str | Path) -> Path:
    """The lab.yaml that ``ref`` (a shipped lab name or a path) names."""
    path = Path(ref).expanduser()
    if path.is_dir() and (path / "lab.yaml").is_file():
        return (path / "lab.yaml").resolve()
    if path.is_file():
        return path.resolve()
    for lab_yaml in shipped_labs():
        if lab_yaml.parent.name == str(ref):
            return lab_yaml
    names = ", ".join(p.parent.name for p in shipped_labs()) or "none"
    raise UserError(f"no lab {str(ref)!r}: give a lab folder or one of the shipped labs ({names})")


def list_labs() -> list[Lab]:
    return [load_lab(p) for p in shipped_labs()]


def is_suite(data: Any) -> bool:
    return isinstance(data, dict) and data.get("kind") == "LabSuite"


def load_suite(path: Path) -> list[Path]:
    """The lab.yaml files a suite file lists (names of shipped labs or paths relative to the suite)."""
    try:
        data = yamlio.load(path.read_text(), str(path))
    except yaml.YAMLError as exc:
        raise UserError(f"{path}: not valid YAML ({exc})") from None
    if not is_suite(data) or data.get("apiVersion") != API_VERSION:
        raise UserError(f"{path}: a lab suite starts with apiVersion: {API_VERSION} and kind: LabSuite")
    entries = data.get("labs")
    if not isinstance(entries, list) or not entries:
        raise UserError(f"{path}: 'labs' must list at least one lab")
    out = []
    for entry in entries:
        candidate = path.parent / str(entry)
        out.append(resolve_lab(candidate if candidate.exists() else str(entry)))
    return out
