"""Operating local clusters: up/down/status/restart through the CLI, fault hooks on a private cluster.

Fault hooks stop and kill components: they run on a cluster of this module's own, so labs and
tests on the shared cluster (on other xdist workers) never see the outage, and no other
worker's ``ensure_cluster`` restarts a component this module killed on purpose.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from dralab_kit.cluster import api
from dralab_kit.cluster.components import CONTROL_PLANE
from dralab_kit.cluster.supervisor import ProcRecord, is_alive

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("cluster-operate")]  # own cluster, one worker


def _dralab(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "dralab.cli", *args], capture_output=True, text=True, timeout=300, check=False
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"dralab {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def _status(name: str) -> dict[str, dict]:
    proc = _dralab("cluster", "status", "--name", name, "--json", check=False)
    return {row["name"]: row for row in json.loads(proc.stdout)}


@pytest.fixture(scope="module")
def own_cluster(cluster):
    """A private cluster for the fault hooks, taken down after the module."""
    name = f"op-{uuid.uuid4().hex[:6]}"
    handle = api.ensure_cluster(name)
    yield handle
    api.down(name)


@pytest.mark.slow
def test_second_cluster_up_status_restart_down(cluster):
    name = f"it-{uuid.uuid4().hex[:6]}"
    try:
        kubeconfig = Path(_dralab("cluster", "up", "--name", name).stdout.strip().splitlines()[-1])
        assert kubeconfig.is_file()
        assert _dralab("cluster", "kubeconfig", "--name", name).stdout.strip() == str(kubeconfig)
        rows = _status(name)
        assert all(r["state"] == "running" for r in rows.values()), rows
        assert rows["apiserver"]["healthy"] is True

        handle = api.get_cluster(name)
        assert handle is not None
        assert handle.server != cluster.server, "each cluster gets its own ports"
        pids = {c: raw["pid"] for c, raw in handle.state["components"].items()}

        # up again: nothing restarted (dralab's own processes would restart if their code changed meanwhile)
        _dralab("cluster", "up", "--name", name)
        again = api.get_cluster(name)
        assert {c: again.state["components"][c]["pid"] for c in CONTROL_PLANE} == {c: pids[c] for c in CONTROL_PLANE}

        _dralab("cluster", "restart", "apiserver", "--name", name)
        rows = _status(name)
        assert rows["apiserver"]["state"] == "running" and rows["apiserver"]["healthy"] is True
        assert rows["apiserver"]["pid"] != pids["apiserver"]

        node = handle.nodes[0]
        cdi = handle.cdi_dir(node)
        planted = cdi / "k8s.example-test_claim.yaml"
        planted.write_text("cdiVersion: 0.6.0\n")
        before = {p.name for p in cdi.iterdir()}
        out = _dralab("cluster", "wipe-cdi", node, "--name", name).stdout
        assert out.startswith(f"removed {len(before)} ") and not planted.exists()
        # The driver stats its specs every 5 s and rewrites its common spec once it is gone (a reboot's
        # wiped /var/run/cdi), so only that file may be back by now, never the planted one.
        assert {p.name for p in cdi.iterdir()} <= before - {planted.name}

        records = [ProcRecord.from_json(raw) for raw in api.get_cluster(name).state["components"].values()]
    finally:
        _dralab("cluster", "down", "--name", name, "--purge-logs", check=False)
    assert not any(is_alive(rec) for rec in records), "down left processes running"
    assert api.get_cluster(name) is None
    assert not kubeconfig.exists()
    # the shared cluster is untouched
    assert all(r.state == "running" for r in api.status(cluster.name) if r.name in ("apiserver", "etcd"))


def test_stop_start_restart(own_cluster):
    cluster = own_cluster
    node = cluster.nodes[0]
    component = f"kubelet/{node}"
    try:
        assert api.stop(cluster.name, component) is True
        rows = {r.name: r for r in api.status(cluster.name)}
        assert rows[component].state == "stopped"
    finally:
        api.start(cluster.name, component)
    rows = {r.name: r for r in api.status(cluster.name)}
    assert rows[component].state == "running" and rows[component].healthy is True

    before = rows["scheduler"].pid
    api.restart(cluster.name, "scheduler")
    rows = {r.name: r for r in api.status(cluster.name)}
    assert rows["scheduler"].pid != before
    assert rows["scheduler"].healthy is True


def test_crashed_component_is_reported_then_restarted_by_up(own_cluster):
    import os
    import signal

    cluster = own_cluster
    node = cluster.nodes[0]
    component = f"kubelet/{node}"
    state = api.get_cluster(cluster.name).state
    rec = ProcRecord.from_json(state["components"][component])
    os.kill(rec.pid, signal.SIGKILL)
    from dralab.util import wait_for

    wait_for(lambda: not is_alive(rec), 10, "stand-in to die")
    rows = {r.name: r for r in api.status(cluster.name)}
    assert rows[component].state == "crashed" and rows[component].healthy is False
    assert _dralab("cluster", "status", "--name", cluster.name, check=False).returncode == 1
    notes: list[str] = []
    api.ensure_cluster(cluster.name, say=notes.append)
    assert any(component in n and "not running" in n for n in notes), notes
    rows = {r.name: r for r in api.status(cluster.name)}
    assert rows[component].state == "running"


def test_unknown_component_is_a_user_error(cluster):
    proc = _dralab("cluster", "restart", "nonsense", "--name", cluster.name, check=False)
    assert proc.returncode == 2
    assert "unknown component 'nonsense'" in proc.stderr
    assert "Traceback" not in proc.stderr
