"""The status the stand-in writes when it starts a pod with claims, and the node's pod IPs."""

from __future__ import annotations

import pytest

from dralab_kit.cluster.standin.status import PodIPs, running_status, started

NOW = "2026-01-01T00:00:00Z"


def test_running_status_is_what_a_kubelet_reports_for_started_containers() -> None:
    pod = {"spec": {"containers": [{"name": "app", "image": "busybox"}],
                    "initContainers": [{"name": "setup", "image": "i"},
                                       {"name": "side", "image": "s", "restartPolicy": "Always"}],
                    "readinessGates": [{"conditionType": "example.io/ready"}]}}
    st = running_status(pod, NOW, "10.64.0.1", "196.168.0.1")
    assert st["phase"] == "Running" and st["startTime"] == NOW
    assert st["podIP"] == "10.64.0.1" and st["podIPs"] == [{"ip": "10.64.0.1"}] and st["hostIP"] == "196.168.0.1"
    types = {c["type"]: c["status"] for c in st["conditions"]}
    assert types == {"PodReadyToStartContainers": "True", "Initialized": "True", "Ready": "True",
                     "ContainersReady": "True", "example.io/ready": "True"}
    assert "PodScheduled" not in types  # a strategic merge keeps the scheduler's condition
    (app,) = st["containerStatuses"]
    assert app["ready"] and app["state"] == {"running": {"startedAt": NOW}}
    setup, side = st["initContainerStatuses"]
    assert setup["state"]["terminated"]["reason"] == "Completed" and "running" in side["state"]
    assert "hostIP" not in running_status(pod, NOW, "10.64.0.1", None)  # node address not known yet
    assert started({"status": st}) and not started({"status": {"phase": "Pending"}}) and not started({})


def test_pod_ips_are_stable_per_pod_reused_after_release_and_adopted_after_a_restart() -> None:
    ips = PodIPs("10.64.0.0/29")  # 6 usable addresses
    first = ips.get("a")
    assert first == "10.64.0.1" and ips.get("a") == first
    assert ips.get("b") == "10.64.0.2"
    ips.release("a")
    got = {ips.get(u) for u in "cdef"}
    assert got == {"10.64.0.3", "10.64.0.4", "10.64.0.5", "10.64.0.6"}
    assert ips.get("g") == "10.64.0.1"  # the released address comes back once the range wrapped
    with pytest.raises(RuntimeError, match="exhausted"):
        ips.get("h")

    restarted = PodIPs("10.64.0.0/29")
    restarted.adopt("a", "10.64.0.1")
    restarted.adopt("k", "10.0.0.7")  # KWOK's address of a pod without claims: not ours
    restarted.adopt("x", "not an address")
    assert restarted.get("a") == "10.64.0.1" and restarted.get("b") == "10.64.0.2"
