"""``dralab.io/prefer-types``: ordered fallbacks as one ``firstAvailable`` request (KEP-4816)."""

from __future__ import annotations

from typing import Any

import pytest

from dralab.model import naming
from dralab.model.convert import ANN_PREFER_TYPES, MAX_SUBREQUESTS, Converter, convert_pod
from dralab.model.denials import Denied
from dralab.model.vendors import load_vendor_table

from . import cel_eval

TABLE = load_vendor_table()
MIB = 1024 * 1024
NV = "hami-core-gpu.project-hami.io"
FIELD = f"metadata.annotations[{ANN_PREFER_TYPES}]"
GPU_LIMITS = {"nvidia.com/gpu": 2, "nvidia.com/gpumem": "20480", "nvidia.com/gpucores": "30"}


def pod(limits: dict[str, Any], annotations: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "annotations": annotations},
        "spec": {"containers": [{"name": "app", "image": "busybox", "resources": {"limits": limits}}]},
    }


def request_of(limits: dict[str, Any], annotations: dict[str, Any], table=TABLE) -> dict[str, Any]:
    conv = convert_pod(pod(limits, annotations), table)
    (claim,) = [o for o in conv.objects if o["kind"] == "ResourceClaim"]
    (req,) = claim["spec"]["devices"]["requests"]
    return req


def exprs(sub: dict[str, Any]) -> list[str]:
    return [s["cel"]["expression"] for s in sub["selectors"]]


def matches(sub: dict[str, Any], device: dict[str, Any]) -> bool:
    return all(bool(cel_eval.evaluate(e, {"device": device})) for e in exprs(sub))


def gpu(product: str, uuid: str = "GPU-1") -> dict[str, Any]:
    return {"driver": NV, "attributes": {NV: {"type": "hami-gpu", "uuid": uuid, "productName": product}}}


A100 = gpu("NVIDIA A100-SXM4-40GB")
H100 = gpu("NVIDIA H100 80GB HBM3")
L4 = gpu("NVIDIA L4")


def test_one_subrequest_per_type_in_the_order_given() -> None:
    req = request_of(GPU_LIMITS, {ANN_PREFER_TYPES: "h100, a100,l4"})
    assert req["name"] == "gpu" and "exactly" not in req
    assert [s["name"] for s in req["firstAvailable"]] == ["h100", "a100", "l4"]
    assert [[matches(s, d) for d in (A100, H100, L4)] for s in req["firstAvailable"]] == [
        [False, True, False], [True, False, False], [False, False, True],
    ]  # fmt: skip


def test_every_subrequest_carries_count_capacity_and_class() -> None:
    req = request_of(GPU_LIMITS, {ANN_PREFER_TYPES: "a100,h100"})
    for sub in req["firstAvailable"]:
        assert set(sub) == {"name", "deviceClassName", "allocationMode", "count", "capacity", "selectors"}
        assert sub["deviceClassName"] == NV and sub["allocationMode"] == "ExactCount" and sub["count"] == 2
        assert sub["capacity"] == {"requests": {"memory": str(20480 * MIB), "cores": "30"}}


def test_subrequests_without_memory_ask_for_no_capacity_like_the_plain_request() -> None:
    plain = request_of({"nvidia.com/gpu": 1}, {})["exactly"]
    (sub,) = request_of({"nvidia.com/gpu": 1}, {ANN_PREFER_TYPES: "a100"})["firstAvailable"]
    assert {k: v for k, v in sub.items() if k not in ("name", "selectors")} == {
        k: v for k, v in plain.items() if k != "selectors"
    }


def test_each_subrequest_has_the_class_uuid_and_its_type_selector() -> None:
    ann = {ANN_PREFER_TYPES: "a100,h100", "nvidia.com/use-gpuuuid": "GPU-1,GPU-2", "nvidia.com/nouse-gpuuuid": "GPU-2"}
    a100, h100 = request_of(GPU_LIMITS, ann)["firstAvailable"]
    for sub, wanted in ((a100, "A100"), (h100, "H100")):
        assert exprs(sub) == [
            TABLE.get("nvidia").class_selector(),
            f'device.attributes["{NV}"].uuid in ["GPU-1", "GPU-2"]',
            f'!(device.attributes["{NV}"].uuid in ["GPU-2"])',
            f'device.attributes["{NV}"].productName.upperAscii().contains("{wanted}")',
        ]
    assert matches(a100, A100) and not matches(a100, gpu("NVIDIA A100-SXM4-40GB", "GPU-2"))
    assert not matches(a100, gpu("NVIDIA A100-SXM4-40GB", "GPU-3"))
    assert not matches(a100, {**A100, "driver": "other"})  # the class selector is kept
    assert matches(h100, H100) and not matches(h100, A100)


def test_nouse_type_excludes_from_every_subrequest() -> None:
    ann = {ANN_PREFER_TYPES: "a100,nvidia", "nvidia.com/nouse-gputype": "40GB"}
    a100, anything = request_of(GPU_LIMITS, ann)["firstAvailable"]
    assert not matches(a100, A100) and matches(a100, gpu("NVIDIA A100-SXM4-80GB"))
    assert not matches(anything, A100) and matches(anything, H100)


def test_types_match_case_insensitively_by_substring_on_nvidia() -> None:
    (sub,) = request_of(GPU_LIMITS, {ANN_PREFER_TYPES: "a100-sxm4"})["firstAvailable"]
    assert sub["name"] == "a100-sxm4" and matches(sub, A100) and not matches(sub, gpu("NVIDIA A100-PCIE-40GB"))


def test_ascend_types_match_whole_product_names() -> None:
    req = request_of({"huawei.com/Ascend910B3": 1}, {ANN_PREFER_TYPES: "910b3,910B4"})
    first, second = req["firstAvailable"]
    assert req["name"] == "npu" and [first["name"], second["name"]] == ["910b3", "910b4"]

    def npu(product: str) -> dict[str, Any]:
        domain = "ascend.project-hami.io"
        return {"driver": domain, "attributes": {domain: {"type": "HAMivNPUCore", "productName": product}}}

    assert matches(first, npu("910B3")) and not matches(first, npu("910B4"))
    assert not matches(first, npu("910B3-1"))  # exact, not a substring
    assert matches(second, npu("910B4")) and not matches(second, npu("910B4-1"))


def test_hygon_compute_unit_guard_is_on_every_subrequest() -> None:
    table = load_vendor_table({"hygon": {"computeUnits": {"reference": 120}}})
    limits = {"hygon.com/hcunum": 1, "hygon.com/hcucores": "50"}
    req = request_of(limits, {ANN_PREFER_TYPES: "k100,z100"}, table)
    for sub in req["firstAvailable"]:
        assert sub["capacity"]["requests"]["cores"] == "60"
        assert exprs(sub)[-1].startswith('device.capacity["dra.hygon.com"].cores.compareTo(')


def test_repeats_ignoring_case_are_one_subrequest() -> None:
    req = request_of(GPU_LIMITS, {ANN_PREFER_TYPES: "a100,A100, h100 ,a100"})
    assert [s["name"] for s in req["firstAvailable"]] == ["a100", "h100"]


def test_subrequest_names_are_unique_dns_labels() -> None:
    types = ["NVIDIA A100-SXM4-40GB", "nvidia a100 sxm4 40gb:", "t1", "A" * 64, "x (y)/z+", "t1 ", "T-1"]
    req = request_of(GPU_LIMITS, {ANN_PREFER_TYPES: ",".join(types)})
    names = [s["name"] for s in req["firstAvailable"]]
    assert len(names) == len(set(names)) == 6  # "t1 " is "t1" again
    assert all(naming.is_dns_label(n) for n in names), names
    assert names[:3] == ["nvidia-a100-sxm4-40gb", "t1", "t2"]
    assert names[3] == "a" * 63 and names[4] == "x-y-z"


def test_eight_types_are_allowed() -> None:
    types = ",".join(f"type{i}" for i in range(MAX_SUBREQUESTS))
    assert len(request_of(GPU_LIMITS, {ANN_PREFER_TYPES: types})["firstAvailable"]) == MAX_SUBREQUESTS


def test_template_lifecycle_carries_first_available() -> None:
    conv = Converter(TABLE, "template").convert(pod(GPU_LIMITS, {ANN_PREFER_TYPES: "a100,h100"}))
    (tpl,) = [o for o in conv.objects if o["kind"] == "ResourceClaimTemplate"]
    (req,) = tpl["spec"]["spec"]["devices"]["requests"]
    assert [s["name"] for s in req["firstAvailable"]] == ["a100", "h100"]


def test_the_request_cache_tells_preferences_apart() -> None:
    converter = Converter(TABLE)

    def names(value: str | None) -> list[str] | None:
        ann = {ANN_PREFER_TYPES: value} if value is not None else {}
        (claim,) = converter.convert(pod(GPU_LIMITS, ann)).objects
        (req,) = claim["spec"]["devices"]["requests"]
        return [s["name"] for s in req["firstAvailable"]] if "firstAvailable" in req else None

    assert names("a100,h100") == ["a100", "h100"]
    assert names("h100,a100") == ["h100", "a100"]
    assert names(None) is None
    assert names("a100,h100") == ["a100", "h100"]


@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        ({ANN_PREFER_TYPES: ""}, "names no device type; list one or more, comma-separated, or remove the annotation"),
        ({ANN_PREFER_TYPES: " , ,"}, "names no device type"),
        (
            {ANN_PREFER_TYPES: ",".join(f"t{i}" for i in range(9))},
            "lists 9 device types; a request holds at most 8 alternatives (firstAvailable): keep the 8 you prefer most",
        ),
        ({ANN_PREFER_TYPES: ",".join(f"t{i}" for i in range(40))}, "lists 40 device types; a request holds at most 8"),
        ({ANN_PREFER_TYPES: 'a100,h100") || true || ("'}, "is not a valid device type"),
        ({ANN_PREFER_TYPES: "a100,-h100"}, "'-h100' is not a valid device type (1-64 characters: letters, digits"),
        ({ANN_PREFER_TYPES: "a" * 65}, "is not a valid device type (1-64 characters"),
        ({ANN_PREFER_TYPES: ["a100"]}, "must be a string of comma-separated values"),
        (
            {ANN_PREFER_TYPES: "a100,h100", "nvidia.com/use-gputype": "a100"},
            "cannot be combined with nvidia.com/use-gputype: both name the accepted device types. Drop "
            "nvidia.com/use-gputype and list its types in dralab.io/prefer-types in the order you prefer them, or "
            "drop dralab.io/prefer-types to accept the types in any order",
        ),
    ],
)
def test_refusals_name_the_annotation_and_the_fix(annotations: dict[str, Any], message: str) -> None:
    with pytest.raises(Denied) as exc:
        convert_pod(pod(GPU_LIMITS, annotations), TABLE)
    assert exc.value.field == FIELD
    assert message in exc.value.problem


def test_repeats_do_not_count_toward_the_limit() -> None:
    value = ",".join(["a100", "A100"] * 8 + ["h100"])
    assert [s["name"] for s in request_of(GPU_LIMITS, {ANN_PREFER_TYPES: value})["firstAvailable"]] == ["a100", "h100"]


def test_use_type_of_another_vendor_does_not_conflict() -> None:
    req = request_of(GPU_LIMITS, {ANN_PREFER_TYPES: "a100", "hami.io/use-nputype": "310P3"})
    assert [s["name"] for s in req["firstAvailable"]] == ["a100"]


def test_without_the_annotation_the_request_is_exactly() -> None:
    req = request_of(GPU_LIMITS, {"nvidia.com/use-gputype": "a100"})
    assert "firstAvailable" not in req and req["exactly"]["count"] == 2
