"""The stand-in's own checkpoint: which claims it prepared, with which driver, for which pods.

NodeUnprepareResources gets only namespace/name/uid, and the claim object may already be gone
when the last pod is; so, like the kubelet, the stand-in remembers what it prepared and survives
its own restarts. A corrupt file is moved aside and reported instead of crashing the process.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from dralab.util import atomic_write, get_logger

log = get_logger("dralab.standin")
VERSION = 1


@dataclass
class PreparedClaim:
    """One claim prepared on this node."""

    uid: str
    namespace: str
    name: str
    drivers: list[str]
    pods: dict[str, str] = field(default_factory=dict)  # pod uid -> pod name
    cdi_device_ids: list[str] = field(default_factory=list)
    unpreparing: bool = False
    last_pod: dict[str, str] = field(default_factory=dict)  # the pod that used it last (for records)


class Checkpoint:
    """Claims prepared on this node, persisted atomically on every change."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.claims: dict[str, PreparedClaim] = {}

    @classmethod
    def load(cls, path: Path) -> Checkpoint:
        cp = cls(path)
        try:
            raw = json.loads(path.read_text())
            if raw.get("version") != VERSION:
                raise ValueError(f"unknown checkpoint version {raw.get('version')!r}")
            cp.claims = {uid: PreparedClaim(**entry) for uid, entry in raw.get("claims", {}).items()}
        except FileNotFoundError:
            pass
        except (ValueError, TypeError, KeyError) as exc:
            aside = path.with_name(f"{path.name}.corrupt-{int(time.time())}")
            path.rename(aside)
            log.error(
                "checkpoint unreadable; starting empty", extra={"fields": {"error": str(exc), "moved": str(aside)}}
            )
        return cp

    def save(self) -> None:
        """Write every claim (orjson encodes the dataclasses directly: the stand-in saves once per pod and
        the file grows with the node's pods, so stdlib json's ``asdict`` copy dominated a burst's CPU)."""
        data: dict[str, Any] = {"version": VERSION, "claims": self.claims}
        atomic_write(self.path, orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n")

    def claims_of_pod(self, pod_uid: str) -> list[PreparedClaim]:
        return [c for c in self.claims.values() if pod_uid in c.pods]

    def pod_uids(self) -> set[str]:
        return {uid for c in self.claims.values() for uid in c.pods}

    def add(self, claim: PreparedClaim, pod_uid: str, pod_name: str) -> None:
        existing = self.claims.setdefault(claim.uid, claim)
        existing.pods[pod_uid] = pod_name
        existing.unpreparing = False

    def release_pod(self, pod_uid: str) -> list[PreparedClaim]:
        """Drop ``pod_uid`` from every claim; return the claims no pod uses any more."""
        freed = []
        for claim in self.claims.values():
            name = claim.pods.pop(pod_uid, None)
            if name is not None and not claim.pods:
                claim.unpreparing = True
                claim.last_pod = {"uid": pod_uid, "name": name}
                freed.append(claim)
        return freed

    def unused(self) -> list[PreparedClaim]:
        """Claims waiting to be unprepared (no pods left)."""
        return [c for c in self.claims.values() if not c.pods]

    def remove(self, uid: str) -> None:
        self.claims.pop(uid, None)
