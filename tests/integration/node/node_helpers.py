"""Helpers of the real-node tests: kubectl through the kubelet, lab-image pods, waits that poll."""

from __future__ import annotations

import subprocess
from typing import Any

from dralab.kube import Kube
from dralab.util import wait_for
from dralab_kit.cluster import build
from dralab_kit.cluster.api import ClusterHandle

IMAGE = "dralab.local/lab:1.0"


def kubectl(
    handle: ClusterHandle, *args: str, check: bool = True, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """The built kubectl against ``handle`` (exec and logs go through the kubelet on 127.0.0.1)."""
    cmd = [str(build.binary_path("kubectl")), "--kubeconfig", str(handle.kubeconfig), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
    return proc


def pod(name: str, command: str, **spec: Any) -> dict[str, Any]:
    """A pod of the lab image; a short grace period keeps deletions quick."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "terminationGracePeriodSeconds": 2,
            "containers": [{"name": "c", "image": IMAGE, "command": ["sh", "-c", command]}],
            **spec,
        },
    }


def wait_running(kube: Kube, namespace: str, name: str, timeout: float = 90) -> dict[str, Any]:
    def running() -> dict[str, Any] | None:
        obj = kube.get(f"/api/v1/namespaces/{namespace}/pods/{name}", missing_ok=True)
        return obj if obj and obj.get("status", {}).get("phase") == "Running" else None

    return wait_for(running, timeout, f"pod {namespace}/{name} Running", interval=0.2)


def wait_gone(kube: Kube, path: str, timeout: float = 60) -> None:
    wait_for(lambda: kube.get(path, missing_ok=True) is None, timeout, f"{path} gone", interval=0.2)
