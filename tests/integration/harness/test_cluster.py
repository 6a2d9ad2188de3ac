"""The harness's cluster view (harness.cluster on dralab.kube) and fixtures against the local cluster."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from dralab.kube import KubeError
from dralab.util import wait_for
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
    with pytest.raises(KubeError) as exc:
        dralab_env.client.apply(bad)
    assert exc.value.status == 422 and "Not_Valid" in exc.value.message


def test_a_custom_resource_is_found_once_its_definition_is_established(dralab_env: Any, lab_namespace: str) -> None:
    client = dralab_env.client
    group = f"t{uuid.uuid4().hex[:8]}.dralab.io"
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": {"type": "object",
                                                              "x-kubernetes-preserve-unknown-fields": True}}}]},
    }  # fmt: skip
    crd_ref = Ref("apiextensions.k8s.io/v1", "CustomResourceDefinition", name=f"widgets.{group}")
    widgets = Ref(f"{group}/v1", "Widget", namespace=lab_namespace)
    with pytest.raises(KubeError, match="does not serve"):
        client.list(widgets)
    client.apply(crd)
    try:
        def served() -> bool:  # an earlier "not served" answer must not be kept
            try:
                client.list(widgets)
            except KubeError as exc:
                if exc.status != 404:
                    raise
                return False
            return True

        wait_for(served, 60.0, "the Widget kind served")
        assert client.namespaced(f"{group}/v1", "Widget") is True
        widget = {"apiVersion": f"{group}/v1", "kind": "Widget",
                  "metadata": {"name": "w", "namespace": lab_namespace}, "spec": {"size": 1}}  # fmt: skip
        client.apply(widget)
        client.apply({**widget, "spec": {"size": 2}})
        ref = Ref(f"{group}/v1", "Widget", name="w", namespace=lab_namespace)
        assert client.get(ref)["spec"] == {"size": 2}
        assert [(o["kind"], o["metadata"]["name"]) for o in client.list(widgets)] == [("Widget", "w")]
        assert client.delete(ref) is True
    finally:
        client.delete(crd_ref)
