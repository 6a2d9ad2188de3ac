"""CDI spec rendering (pure): one transient spec per claim plus a node-wide ``common`` spec.

File names follow the kubelet-plugin convention ``k8s.<driver>-<class>_<claimUID>.yaml`` (Lab 20
Step 6 shows ``k8s.ascend.project-hami.io-npu_<uid>.yaml`` and ``..._common.yaml``); the claim's
device is named after the claim UID, so its fully qualified id is ``<kind>=<claimUID>``.
The claim spec carries annotations that let the driver rebuild its checkpoint from the specs alone.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import yaml

from dralab.driver.devices import DeviceNode, Mount

CDI_VERSION = "0.6.0"  # the first version with annotations
COMMON = "common"
ANNOTATION_PREFIX = "dralab.io/"
ANN_CLAIM = ANNOTATION_PREFIX + "claim"
ANN_CLAIM_UID = ANNOTATION_PREFIX + "claim-uid"
ANN_DEVICES = ANNOTATION_PREFIX + "prepared-devices"
ANN_NOTES = ANNOTATION_PREFIX + "notes"
ANN_CLAIM_DIR = ANNOTATION_PREFIX + "claim-dir"


@dataclass(frozen=True)
class ContainerEdits:
    """CDI container edits in a fixed order: env, device nodes, mounts."""

    env: tuple[tuple[str, str], ...] = ()
    device_nodes: tuple[DeviceNode, ...] = ()
    mounts: tuple[Mount, ...] = ()

    def to_cdi(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.env:
            out["env"] = [f"{k}={v}" for k, v in self.env]
        if self.device_nodes:
            out["deviceNodes"] = [{"path": n.path, "hostPath": n.host_path} for n in self.device_nodes]
        if self.mounts:
            out["mounts"] = [
                {
                    "hostPath": m.host_path,
                    "containerPath": m.container_path,
                    "options": ["ro" if m.read_only else "rw", "nosuid", "nodev", "bind"],
                }
                for m in self.mounts
            ]
        return out


@dataclass(frozen=True)
class PreparedDevice:
    """One device of a prepared claim, as the kubelet gets it back."""

    request_names: tuple[str, ...]
    pool_name: str
    device_name: str
    cdi_device_ids: tuple[str, ...]
    share_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "requestNames": list(self.request_names),
            "poolName": self.pool_name,
            "deviceName": self.device_name,
            "cdiDeviceIDs": list(self.cdi_device_ids),
            "shareID": self.share_id,
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> PreparedDevice:
        return cls(
            request_names=tuple(raw.get("requestNames") or ()),
            pool_name=str(raw["poolName"]),
            device_name=str(raw["deviceName"]),
            cdi_device_ids=tuple(raw.get("cdiDeviceIDs") or ()),
            share_id=raw.get("shareID"),
        )


@dataclass(frozen=True)
class ClaimRef:
    """The claim a spec belongs to."""

    namespace: str
    name: str
    uid: str


@dataclass(frozen=True)
class ClaimSpecInput:
    """Everything a claim's CDI spec is rendered from."""

    kind: str
    claim: ClaimRef
    edits: ContainerEdits
    devices: tuple[PreparedDevice, ...]
    claim_dir: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)


def spec_file_name(driver: str, cdi_class: str, name: str) -> str:
    """``k8s.<driver>-<class>_<name>.yaml`` (name: claim UID or ``common``)."""
    return f"k8s.{driver}-{cdi_class}_{name}.yaml"


def claim_uid_from_file_name(file_name: str, driver: str, cdi_class: str) -> str | None:
    """The claim UID a spec file name carries; None for other drivers' files and the common spec."""
    match = re.fullmatch(re.escape(f"k8s.{driver}-{cdi_class}_") + r"(?P<uid>[0-9a-zA-Z-]+)\.yaml", file_name)
    if not match or match["uid"] == COMMON:
        return None
    return match["uid"]


def qualified_id(kind: str, name: str) -> str:
    """A fully qualified CDI device id, ``<vendor>/<class>=<name>``."""
    return f"{kind}={name}"


def render_claim_spec(spec: ClaimSpecInput) -> dict[str, Any]:
    """The CDI spec of one claim: one device named by the claim UID."""
    annotations = {
        ANN_CLAIM: f"{spec.claim.namespace}/{spec.claim.name}",
        ANN_CLAIM_UID: spec.claim.uid,
        ANN_DEVICES: json.dumps([d.to_dict() for d in spec.devices], sort_keys=True, separators=(",", ":")),
    }
    if spec.claim_dir:
        annotations[ANN_CLAIM_DIR] = spec.claim_dir
    if spec.notes:
        annotations[ANN_NOTES] = "; ".join(spec.notes)
    return {
        "cdiVersion": CDI_VERSION,
        "kind": spec.kind,
        "annotations": annotations,
        "devices": [{"name": spec.claim.uid, "containerEdits": spec.edits.to_cdi()}],
    }


def render_common_spec(kind: str, edits: ContainerEdits, driver: str) -> dict[str, Any]:
    """The node-wide spec: a ``common`` device with the edits every claim of the driver shares."""
    common_edits = edits.to_cdi() or {"env": [f"DRALAB_DRIVER={driver}"]}
    return {"cdiVersion": CDI_VERSION, "kind": kind, "devices": [{"name": COMMON, "containerEdits": common_edits}]}


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def dump_spec(spec: dict[str, Any]) -> str:
    """The text of a spec file: JSON, which is YAML too, so the ``.yaml`` name CDI loaders expect holds.

    JSON because it is on the Prepare path: ``json.dumps`` without indentation runs in C, tens of
    times faster than PyYAML's representer (which stays in Python even with libyaml). Keys keep
    the order built; ``dralab driver cdi`` prints the same spec as YAML for people.
    """
    return json.dumps(spec) + "\n"


def load_spec(text: str) -> Any:
    """Parse a spec file's text (JSON as written now, or YAML as earlier versions and other tools write)."""
    try:
        return json.loads(text)
    except ValueError:
        return yaml.load(text, Loader=_LOADER)


@dataclass(frozen=True)
class ParsedClaimSpec:
    """What a claim spec on disk says about the claim it prepared."""

    claim: ClaimRef
    devices: tuple[PreparedDevice, ...]
    claim_dir: str | None


def parse_claim_spec(data: Any) -> ParsedClaimSpec | None:
    """Read back the annotations of a claim spec; None when it is not one of ours or is damaged."""
    if not isinstance(data, dict):
        return None
    ann = data.get("annotations")
    if not isinstance(ann, dict) or ANN_CLAIM_UID not in ann:
        return None
    try:
        namespace, _, name = str(ann[ANN_CLAIM]).partition("/")
        devices = tuple(PreparedDevice.from_dict(d) for d in json.loads(ann[ANN_DEVICES]))
    except (KeyError, ValueError, TypeError):
        return None
    return ParsedClaimSpec(
        claim=ClaimRef(namespace=namespace, name=name, uid=str(ann[ANN_CLAIM_UID])),
        devices=devices,
        claim_dir=ann.get(ANN_CLAIM_DIR),
    )


def env_of(spec: dict[str, Any]) -> dict[str, str]:
    """The env of a claim spec's device as a mapping (for previews and tests)."""
    env: dict[str, str] = {}
    for device in spec.get("devices") or []:
        for entry in (device.get("containerEdits") or {}).get("env") or []:
            key, _, value = entry.partition("=")
            env[key] = value
    return env


def merge_edits(parts: Iterable[ContainerEdits]) -> ContainerEdits:
    """Concatenate edits, dropping repeated env keys, device paths and mount targets (first wins)."""
    env: dict[str, str] = {}
    nodes: dict[str, DeviceNode] = {}
    mounts: dict[str, Mount] = {}
    for part in parts:
        for k, v in part.env:
            env.setdefault(k, v)
        for n in part.device_nodes:
            nodes.setdefault(n.path, n)
        for m in part.mounts:
            mounts.setdefault(m.container_path, m)
    return ContainerEdits(env=tuple(env.items()), device_nodes=tuple(nodes.values()), mounts=tuple(mounts.values()))
