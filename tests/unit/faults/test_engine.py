"""The one fault engine without a cluster: its registry, and a scenario's row built by the real
:class:`Ctx` over the in-memory apiserver and a temporary CDI folder."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from dralab_kit.faults import engine
from dralab_kit.faults.context import Ctx
from dralab_kit.faults.target import Target
from dralab_kit.fixtures.fakeapi import FakeKube

DRIVER = "ascend.project-hami.io"


@dataclass
class Handle:
    """What :class:`Ctx` and :class:`Target` read of a cluster handle."""

    root: Path
    api: FakeKube = field(default_factory=FakeKube)
    name: str = "unit"
    state: dict[str, Any] = field(default_factory=lambda: {"nodes": ["bench-node"]})

    @property
    def nodes(self) -> list[str]:
        return list(self.state["nodes"])

    def kube(self) -> FakeKube:
        return self.api

    def cdi_dir(self, node: str) -> Path:
        return self.root / node / "cdi"

    def records_path(self, node: str) -> Path:
        return self.root / node / "kubelet-records.jsonl"


def test_every_scenario_is_registered_once_for_a_known_profile() -> None:
    local, node = engine.names_for("local"), engine.names_for("node")
    assert {s for sc in engine.SCENARIOS.values() for s in sc.profiles} == {"local", "node"}
    assert set(local) | set(node) == set(engine.SCENARIOS)
    assert set(local) & set(node) == {"driver_killed_during_prepare"}  # one fault, both profiles
    assert all(sc.summary for sc in engine.SCENARIOS.values()), "each scenario says what it does"
    with pytest.raises(ValueError, match="registered twice"):
        engine.scenario("local")(engine.SCENARIOS["reboot"].run)


def test_the_target_names_node_components_after_the_node_and_picks_the_real_node(tmp_path: Path) -> None:
    local = Target.of(Handle(tmp_path))
    assert (local.node, local.profile, local.component("driver"), local.component("webhook")) == (
        "bench-node", "local", "driver/bench-node", "webhook")
    real = Target.of(Handle(tmp_path, state={"nodes": ["kw-0", "metal"], "realNode": "metal"}))
    assert (real.node, real.profile, real.component("kubelet")) == ("metal", "node", "kubelet/metal")
    assert [kind for kind, _ in real.sharing_objects("p")] == ["resourceclaims", "pods"]
    assert [kind for kind, _ in local.sharing_objects("p")] == ["pods"]


def _claim_pod(api: FakeKube, ns: str, name: str, uid_of: dict[str, str]) -> None:
    claim = api.create(f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims", {"metadata": {"name": name}})
    assert claim is not None
    uid_of[name] = claim["metadata"]["uid"]
    result = {"request": "npu", "driver": DRIVER, "pool": "bench-node", "device": "npu-0",
              "consumedCapacity": {"memory": "1Gi"}}
    api.patch(f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{name}/status",
              {"status": {"allocation": {"devices": {"results": [result]}}, "reservedFor": [{"name": name}]}})
    pod = {"metadata": {"name": name}, "spec": {"resourceClaims": [{"name": "npu", "resourceClaimName": name}]},
           "status": {"phase": "Running"}}
    api.create(f"/api/v1/namespaces/{ns}/pods", pod)


def test_a_scenario_that_leaves_a_stale_spec_fails_the_final_audit(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    handle = Handle(tmp_path)
    ctx = Ctx(handle, quick=True, grace=0)
    monkeypatch.setattr(Ctx, "settle", lambda self, margin=60.0: self.audit())  # one look, no polling
    uids: dict[str, str] = {}
    cdi = handle.cdi_dir("bench-node")
    cdi.mkdir(parents=True)

    def holds_one(c: Ctx) -> engine.Outcome:
        """Two pods with claims; one leaves, its spec stays behind."""
        ns = c.namespace("unit")
        for name in ("a", "b"):
            _claim_pod(c.kube, ns, name, uids)
            (cdi / f"k8s.{DRIVER}-npu_{uids[name]}.yaml").write_text("{}")
        c.kube.delete(f"/api/v1/namespaces/{ns}/pods/b")
        c.kube.delete(f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/b")
        return True, {"pods": 2}

    monkeypatch.setitem(engine.SCENARIOS, "unit_stale", engine.Scenario("unit_stale", holds_one, ("local",)))
    row = engine.run_scenario(ctx, "unit_stale")
    assert row["passed"] is False and row["leaked_claims"] == 0
    assert row["detail"]["pods"] == 2
    assert row["detail"]["final_audit"]["stale_cdi_specs"] == 1
    assert row["detail"]["final_audit"]["missing_cdi_specs"] == 0


def test_a_scenario_that_raises_is_a_failed_row_and_its_namespaces_are_discarded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = Ctx(Handle(tmp_path), quick=True, grace=0)
    monkeypatch.setattr(Ctx, "settle", lambda self, margin=60.0: self.audit())
    monkeypatch.setattr(Ctx, "gone", lambda self, ns, timeout=120.0: None)
    made: list[str] = []

    def breaks(c: Ctx) -> engine.Outcome:
        """Creates a namespace, then fails."""
        made.append(c.namespace("unit"))
        raise RuntimeError("the driver never answered")

    monkeypatch.setitem(engine.SCENARIOS, "unit_breaks", engine.Scenario("unit_breaks", breaks, ("local",)))
    row = engine.run_scenario(ctx, "unit_breaks")
    assert row["passed"] is False
    assert row["detail"]["error"] == "RuntimeError: the driver never answered"
    assert ctx.kube.get(f"/api/v1/namespaces/{made[0]}", missing_ok=True) is None


def test_run_all_refuses_a_scenario_of_another_profile_by_name(tmp_path: Path) -> None:
    ctx = Ctx(Handle(tmp_path), quick=True, grace=0)
    with pytest.raises(ValueError, match=r"no local fault scenario named reboot; known: .*webhook_killed"):
        engine.run_all(ctx, ["reboot"])
