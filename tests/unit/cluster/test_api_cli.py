"""Cluster API helpers and the `dralab cluster` command line, without a cluster."""

from __future__ import annotations

import pytest

from dralab.cli import main
from dralab_kit.cluster import api
from dralab_kit.cluster.cli import cluster


def test_ports_are_distinct_and_recorded_ones_kept():
    ports = api._allocate_ports(["n1", "n2"], None)
    flat = [p for v in ports.values() for p in (v.values() if isinstance(v, dict) else [v])]
    assert len(flat) == len(set(flat)) == 7 + 2 * 2
    again = api._allocate_ports(["n1", "n2", "n3"], ports)
    assert {k: again[k] for k in ("etcd", "apiserver")} == {k: ports[k] for k in ("etcd", "apiserver")}
    assert again["driver"]["n1"] == ports["driver"]["n1"] and "n3" in again["kubelet"]


def test_devices_ref_normalizes_files(tmp_path, monkeypatch):
    inv = tmp_path / "inv.yaml"
    inv.write_text("nodes: []\n")
    monkeypatch.chdir(tmp_path)
    assert api._devices_ref("inv.yaml") == str(inv)
    assert api._devices_ref("lab20") == "lab20"


def test_every_command_has_an_example():
    for name, command in cluster.commands.items():
        assert "Example:" in (command.help or ""), name


def _run(argv, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    return info.value.code, capsys.readouterr()


def test_operating_a_cluster_that_is_not_up_is_a_one_line_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DRALAB_HOME", str(tmp_path))
    for argv in (["cluster", "kubeconfig", "--name", "nope"], ["cluster", "restart", "scheduler", "--name", "nope"]):
        code, out = _run(argv, capsys)
        assert code == 2
        assert out.err.strip() == "error: cluster nope is not up; run `dralab cluster up --name nope`"
    assert api.get_cluster("nope") is None
    assert api.down("nope") == 0


def test_up_without_binaries_says_how_to_build(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DRALAB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DRALAB_CACHE", str(tmp_path / "cache"))
    code, out = _run(["cluster", "up", "--name", "x"], capsys)
    assert code == 2
    assert "run `dralab cluster build` first" in out.err and "Traceback" not in out.err


def test_a_lease_counts_as_held_only_with_a_holder_that_renewed_within_its_duration() -> None:
    from dralab_kit.cluster.api import lease_is_held

    now = 1_767_225_600.0  # 2026-01-01T00:00:00Z
    fresh = {"spec": {"holderIdentity": "w1", "renewTime": "2025-12-31T23:59:55.000000Z", "leaseDurationSeconds": 15}}
    assert lease_is_held(fresh, now)
    assert not lease_is_held(fresh, now + 11)  # 16 s since the renewal: the holder is gone
    assert not lease_is_held({"spec": {"renewTime": fresh["spec"]["renewTime"]}}, now)  # released: no holder
    assert not lease_is_held(None, now)  # no Lease yet
