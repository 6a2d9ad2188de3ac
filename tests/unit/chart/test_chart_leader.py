"""Chart: webhook workers and leader election (a Role for exactly one Lease, the holder's identity)."""

from __future__ import annotations

from typing import Any

from .conftest import Render


def _named(objs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objs if o["kind"] == kind}


def _webhook(objs: list[dict[str, Any]]) -> dict[str, Any]:
    deploy = _named(objs, "Deployment")["dralab-webhook"]
    return deploy["spec"]["template"]["spec"]["containers"][0]


def test_replicas_elect_a_janitor_on_one_named_lease(render: Render) -> None:
    objs = render()
    c = _webhook(objs)
    args = c["args"]
    assert args[args.index("--workers") + 1] == "2"
    assert args[args.index("--lease-name") + 1] == "dralab-webhook"
    env = {e["name"]: e for e in c["env"]}
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    role = _named(objs, "Role")["dralab-webhook-leader"]
    assert role["metadata"]["namespace"] == "dralab-system"
    named = [r for r in role["rules"] if r.get("resourceNames")]
    assert named == [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                      "resourceNames": ["dralab-webhook"], "verbs": ["get", "update"]}]
    unnamed = [r for r in role["rules"] if not r.get("resourceNames")]
    assert [r["verbs"] for r in unnamed] == [["create"]]  # create cannot be limited to a name
    binding = _named(objs, "RoleBinding")["dralab-webhook-leader"]
    assert binding["roleRef"]["name"] == "dralab-webhook-leader"
    assert binding["subjects"][0]["name"] == "dralab-webhook"


def test_without_leader_election_no_lease_rights(render: Render) -> None:
    objs = render({"webhook": {"leaderElection": False, "replicas": 1, "workers": 1}})
    assert "--no-leader-elect" in _webhook(objs)["args"]
    assert "dralab-webhook-leader" not in _named(objs, "Role")
