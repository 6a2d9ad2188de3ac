"""Profile local's kubeconfig lookup: the stack key, then $KUBECONFIG, then the named local cluster."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from dralab.errors import UserError
from dralab_infra.local import local_kubeconfig
from dralab_infra.settings import parse_settings
from dralab_kit.cluster import api


def test_the_named_local_cluster_gives_its_kubeconfig(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    asked: list[str] = []

    def get_cluster(name: str) -> SimpleNamespace:
        asked.append(name)
        return SimpleNamespace(kubeconfig=tmp_path / "admin.kubeconfig")

    monkeypatch.setattr(api, "get_cluster", get_cluster)
    assert local_kubeconfig(parse_settings({"clusterName": "big"})) == str(tmp_path / "admin.kubeconfig")
    assert asked == ["big"]


def test_no_local_cluster_says_how_to_start_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setattr(api, "get_cluster", lambda name: None)
    with pytest.raises(UserError, match=r"no local cluster named 'big': run `dralab cluster up` first"):
        local_kubeconfig(parse_settings({"clusterName": "big"}))


def test_the_stack_key_and_the_environment_come_before_the_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(api, "get_cluster", lambda name: pytest.fail("no cluster lookup expected"))
    monkeypatch.setenv("KUBECONFIG", "/env/kubeconfig")
    assert local_kubeconfig(parse_settings({})) == "/env/kubeconfig"
    assert local_kubeconfig(parse_settings({"kubeconfig": "/stack/kubeconfig"})) == "/stack/kubeconfig"
