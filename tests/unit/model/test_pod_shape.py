"""Pods whose fields have the wrong JSON types are denied naming the field, by convert and leftovers alike."""

from __future__ import annotations

from typing import Any

import pytest

from dralab.model.convert import Converter, check_pod
from dralab.model.denials import Denied, check_type, json_type
from dralab.model.vendors import load_vendor_table

CONVERTER = Converter(load_vendor_table())


def pod(spec: Any = None, **meta: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", **meta}}
    if spec is not None:
        doc["spec"] = spec
    return doc


def container(resources: Any) -> dict[str, Any]:
    return {"name": "app", "image": "busybox", "resources": resources}


JUNK = [
    (pod("x"), "spec: must be an object, got a string"),
    ({"kind": "Pod", "metadata": [1]}, "metadata: must be an object, got a list"),
    (pod(name=5), "metadata.name: must be a string, got a number"),
    (pod(generateName=["a"]), "metadata.generateName: must be a string, got a list"),
    (pod(labels="a=b"), "metadata.labels: must be an object, got a string"),
    (pod(annotations=[]), "metadata.annotations: must be an object, got a list"),
    (pod({"containers": {"name": "app"}}), "spec.containers: must be a list, got an object"),
    (pod({"initContainers": "x"}), "spec.initContainers: must be a list, got a string"),
    (pod({"containers": [container({}), 7]}), "spec.containers[1]: must be an object, got a number"),
    (pod({"containers": [{"name": True}]}), "spec.containers[0].name: must be a string, got a boolean"),
    (pod({"containers": [container("x")]}), "spec.containers[0].resources: must be an object, got a string"),
    (pod({"containers": [container({"limits": ["huawei.com/Ascend310P"]})]}),
     "spec.containers[0].resources.limits: must be an object, got a list"),
    (pod({"containers": [container({"requests": 1})]}),
     "spec.containers[0].resources.requests: must be an object, got a number"),
    (pod({"containers": [container({"claims": {}})]}),
     "spec.containers[0].resources.claims: must be a list, got an object"),
    (pod({"resourceClaims": {}}), "spec.resourceClaims: must be a list, got an object"),
    (pod({"resourceClaims": [None]}), "spec.resourceClaims[0]: must be an object, got null"),
    (pod({"resourceClaims": [{"name": ["x"]}]}), "spec.resourceClaims[0].name: must be a string, got a list"),
    ([], "kind: expected a Pod"),
    ({"kind": 7}, "kind: expected a Pod"),
]


@pytest.mark.parametrize(("doc", "message"), JUNK)
def test_check_pod_names_the_first_wrong_field(doc: Any, message: str) -> None:
    with pytest.raises(Denied) as info:
        check_pod(doc)
    assert str(info.value) == message


@pytest.mark.parametrize(("doc", "message"), JUNK)
def test_convert_and_leftovers_deny_instead_of_crashing(doc: Any, message: str) -> None:
    for ask in (CONVERTER.convert, CONVERTER.leftovers):
        with pytest.raises(Denied) as info:
            ask(doc)
        assert str(info.value) == message


@pytest.mark.parametrize(
    "doc",
    [
        {},
        pod(),
        pod({"containers": None, "initContainers": None}, labels=None, annotations=None),
        pod({"containers": [container(None)]}),
        pod({"containers": [container({"limits": None, "requests": None})]}),
    ],
)
def test_absent_and_null_fields_are_fine(doc: dict[str, Any]) -> None:
    check_pod(doc)
    assert CONVERTER.leftovers(doc) == []


def test_leftovers_still_finds_hami_resources() -> None:
    doc = pod({"containers": [container({"limits": {"huawei.com/Ascend310P": "1", "cpu": "1"}})]})
    assert CONVERTER.leftovers(doc) == ["spec.containers[0].resources.limits[huawei.com/Ascend310P]"]


def test_opted_out_never_raises_on_junk() -> None:
    assert CONVERTER.opted_out({"metadata": "x"}) is False
    assert CONVERTER.opted_out({"metadata": {"labels": ["dralab.io/convert"]}}) is False
    assert CONVERTER.opted_out(pod(labels={"dralab.io/convert": "false"})) is True


def test_type_words() -> None:
    assert [json_type(v) for v in ({}, [], "", True, 1, 1.5, None)] == [
        "an object", "a list", "a string", "a boolean", "a number", "a number", "null"]
    assert check_type({"a": None}, "a", dict, "x") is None
    assert check_type({"a": {"b": 1}}, "a", dict, "x") == {"b": 1}
    with pytest.raises(Denied, match=r"^x\.y: must be an object, got a list$"):
        check_type({"a": []}, "a", dict, "x.y")
