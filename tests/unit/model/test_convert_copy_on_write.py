"""Conversion copies only what it writes: the sent pod is never changed, untouched subtrees are shared,
and the patch turns the sent pod into the converted one, also where the pod has nulls instead of maps."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from dralab.model import jsonpatch
from dralab.model.convert import DRA_LABEL, Converter
from dralab.model.vendors import load_vendor_table

CONVERTER = Converter(load_vendor_table())
NPU = {"huawei.com/Ascend310P": "1", "huawei.com/Ascend310P-memory": "8192"}


def pod(**overrides: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "labels": {"app": "x"}, "annotations": {"a": "b"}},
        "spec": {
            "volumes": [{"name": "v", "emptyDir": {}}],
            "initContainers": [{"name": "init", "image": "busybox", "resources": {"limits": {"cpu": "1"}}}],
            "containers": [
                {"name": "app", "image": "busybox", "env": [{"name": "E", "value": "1"}],
                 "resources": {"limits": {**NPU, "cpu": "1"}, "requests": {"cpu": "1"}}},
                {"name": "side", "image": "busybox"},
            ],
        },
    }
    for path, value in overrides.items():
        *parents, last = path.split(".")
        node = doc
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        node[last] = value
    return doc


CASES = {
    "plain": pod(),
    "null labels": pod(**{"metadata.labels": None}),
    "no labels": {**pod(), "metadata": {"name": "p"}},
    "null resourceClaims": pod(**{"spec.resourceClaims": None}),
    "null container claims": pod(**{"spec.containers.0.resources": {"limits": NPU, "claims": None}}),
    "existing claims": pod(**{"spec.resourceClaims": [{"name": "mine", "resourceClaimName": "mine"}],
                              "spec.containers.0.resources": {"limits": NPU, "claims": [{"name": "mine"}]}}),
}


@pytest.mark.parametrize("name", CASES)
def test_the_sent_pod_is_unchanged_and_the_patch_gives_the_converted_pod(name: str) -> None:
    sent = CASES[name]
    before = copy.deepcopy(sent)
    conv = CONVERTER.convert(sent, namespace="ns", request_uid="u")
    assert conv.changed
    assert sent == before
    assert jsonpatch.apply(before, conv.patch) == conv.pod
    assert conv.pod["metadata"]["labels"][DRA_LABEL] == "true"
    assert conv.pod["spec"]["containers"][0]["resources"]["claims"][-1] == {"name": conv.plans[0].ref_name}


def test_untouched_subtrees_are_shared_and_written_ones_are_new() -> None:
    sent = pod()
    conv = CONVERTER.convert(sent, namespace="ns", request_uid="u")
    assert conv.pod["spec"]["volumes"] is sent["spec"]["volumes"]
    assert conv.pod["spec"]["initContainers"] is sent["spec"]["initContainers"]
    assert conv.pod["spec"]["containers"][1] is sent["spec"]["containers"][1]
    assert conv.pod["spec"]["containers"][0]["env"] is sent["spec"]["containers"][0]["env"]
    assert conv.pod["metadata"]["annotations"] is sent["metadata"]["annotations"]
    assert conv.pod["spec"]["containers"] is not sent["spec"]["containers"]
    assert conv.pod["spec"]["containers"][0]["resources"] is not sent["spec"]["containers"][0]["resources"]
    assert conv.pod["metadata"]["labels"] is not sent["metadata"]["labels"]


def test_converting_the_same_pod_twice_gives_the_same_answer() -> None:
    sent = pod()
    first = CONVERTER.convert(sent, namespace="ns", request_uid="u")
    second = CONVERTER.convert(sent, namespace="ns", request_uid="u")
    assert first.pod == second.pod and first.patch == second.patch and first.objects == second.objects


# -- the device request cache -------------------------------------------------------------------


def _request_of(doc: dict[str, Any], converter: Converter = CONVERTER) -> dict[str, Any]:
    return converter.convert(doc, namespace="ns", request_uid="u").objects[0]["spec"]["devices"]["requests"][0]


def test_pods_asking_alike_get_equal_requests_that_share_nothing() -> None:
    first = CONVERTER.convert(pod(), namespace="ns", request_uid="u")
    request = first.objects[0]["spec"]["devices"]["requests"][0]
    assert request is first.plans[0].request  # one conversion: the claim carries its plan's request
    request["exactly"]["count"] = 99
    request["exactly"]["selectors"].clear()
    again = _request_of({**pod(), "metadata": {"name": "q"}})
    assert again["exactly"]["count"] == 1 and again["exactly"]["selectors"]


def test_the_request_follows_the_selection_annotations_and_the_values() -> None:
    plain = _request_of(pod())
    uuid = "68496E64-20E05477-92C31323-6E78030A-BD003019"
    picked = _request_of(pod(**{"metadata.annotations": {"hami.io/use-Ascend310P-uuid": uuid}}))
    assert len(picked["exactly"]["selectors"]) == len(plain["exactly"]["selectors"]) + 1
    assert uuid in picked["exactly"]["selectors"][-1]["cel"]["expression"]
    limits = {**NPU, "huawei.com/Ascend310P-memory": "4096"}
    bigger = _request_of(pod(**{"spec.containers.0.resources": {"limits": limits}}))
    assert bigger["exactly"]["capacity"] != plain["exactly"]["capacity"]


def test_junk_values_are_denied_as_without_a_cache() -> None:
    from dralab.model.denials import Denied

    junk = pod(**{"spec.containers.0.resources": {"limits": {**NPU, "huawei.com/Ascend310P-memory": ["8192"]}}})
    with pytest.raises(Denied) as cached:
        CONVERTER.convert(junk, namespace="ns")
    with pytest.raises(Denied) as fresh:
        Converter(load_vendor_table()).convert(junk, namespace="ns")
    assert str(cached.value) == str(fresh.value)
    assert "spec.containers[0].resources.limits[huawei.com/Ascend310P-memory]" in str(cached.value)


def test_the_cache_stays_bounded_by_distinct_inputs() -> None:
    from dralab.model.convert import REQUEST_CACHE_SIZE

    converter = Converter(load_vendor_table())
    for memory in range(1, REQUEST_CACHE_SIZE + 50):
        limits = {**NPU, "huawei.com/Ascend310P-memory": str(memory)}
        _request_of(pod(**{"spec.containers.0.resources": {"limits": limits}}), converter)
    assert len(converter._requests) == REQUEST_CACHE_SIZE


def test_equal_but_differently_typed_values_are_not_one_cache_entry() -> None:
    from dralab.model.denials import Denied

    converter = Converter(load_vendor_table())
    npu = "huawei.com/Ascend310P"
    assert _request_of(pod(**{"spec.containers.0.resources": {"limits": {npu: 1}}}), converter)["exactly"]["count"] == 1
    with pytest.raises(Denied, match="not a valid quantity"):  # true == 1 in Python, not a device count
        _request_of(pod(**{"spec.containers.0.resources": {"limits": {npu: True}}}), converter)


def test_a_null_selection_annotation_is_denied_even_after_the_same_pod_without_it() -> None:
    from dralab.model.denials import Denied

    converter = Converter(load_vendor_table())
    _request_of(pod(), converter)
    with pytest.raises(Denied, match="must be a string"):
        _request_of(pod(**{"metadata.annotations": {"hami.io/use-Ascend310P-uuid": None}}), converter)
