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
