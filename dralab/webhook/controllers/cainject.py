"""The webhook writes its own CA into its webhook configurations (``webhook.certManager.caInjector: dralab``).

cert-manager's cainjector is the usual writer (``cert-manager.io/inject-ca-from``). The cainjector of
cert-manager up to v1.11 updates the whole configuration from Go types of Kubernetes 1.26, which have
no ``matchConditions``: every injection drops them, and the apiserver then sends every pod to dralab
instead of those that ask for accelerators. This part writes only ``clientConfig.caBundle`` of each
of its webhooks, with a strategic merge patch keyed by webhook name, so nothing else is touched.

The CA is the ``ca.crt`` cert-manager put in the serving Secret, mounted beside ``tls.crt``; it is read
at start and every ``interval`` seconds, so a renewed CA reaches the configurations without a restart.
Run by the elected leader only (as the janitor is); a patch that changes nothing is not sent.
"""

from __future__ import annotations

import base64
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dralab.errors import UserError
from dralab.kube import Kube, KubeError

log = logging.getLogger("dralab.webhook.controllers.cainject")
KINDS = {"mutating": "mutatingwebhookconfigurations", "validating": "validatingwebhookconfigurations"}
_PREFIX = "/apis/admissionregistration.k8s.io/v1"


@dataclass(frozen=True)
class Target:
    """One webhook configuration: ``mutating/NAME`` or ``validating/NAME``."""

    kind: str
    name: str

    @classmethod
    def parse(cls, text: str) -> Target:
        kind, sep, name = text.partition("/")
        if not sep or kind not in KINDS or not name:
            raise UserError(f"--inject-ca-into {text!r}: use mutating/NAME or validating/NAME")
        return cls(kind, name)

    @property
    def path(self) -> str:
        return f"{_PREFIX}/{KINDS[self.kind]}/{self.name}"


def ca_patch(config: dict[str, Any], ca_pem: bytes) -> dict[str, Any] | None:
    """The strategic merge patch that gives every webhook of ``config`` ``ca_pem``; None when all have it (pure)."""
    bundle = base64.b64encode(ca_pem).decode()
    stale = [w["name"] for w in config.get("webhooks") or [] if (w.get("clientConfig") or {}).get("caBundle") != bundle]
    if not stale:
        return None
    return {"webhooks": [{"name": name, "clientConfig": {"caBundle": bundle}} for name in stale]}


def read_ca(path: Path) -> bytes:
    """The CA file's PEM; UserError when it is missing or holds no certificate."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UserError(
            f"the CA file {path} cannot be read ({exc.strerror}): mount the serving Secret's ca.crt"
        ) from None
    if b"-----BEGIN CERTIFICATE-----" not in data:
        raise UserError(f"the CA file {path} holds no PEM certificate")
    return data


class CAInjector:
    """Keeps ``targets``' caBundle equal to the CA file (a background part: ``start``/``stop``)."""

    def __init__(self, api: Kube, ca_file: Path, targets: Sequence[Target], interval: float = 30.0) -> None:
        self.api, self.ca_file, self.targets, self.interval = api, ca_file, tuple(targets), interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def inject_once(self) -> int:
        """Patch what is stale; returns how many configurations were patched."""
        ca = read_ca(self.ca_file)
        patched = 0
        for target in self.targets:
            config = self.api.get(target.path, missing_ok=True)
            if config is None:
                continue  # not installed (yet): the next round looks again
            patch = ca_patch(config, ca)
            if patch is not None:
                self.api.patch(target.path, patch, kind="strategic")
                patched += 1
                log.info("wrote the CA bundle", extra={"fields": {"configuration": target.name, "kind": target.kind}})
        return patched

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.inject_once()
            except (UserError, KubeError) as exc:
                log.warning("CA injection failed; retrying", extra={"fields": {"error": str(exc)}})
            self._stop.wait(self.interval)

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="ca-injector", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
