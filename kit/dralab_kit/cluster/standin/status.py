"""The status a kubelet writes when a pod's containers start: what the stand-in writes for pods with claims.

A real kubelet starts a pod's containers only after NodePrepareResources succeeded and reports it
in one status write. The stand-in does the same for KWOK pods that use claims (KWOK's own stages
only start pods without claims, see :mod:`dralab_kit.cluster.kwok`): one ``pods/status`` patch, where
an annotation patch plus KWOK's status write would cost the apiserver two writes per pod.
"""

from __future__ import annotations

import ipaddress
import threading
from typing import Any

# Pod IPs of stand-in-started pods: apart from KWOK's own default pool (10.0.0.0/24) and the
# cluster's service range (10.96.0.0/16), so the two never hand out the same address on one node.
POD_CIDR = "10.64.0.0/16"


class PodIPs:
    """Pod IPs of one node: the lowest free address for a new pod, freed when the pod is gone.

    ``adopt`` takes back addresses of pods already running (a restarted stand-in sees them listed).
    """

    def __init__(self, cidr: str = POD_CIDR) -> None:
        self.net = ipaddress.ip_network(cidr)
        self._by_pod: dict[str, str] = {}
        self._used: set[str] = set()
        self._next = 1
        self._lock = threading.Lock()

    def adopt(self, pod_uid: str, ip: str | None) -> None:
        if not ip:
            return
        try:
            if ipaddress.ip_address(ip) not in self.net:
                return
        except ValueError:
            return
        with self._lock:
            self._by_pod[pod_uid] = ip
            self._used.add(ip)

    def get(self, pod_uid: str) -> str:
        """The pod's address (the same one again for the same pod)."""
        with self._lock:
            if pod_uid in self._by_pod:
                return self._by_pod[pod_uid]
            size = self.net.num_addresses - 2  # no network or broadcast address
            for step in range(size):
                offset = (self._next - 1 + step) % size + 1
                ip = str(self.net.network_address + offset)
                if ip not in self._used:
                    self._next = offset % size + 1
                    self._by_pod[pod_uid] = ip
                    self._used.add(ip)
                    return ip
            raise RuntimeError(f"pod IP range {self.net} of this node is exhausted ({size} pods)")

    def release(self, pod_uid: str) -> None:
        with self._lock:
            ip = self._by_pod.pop(pod_uid, None)
            if ip:
                self._used.discard(ip)


def started(pod: dict[str, Any]) -> bool:
    """Whether the pod's containers were started already (by an earlier sync, before a restart too)."""
    status = pod.get("status") or {}
    return status.get("phase") == "Running" or bool(status.get("startTime"))


def running_status(pod: dict[str, Any], now_iso: str, pod_ip: str, host_ip: str | None) -> dict[str, Any]:
    """The ``status`` of a pod whose containers all just started (init containers ran to completion),
    as a strategic merge patch: conditions merge by type, so the scheduler's PodScheduled stays."""
    spec = pod.get("spec") or {}
    types = ["PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady"]
    types += [g["conditionType"] for g in spec.get("readinessGates") or [] if g.get("conditionType")]
    status: dict[str, Any] = {
        "phase": "Running",
        "startTime": now_iso,
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "conditions": [{"type": t, "status": "True", "lastTransitionTime": now_iso} for t in types],
        "containerStatuses": [
            {"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": True, "started": True,
             "restartCount": 0, "state": {"running": {"startedAt": now_iso}}}
            for c in spec.get("containers") or []
        ],
    }
    inits = []
    for c in spec.get("initContainers") or []:
        entry: dict[str, Any] = {"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": True,
                                 "restartCount": 0}
        if c.get("restartPolicy") == "Always":  # a sidecar keeps running
            entry.update(started=True, state={"running": {"startedAt": now_iso}})
        else:
            entry.update(started=False, state={"terminated": {"exitCode": 0, "reason": "Completed",
                                                              "startedAt": now_iso, "finishedAt": now_iso}})
        inits.append(entry)
    if inits:
        status["initContainerStatuses"] = inits
    if host_ip:
        status["hostIP"] = host_ip
        status["hostIPs"] = [{"ip": host_ip}]
    return status
