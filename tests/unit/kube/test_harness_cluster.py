"""The lab runner's cluster view (harness.cluster) on dralab.kube, against the scripted apiserver.

What a lab relies on: kinds found by discovery (CRDs included), ``apply`` that creates and then
server-side applies like ``kubectl apply``, deletes in the background, lists whose items carry
their kind, and the apiserver's own message in every refusal.
"""

from __future__ import annotations

import json

import pytest

from dralab.errors import UserError
from dralab.kube import KubeError
from harness.cluster import FIELD_MANAGER, KubeCluster
from harness.resources import Ref

CORE = {"resources": [{"name": "configmaps", "kind": "ConfigMap", "namespaced": True},
                      {"name": "namespaces", "kind": "Namespace", "namespaced": False}]}
WIDGETS = {"resources": [{"name": "widgets", "kind": "Widget", "namespaced": False},
                         {"name": "widgets/status", "kind": "Widget", "namespaced": False}]}
CM_PATH = "/api/v1/namespaces/ns/configmaps/cm"
NOT_FOUND = {"kind": "Status", "reason": "NotFound", "message": 'configmaps "cm" not found', "code": 404}


def _cm(value: str) -> dict:
    meta = {"name": "cm", "namespace": "ns"}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": value}}


@pytest.fixture
def cluster(apiserver):
    apiserver.script.on("GET", "/api/v1", (200, CORE))
    client = KubeCluster.from_kubeconfig(apiserver.kubeconfig)
    yield client
    client.close()


def test_apply_creates_what_is_missing_and_server_side_applies_what_exists(apiserver, cluster) -> None:
    apiserver.script.on("GET", CM_PATH, (404, NOT_FOUND), (200, _cm("one")))
    apiserver.script.on("POST", "/api/v1/namespaces/ns/configmaps", (201, _cm("one")))
    apiserver.script.on("PATCH", CM_PATH, (200, _cm("two")))
    assert cluster.apply(_cm("one"))["data"] == {"k": "one"}
    assert cluster.apply(_cm("two"))["data"] == {"k": "two"}
    (created,) = apiserver.script.requests("POST")
    assert json.loads(created.body) == _cm("one")
    (patched,) = apiserver.script.requests("PATCH")
    assert patched.headers["Content-Type"] == "application/apply-patch+yaml"
    assert patched.query == {"fieldManager": FIELD_MANAGER, "force": "true"}
    assert json.loads(patched.body) == _cm("two")


def test_generate_name_always_creates(apiserver, cluster) -> None:
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "cm-", "namespace": "ns"}}
    apiserver.script.on("POST", "/api/v1/namespaces/ns/configmaps", (201, {**obj, "metadata": {"name": "cm-x"}}))
    assert cluster.apply(obj)["metadata"]["name"] == "cm-x"
    assert not apiserver.script.requests("PATCH")


def test_get_and_delete_say_when_the_object_is_missing(apiserver, cluster) -> None:
    apiserver.script.on("GET", CM_PATH, (404, NOT_FOUND))
    apiserver.script.on("DELETE", CM_PATH, (200, {}), (404, NOT_FOUND))
    ref = Ref("v1", "ConfigMap", name="cm", namespace="ns")
    assert cluster.get(ref) is None
    assert cluster.delete(ref, grace_period_seconds=0) is True
    assert cluster.delete(ref) is False
    options = json.loads(apiserver.script.requests("DELETE")[0].body)
    assert (options["propagationPolicy"], options["gracePeriodSeconds"]) == ("Background", 0)


def test_lists_carry_kind_and_selectors_and_span_namespaces_when_none_is_given(apiserver, cluster) -> None:
    apiserver.script.on("GET", "/api/v1/configmaps", (200, {"items": [{"metadata": {"name": "a"}}]}))
    (item,) = cluster.list(Ref("v1", "ConfigMap", label_selector="t=1", field_selector="metadata.name=a"))
    assert (item["apiVersion"], item["kind"]) == ("v1", "ConfigMap")
    seen = apiserver.script.requests("GET")[-1]
    assert seen.query == {"labelSelector": "t=1", "fieldSelector": "metadata.name=a"}


def test_a_namespaced_object_without_a_namespace_is_a_user_error(cluster) -> None:
    with pytest.raises(UserError, match="ConfigMap cm is namespaced: give a namespace"):
        cluster.get(Ref("v1", "ConfigMap", name="cm"))


def test_custom_kinds_are_discovered_once_and_unknown_ones_guessed_by_name(apiserver, cluster) -> None:
    apiserver.script.on("GET", "/apis/example.com/v1", (200, WIDGETS))
    assert cluster.namespaced("example.com/v1", "Widget") is False
    apiserver.script.on("GET", "/apis/example.com/v1/widgets/w", (200, {"metadata": {"name": "w"}}))
    assert cluster.get(Ref("example.com/v1", "Widget", name="w")) == {"metadata": {"name": "w"}}
    assert [s.path for s in apiserver.script.requests("GET")].count("/apis/example.com/v1") == 1
    # a group the cluster does not serve: the scope falls back to the known cluster-scoped kinds
    assert cluster.namespaced("other.io/v1", "Gadget") is True
    assert cluster.namespaced("other.io/v1", "StorageClass") is False
    with pytest.raises(KubeError, match=r"does not serve other.io/v1 \(is the API group enabled"):
        cluster.get(Ref("other.io/v1", "Gadget", name="g", namespace="ns"))


def test_a_refusal_carries_the_apiservers_message(apiserver, cluster) -> None:
    invalid = {"kind": "Status", "reason": "Invalid", "code": 422,
               "message": 'ConfigMap "Not_Valid" is invalid: metadata.name: Invalid value'}
    apiserver.script.on("GET", "/api/v1/namespaces/ns/configmaps/Not_Valid", (404, NOT_FOUND))
    apiserver.script.on("POST", "/api/v1/namespaces/ns/configmaps", (422, invalid))
    bad = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "Not_Valid", "namespace": "ns"}}
    with pytest.raises(KubeError) as err:
        cluster.apply(bad)
    assert (err.value.status, err.value.reason, err.value.message) == (422, "Invalid", invalid["message"])


def test_a_missing_kubeconfig_names_the_file(tmp_path) -> None:
    with pytest.raises(UserError, match=r"kubeconfig .*nope not found: pass --kubeconfig"):
        KubeCluster.from_kubeconfig(tmp_path / "nope")
