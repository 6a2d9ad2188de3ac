"""What a container would get from a claim: CDI specs on a node and the kubelet's records.

The local profile runs no containers, so the node layer is observed the way a container runtime
would see it: the CDI spec files in ``<node_dir>/cdi/`` resolved by the device ids the kubelet
stand-in got from ``NodePrepareResources`` (``<node_dir>/kubelet-records.jsonl``). Resolution
follows CDI: a spec's top-level ``containerEdits`` apply when any of its devices is injected,
then each device's own edits, in the order of the ids.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml


@dataclass(frozen=True)
class CdiSpec:
    path: Path
    kind: str
    data: dict[str, Any]

    def device(self, name: str) -> dict[str, Any] | None:
        for dev in self.data.get("devices") or []:
            if dev.get("name") == name:
                return dev
        return None


def read_specs(cdi_dir: Path) -> list[CdiSpec]:
    """Every readable spec in ``cdi_dir`` (YAML or JSON), sorted by file name."""
    specs: list[CdiSpec] = []
    if not cdi_dir.is_dir():
        return specs
    for path in sorted(cdi_dir.iterdir()):
        if path.suffix not in (".yaml", ".yml", ".json") or path.name.startswith("."):
            continue
        try:
            data = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError):
            continue  # a spec being written or a foreign file: the runtime would skip it too
        if isinstance(data, dict) and data.get("kind"):
            specs.append(CdiSpec(path=path, kind=str(data["kind"]), data=data))
    return specs


def read_records(path: Path) -> list[dict[str, Any]]:
    """The kubelet stand-in's call records (one JSON object a line; torn last lines skipped)."""
    if not path.is_file():
        return []
    out = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def checkpoint_records(node_dir: Path, claim_uid: str) -> list[dict[str, Any]]:
    """A prepare record for ``claim_uid`` when a driver's checkpoint holds it as prepared.

    On the node profile only the real kubelet calls ``NodePrepareResources``, and the driver
    checkpoints each claim it prepared (``driver-state/<driver>/checkpoint.json``) until the
    kubelet calls ``NodeUnprepareResources``; absence after a prepare therefore means unprepared.
    """
    out: list[dict[str, Any]] = []
    from dralab.driver.checkpoint import newest_document

    for path in _checkpoints(node_dir):
        # the checkpoint has two slots written in turn: read the newest intact one, not this file alone
        claims = (newest_document(path) or {}).get("claims") or {}
        entry = claims.get(claim_uid)
        if isinstance(entry, dict) and entry.get("state") == "PrepareCompleted":
            ids = [i for d in entry.get("devices") or [] for i in d.get("cdiDeviceIDs") or []]
            out.append({
                "call": "NodePrepareResources", "source": "driver-checkpoint", "driver": path.parent.name,
                "claims": [{"uid": claim_uid}], "cdiDeviceIDs": list(dict.fromkeys(ids)), "time": "",
            })  # fmt: skip
    return out


def _checkpoints(node_dir: Path) -> list[Path]:
    """Each driver's checkpoint (``driver-state/<driver>/checkpoint.json``) with either slot on disk: a
    driver's first write goes to the second slot (``checkpoint.1.json``), so the first may not exist yet."""
    from dralab.driver.checkpoint import slot_files

    folders = sorted(p for p in (node_dir / "driver-state").glob("*") if p.is_dir())
    return [f / "checkpoint.json" for f in folders if any(s.is_file() for s in slot_files(f / "checkpoint.json"))]


def _has_checkpoint(node_dir: Path) -> bool:
    return bool(_checkpoints(node_dir))


def records_for(records: list[dict[str, Any]], claim_uid: str) -> list[dict[str, Any]]:
    return [r for r in records if any(c.get("uid") == claim_uid for c in r.get("claims") or [])]


def _env_dict(env: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in env:
        key, _, value = str(item).partition("=")
        out[key] = value
    return out


def _merge_edits(into: dict[str, Any], edits: dict[str, Any]) -> None:
    into["env"].update(_env_dict(edits.get("env") or []))
    into["deviceNodes"] += [d.get("path") for d in edits.get("deviceNodes") or []]
    into["mounts"] += list(edits.get("mounts") or [])
    into["hooks"] += list(edits.get("hooks") or [])


def claim_view(node_dir: Path, claim_uid: str) -> dict[str, Any]:
    """Everything the node knows about one claim, as one mapping labs can match and capture.

    Keys: ``exists`` (a spec names a device after the claim), ``files`` (those specs),
    ``specFiles`` (every spec on the node), ``kind``,
    ``cdiDeviceIDs``, ``env`` (mapping), ``deviceNodes``, ``mounts``, ``hooks``,
    ``prepared`` / ``unprepared`` (the kubelet's last calls), ``prepareError``, ``records``.
    """
    specs = read_specs(node_dir / "cdi")
    records = records_for(read_records(node_dir / "kubelet-records.jsonl"), claim_uid)
    from_checkpoints = not records
    if from_checkpoints:
        # a real kubelet keeps no call records: the drivers' checkpoints say what it prepared
        records = checkpoint_records(node_dir, claim_uid)
    prepares = [r for r in records if r.get("call") == "NodePrepareResources"]
    unprepares = [r for r in records if r.get("call") == "NodeUnprepareResources"]
    last_prepare = prepares[-1] if prepares else None
    ids: list[str] = list((last_prepare or {}).get("cdiDeviceIDs") or [])
    own = [s for s in specs if s.device(claim_uid) is not None]
    if not ids:
        ids = [f"{s.kind}={claim_uid}" for s in own]
    view: dict[str, Any] = {
        "exists": bool(own),
        "specFiles": [s.path.name for s in specs],
        "files": [s.path.name for s in own],
        "kind": own[0].kind if own else None,
        "cdiDeviceIDs": ids,
        "env": {},
        "deviceNodes": [],
        "mounts": [],
        "hooks": [],
        "unresolved": [],
        "prepared": last_prepare is not None and not last_prepare.get("error"),
        "unprepared": (bool(unprepares)
        and (not prepares or unprepares[-1].get("time", "") >= prepares[-1].get("time", "")))
        # without call records (no tap: profile node-chart), NodeUnprepareResources is what takes a claim out
        # of every driver checkpoint and its spec off the node; a lab asks this only after seeing it prepared
        or (from_checkpoints and not prepares and not own and _has_checkpoint(node_dir)),
        "prepareError": (last_prepare or {}).get("error"),
        "records": len(records),
    }
    applied_specs: set[Path] = set()
    for device_id in ids:
        kind, _, name = device_id.partition("=")
        spec = next((s for s in specs if s.kind == kind and s.device(name) is not None), None)
        if spec is None:
            view["unresolved"].append(device_id)
            continue
        if spec.path not in applied_specs:
            applied_specs.add(spec.path)
            _merge_edits(view, spec.data.get("containerEdits") or {})
        _merge_edits(view, (spec.device(name) or {}).get("containerEdits") or {})
    return view
