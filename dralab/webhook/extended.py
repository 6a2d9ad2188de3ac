"""DRAExtendedResource coexistence: warn when a DeviceClass also serves a resource dralab converts.

Under the alpha gate ``DRAExtendedResource`` (Kubernetes 1.35) a DeviceClass with
``spec.extendedResourceName`` (e.g. ``nvidia.com/gpu``) lets kube-scheduler itself satisfy a pod's
extended-resource request from DRA devices. dralab's webhook converts such a request before the
scheduler sees it, so a converted pod takes dralab's claim path; only pods dralab leaves alone
(opted out, excluded namespaces, vendors not enabled) reach the scheduler's path. The warning tells
the user which path served the pod, at admission (``kubectl`` prints admission warnings).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from dralab.kube import Kube
from dralab.kube.informer import Informer
from dralab.model.convert import CONTAINER_KINDS

DEVICE_CLASSES = "/apis/resource.k8s.io/v1/deviceclasses"


def removed_resources(original: dict[str, Any], converted: dict[str, Any]) -> set[str]:
    """Resource names a conversion took out of the pod's containers (limits or requests)."""

    def names(pod: dict[str, Any]) -> set[str]:
        out: set[str] = set()
        spec = pod.get("spec") or {}
        for kind in CONTAINER_KINDS:
            for container in spec.get(kind) or []:
                res = (container or {}).get("resources") or {}
                for where in ("limits", "requests"):
                    out.update((res.get(where) or {}).keys())
        return out

    return names(original) - names(converted)


def warnings_for(device_classes: Iterable[dict[str, Any]], converted: set[str]) -> list[str]:
    """One admission warning per DeviceClass whose extendedResourceName is among ``converted``."""
    out = []
    for dc in sorted(device_classes, key=lambda d: (d.get("metadata") or {}).get("name", "")):
        name = (dc.get("metadata") or {}).get("name", "")
        extended = (dc.get("spec") or {}).get("extendedResourceName")
        if extended and extended in converted:
            out.append(
                f"DeviceClass {name} declares extendedResourceName {extended}: dralab converted this pod's "
                f"{extended} to a ResourceClaim (the claim path); only pods dralab does not convert (opted out, "
                "excluded namespaces) are served by the scheduler through that class (DRAExtendedResource)"
            )
    return out


class DeviceClassWatch:
    """A watched cache of DeviceClasses; :meth:`warnings` for one conversion."""

    def __init__(self, api: Kube) -> None:
        self.declaring = False  # whether a cached class declares an extendedResourceName (kept by the watch)
        self.classes = Informer(api, DEVICE_CLASSES, "", self._changed, "deviceclasses")

    def _changed(self) -> None:
        """Recomputed per DeviceClass change (rare) so each admission reads one flag, not the whole cache."""
        self.declaring = any((dc.get("spec") or {}).get("extendedResourceName") for dc in self.classes.snapshot())

    def start(self) -> None:
        self.classes.start()

    def stop(self) -> None:
        self.classes.stop()

    def warnings(self, original: dict[str, Any], converted: dict[str, Any]) -> list[str]:
        if not self.declaring:
            return []
        return warnings_for(self.classes.snapshot(), removed_resources(original, converted))
