"""DRAExtendedResource coexistence: which DeviceClasses warrant an admission warning, and the warning itself."""

from __future__ import annotations

import anyio

from dralab.config import parse_config
from dralab.model.convert import Converter
from dralab.model.vendors import load_vendor_table
from dralab.webhook.extended import removed_resources, warnings_for
from dralab.webhook.server import build
from dralab_kit.fixtures.fakeapi import FakeKube


def _pod(limits: dict) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"containers": [{"name": "app", "resources": {"limits": limits}}]}}


def _class(name: str, extended: str | None) -> dict:
    spec = {"selectors": []}
    if extended:
        spec["extendedResourceName"] = extended
    return {"metadata": {"name": name}, "spec": spec}


def test_removed_resources_are_the_converted_ones() -> None:
    pod = _pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1024", "cpu": "1"})
    conv = Converter(load_vendor_table()).convert(pod)
    assert removed_resources(pod, conv.pod) == {"nvidia.com/gpu", "nvidia.com/gpumem"}


def test_warning_only_for_classes_naming_a_converted_resource() -> None:
    classes = [_class("gpu-ext", "nvidia.com/gpu"), _class("plain", None), _class("other", "example.com/x")]
    (warning,) = warnings_for(classes, {"nvidia.com/gpu", "nvidia.com/gpumem"})
    assert warning.startswith("DeviceClass gpu-ext declares extendedResourceName nvidia.com/gpu")
    assert "claim path" in warning
    assert warnings_for(classes, {"huawei.com/Ascend310P"}) == []


class _Classes:
    def __init__(self, classes: list[dict]) -> None:
        self.items = classes

    def warnings(self, original: dict, converted: dict) -> list[str]:
        return warnings_for(self.items, removed_resources(original, converted))


def test_mutate_response_carries_the_warning(fake_api) -> None:
    webhook = build(parse_config({}), fake_api, janitor=False)
    webhook.handler.extended = _Classes([_class("gpu-ext", "nvidia.com/gpu")])
    review = {"request": {"uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"}, "namespace": "ns",
                          "operation": "CREATE", "object": _pod({"nvidia.com/gpu": "1"})}}
    response = anyio.run(lambda: webhook.handler.mutate(review))["response"]
    assert response["allowed"] is True and response["warnings"][0].startswith("DeviceClass gpu-ext")
    plain = {"request": {**review["request"], "object": _pod({"huawei.com/Ascend310P": "1"})}}
    assert "warnings" not in anyio.run(lambda: webhook.handler.mutate(plain))["response"]


def test_the_watch_keeps_the_declaring_flag_and_warnings_follow_it() -> None:
    from dralab.util import wait_for
    from dralab.webhook.extended import DEVICE_CLASSES, DeviceClassWatch

    api = FakeKube()
    api.create(DEVICE_CLASSES, _class("plain", None))  # listed first: no extendedResourceName
    watch = DeviceClassWatch(api)  # type: ignore[arg-type]
    original, converted = _pod({"nvidia.com/gpu": "1"}), _pod({})
    watch.start()
    try:
        wait_for(watch.classes.synced.is_set, 10, "the DeviceClass list")
        assert watch.declaring is False and watch.warnings(original, converted) == []
        api.create(DEVICE_CLASSES, _class("gpu-ext", "nvidia.com/gpu"))  # reaches the cache by its watch
        wait_for(lambda: watch.declaring, 10, "the class with an extendedResourceName")
        (warning,) = watch.warnings(original, converted)
        assert warning.startswith("DeviceClass gpu-ext")
    finally:
        watch.stop()
