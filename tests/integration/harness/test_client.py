"""The harness's cluster client and fixtures against the local cluster (real kube-apiserver)."""

from __future__ import annotations

from typing import Any

import pytest

from harness.client import ClusterError
from harness.resources import Ref

pytestmark = pytest.mark.integration


def _cm(name: str, ns: str, value: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns, "labels": {"t": "1"}},
            "data": {"k": value}}  # fmt: skip


def test_apply_creates_then_updates_get_list_delete(dralab_env: Any, lab_namespace: str) -> None:
    client = dralab_env.client
    created = client.apply(_cm("cm", lab_namespace, "one"))
    assert created["metadata"]["uid"]
    updated = client.apply(_cm("cm", lab_namespace, "two"))
    assert updated["metadata"]["uid"] == created["metadata"]["uid"]
    ref = Ref("v1", "ConfigMap", name="cm", namespace=lab_namespace)
    assert client.get(ref)["data"] == {"k": "two"}
    listed = client.list(Ref("v1", "ConfigMap", namespace=lab_namespace, label_selector="t=1"))
    assert [(o["kind"], o["metadata"]["name"]) for o in listed] == [("ConfigMap", "cm")]
    assert client.delete(ref) is True
    assert client.delete(ref) is False
    assert client.get(ref) is None


def test_discovery_knows_dra_kinds_and_scopes(dralab_env: Any) -> None:
    client = dralab_env.client
    assert client.namespaced("resource.k8s.io/v1", "ResourceClaim") is True
    assert client.namespaced("resource.k8s.io/v1", "ResourceSlice") is False
    slices = client.list(
        Ref("resource.k8s.io/v1", "ResourceSlice", field_selector="spec.driver=ascend.project-hami.io")
    )
    assert slices and all(s["spec"]["driver"] == "ascend.project-hami.io" for s in slices)


def test_refusals_carry_the_api_servers_message(dralab_env: Any, lab_namespace: str) -> None:
    bad = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "Not_Valid", "namespace": lab_namespace}}
    with pytest.raises(ClusterError) as exc:
        dralab_env.client.apply(bad)
    assert exc.value.status == 422 and "Not_Valid" in exc.value.message
