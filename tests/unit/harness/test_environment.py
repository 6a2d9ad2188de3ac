"""Deploying on kind and hardware profiles: the Helm command comes from the profile's data."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from dralab.errors import UserError
from harness.environment import deploy_helm, helm_command
from harness.profile import load_profile, parse_profile


def test_helm_command_uses_the_profile_values_and_context(tmp_path: Path) -> None:
    profile = load_profile("kind")
    cmd = helm_command(profile, tmp_path / "kc", tmp_path / "values.yaml", Path("/repo"))
    assert cmd[:5] == ["helm", "upgrade", "--install", "dralab", "/repo/charts/dralab"]
    assert cmd[cmd.index("--namespace") + 1] == "dralab-system"
    assert "--create-namespace" in cmd and "--wait" in cmd
    assert cmd[cmd.index("--kube-context") + 1] == "kind-dralab"
    assert cmd[cmd.index("--values") + 1] == str(tmp_path / "values.yaml")


def test_helm_missing_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UserError, match="helm is not on PATH"):
        deploy_helm(load_profile("ascend-310p"), tmp_path / "kc", progress=lambda _m: None)


def test_helm_is_skipped_when_the_release_exists_and_run_otherwise(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls = tmp_path / "calls"
    helm = tmp_path / "helm"
    helm.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n[ "$1" = status ] && exit "${{STATUS_RC:-0}}"\nexit 0\n')
    helm.chmod(helm.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    profile = load_profile("nvidia")
    deploy_helm(profile, tmp_path / "kc", progress=lambda _m: None)
    assert calls.read_text().splitlines()[0].startswith("status dralab")
    assert len(calls.read_text().splitlines()) == 1
    monkeypatch.setenv("STATUS_RC", "1")
    deploy_helm(profile, tmp_path / "kc", progress=lambda _m: None)
    assert calls.read_text().splitlines()[-1].startswith("upgrade --install dralab")


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"name": "p", "cluster": {"source": "cloud"}}, "cluster.source must be one of"),
        ({"name": "p", "cluster": {"source": "local"}, "capabilities": ["x-ray"]}, "unknown capabilit"),
        ({"name": "p", "cluster": {"source": "kubeconfig"}, "deploy": {"method": "helm"}}, "needs deploy.chart"),
        ({"cluster": {"source": "local"}}, "'name' is required"),
    ],
)
def test_bad_profiles_are_refused(doc: dict, message: str) -> None:
    with pytest.raises(UserError, match=message):
        parse_profile(doc, "p.yaml")


def test_ci_environment_sets_the_image_and_the_kind_context() -> None:
    from harness.environment import environment_overrides

    profile = load_profile("kind")
    values, context = environment_overrides(profile, {"DRALAB_IMAGE": "dralab:e2e", "DRALAB_KIND_CLUSTER": "ci"})
    assert values == {"image": {"repository": "dralab", "tag": "e2e", "pullPolicy": "IfNotPresent"}}
    assert context == "kind-ci"
    assert environment_overrides(profile, {}) == ({}, "kind-dralab")
    values, _ = environment_overrides(profile, {"DRALAB_IMAGE": "localhost:5000/dralab"})
    assert values["image"] == {"repository": "localhost:5000/dralab", "tag": "latest", "pullPolicy": "IfNotPresent"}
    assert environment_overrides(load_profile("nvidia"), {"DRALAB_KIND_CLUSTER": "ci"})[1] is None


def test_labs_needing_another_inventory_skip_on_a_deployed_profile(write_lab, cluster) -> None:
    from harness.environment import Environment
    from harness.runner import LabRunner

    kind = load_profile("kind")
    env = Environment(profile=kind, client=cluster, capabilities=frozenset(kind.capabilities))
    lab = write_lab([{"id": "a", "try": [{"events": {}}]}], prerequisites={"inventory": "nvidia-gpus"})
    assert (
        LabRunner(lab, env, "r").gate == "lab demo needs the nvidia-gpus device inventory; profile kind deploys lab20"
    )
