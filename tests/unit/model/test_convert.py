"""Conversion, table-driven over every vendor and chip, annotation, unit and refusal."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from dralab.model import jsonpatch, naming
from dralab.model.convert import Converter, convert_pod
from dralab.model.denials import Denied
from dralab.model.vendors import load_vendor_table

from . import cel_eval

TABLE = load_vendor_table()
MIB = 1024 * 1024


def pod(
    limits: dict[str, Any] | None = None,
    *,
    requests: dict[str, Any] | None = None,
    name: str = "p",
    annotations: dict[str, str] | None = None,
    kind: str = "containers",
    **meta: Any,
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if limits is not None:
        resources["limits"] = limits
    if requests is not None:
        resources["requests"] = requests
    metadata: dict[str, Any] = {"name": name, **meta}
    if annotations:
        metadata["annotations"] = annotations
    spec: dict[str, Any] = {"containers": [{"name": "app", "image": "busybox", "resources": resources}]}
    if kind != "containers":
        spec = {
            "containers": [{"name": "main", "image": "busybox"}],
            kind: [{"name": "app", "image": "busybox", "resources": resources}],
        }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def only_request(conv) -> dict[str, Any]:
    (claim,) = [o for o in conv.objects if o["kind"] == "ResourceClaim"]
    (req,) = claim["spec"]["devices"]["requests"]
    return req


def selectors(req: dict[str, Any]) -> list[str]:
    return [s["cel"]["expression"] for s in req["exactly"]["selectors"]]


def matches(req: dict[str, Any], dev: dict[str, Any]) -> bool:
    return all(bool(cel_eval.evaluate(e, {"device": dev})) for e in selectors(req))


# -- every vendor and chip ---------------------------------------------------------------------

ASCEND_CHIPS = [
    ("Ascend910A", "910A"),
    ("Ascend910B2", "910B2"),
    ("Ascend910B3", "910B3"),
    ("Ascend910B4", "910B4"),
    ("Ascend910B4-1", "910B4-1"),
    ("Ascend310P", "310P3"),
    ("Ascend910C", "Ascend910"),
]


@pytest.mark.parametrize(("chip", "product"), ASCEND_CHIPS)
def test_every_ascend_chip(chip: str, product: str) -> None:
    conv = convert_pod(
        pod({f"huawei.com/{chip}": 1, f"huawei.com/{chip}-memory": "4096", f"huawei.com/{chip}-core": "25"}),
        TABLE,
        namespace="ns",
    )
    req = only_request(conv)
    assert req["name"] == "npu"
    assert req["exactly"]["deviceClassName"] == "hami-vnpu-core.project-hami.io"
    assert req["exactly"]["capacity"]["requests"] == {"cores": "25", "memory": str(4096 * MIB)}
    assert conv.plans[0].object_name == f"ns-p-app-{chip.lower()}"
    dev = {
        "driver": "ascend.project-hami.io",
        "attributes": {"ascend.project-hami.io": {"type": "HAMivNPUCore", "productName": product, "uuid": "u"}},
    }
    assert matches(req, dev)


VENDORS = [
    (
        "nvidia",
        {"nvidia.com/gpu": 2, "nvidia.com/gpumem": "3000", "nvidia.com/gpucores": "30"},
        "gpu",
        "hami-core-gpu.project-hami.io",
        "nvidia",
        {"cores": "30", "memory": str(3000 * MIB)},
    ),
    (
        "hygon",
        {"hygon.com/hcunum": 1, "hygon.com/hcumem": "2048", "hygon.com/hcucores": "0"},
        "hcu",
        "dra.hygon.com",
        "hygon",
        {"cores": "0", "memory": str(2048 * MIB)},
    ),  # no compute reservation: no compute-unit count needed
]


@pytest.mark.parametrize(("vendor", "limits", "request_name", "device_class", "suffix", "capacity"), VENDORS)
def test_nvidia_and_hygon(
    vendor: str, limits: dict, request_name: str, device_class: str, suffix: str, capacity: dict
) -> None:
    conv = convert_pod(pod(limits), TABLE, namespace="ns")
    req = only_request(conv)
    assert req["name"] == request_name
    assert req["exactly"]["deviceClassName"] == device_class
    assert req["exactly"]["count"] == limits[next(iter(limits))]
    assert req["exactly"]["capacity"]["requests"] == capacity
    assert conv.plans[0].object_name == f"ns-p-app-{suffix}"
    assert conv.vendors == [vendor]


def test_new_vendor_from_config_converts_without_code() -> None:
    table = load_vendor_table(
        {
            "metax": {
                "driver": "gpu.metax-tech.com",
                "deviceClass": "gpu.metax-tech.com",
                "typeAttribute": "sgpu",
                "requestName": "gpu",
                "claimSuffix": "metax",
                "resources": {
                    "count": "metax-tech.com/sgpu",
                    "memory": "metax-tech.com/vmemory",
                    "cores": "metax-tech.com/vcore",
                },
                "annotations": {
                    "useUUID": "metax-tech.com/use-gpuuuid",
                    "noUseUUID": "metax-tech.com/nouse-gpuuuid",
                    "useType": "metax-tech.com/use-gputype",
                    "noUseType": "metax-tech.com/nouse-gputype",
                },
                "defaults": {"cores": 0},
            }
        }
    )
    conv = convert_pod(pod({"metax-tech.com/sgpu": 1, "metax-tech.com/vmemory": "1024"}), table)
    req = only_request(conv)
    assert req["exactly"]["deviceClassName"] == "gpu.metax-tech.com"
    assert req["exactly"]["capacity"]["requests"] == {"cores": "0", "memory": str(1024 * MIB)}


# -- units and defaults -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("memory", "expected"),
    [("8192", 8589934592), ("14k", 14000 * MIB), ("14000", 14000 * MIB), ("16Gi", 16 * 1024**3)],
)
def test_memory_units_in_claims(memory: str, expected: int) -> None:
    conv = convert_pod(pod({"huawei.com/Ascend310P": 1, "huawei.com/Ascend310P-memory": memory}), TABLE)
    assert only_request(conv)["exactly"]["capacity"]["requests"]["memory"] == str(expected)


def test_defaults_no_cores_and_whole_memory() -> None:
    conv = convert_pod(pod({"nvidia.com/gpu": 1}), TABLE)
    assert only_request(conv)["exactly"]["capacity"] == {"requests": {"cores": "0"}}


def test_defaults_are_configurable_per_vendor() -> None:
    table = load_vendor_table({"nvidia": {"defaults": {"cores": None, "memory": 1024}}})
    conv = convert_pod(pod({"nvidia.com/gpu": 1}), table)
    assert only_request(conv)["exactly"]["capacity"] == {"requests": {"memory": str(1024 * MIB)}}
    table = load_vendor_table({"nvidia": {"defaults": {"cores": None, "memory": None}}})
    assert "capacity" not in only_request(convert_pod(pod({"nvidia.com/gpu": 1}), table))["exactly"]


# -- containers, limits and requests -------------------------------------------------------------


@pytest.mark.parametrize("kind", ["initContainers", "containers"])
def test_init_and_sidecar_containers(kind: str) -> None:
    p = pod({"nvidia.com/gpu": 1, "nvidia.com/gpumem": "1000"}, kind=kind)
    if kind == "initContainers":
        p["spec"]["initContainers"][0]["restartPolicy"] = "Always"  # a sidecar
    conv = convert_pod(p, TABLE, namespace="ns")
    target = conv.pod["spec"][kind][-1]
    assert target["resources"] == {"claims": [{"name": "ns-p-app-nvidia"}]}
    assert conv.pod["spec"]["resourceClaims"] == [{"name": "ns-p-app-nvidia", "resourceClaimName": "ns-p-app-nvidia"}]


def test_requests_only_and_unrelated_resources_untouched() -> None:
    p = pod({"cpu": "1", "memory": "1Gi"}, requests={"nvidia.com/gpu": "1", "cpu": "500m"})
    conv = convert_pod(p, TABLE)
    res = conv.pod["spec"]["containers"][0]["resources"]
    assert res["limits"] == {"cpu": "1", "memory": "1Gi"}
    assert res["requests"] == {"cpu": "500m"}
    assert res["claims"] == [{"name": "default-p-app-nvidia"}]


def test_defaulted_requests_equal_to_limits_are_removed_too() -> None:
    limits = {"huawei.com/Ascend310P": "1", "huawei.com/Ascend310P-memory": "14k"}
    conv = convert_pod(pod(limits, requests=dict(limits)), TABLE)
    assert "limits" not in conv.pod["spec"]["containers"][0]["resources"]
    assert "requests" not in conv.pod["spec"]["containers"][0]["resources"]


def test_one_claim_per_container_per_vendor() -> None:
    p = pod({"nvidia.com/gpu": 1, "huawei.com/Ascend310P": 1})
    p["spec"]["containers"].append({"name": "two", "resources": {"limits": {"nvidia.com/gpu": 1}}})
    conv = convert_pod(p, TABLE, namespace="ns")
    assert sorted(x.object_name for x in conv.plans) == ["ns-p-app-ascend310p", "ns-p-app-nvidia", "ns-p-two-nvidia"]
    assert len(conv.pod["spec"]["resourceClaims"]) == 3


def test_ignored_hami_resources_go_with_the_vendor() -> None:
    conv = convert_pod(pod({"nvidia.com/gpu": 1, "nvidia.com/priority": "1"}), TABLE)
    assert "limits" not in conv.pod["spec"]["containers"][0]["resources"]


# -- selectors ------------------------------------------------------------------------------------


def test_ascend_annotations_become_cel() -> None:
    ann = {
        "hami.io/use-Ascend310P-uuid": "U1,U2",
        "hami.io/no-use-Ascend310P-uuid": "U2",
        "hami.io/use-nputype": "310P3",
        "hami.io/no-use-nputype": "910B3",
    }
    req = only_request(convert_pod(pod({"huawei.com/Ascend310P": 1}, annotations=ann), TABLE))
    sels = selectors(req)
    assert len(sels) == 5

    def dev(uuid: str, product: str = "310P3") -> dict:
        return {
            "driver": "ascend.project-hami.io",
            "attributes": {"ascend.project-hami.io": {"type": "HAMivNPUCore", "uuid": uuid, "productName": product}},
        }

    assert matches(req, dev("U1"))
    assert not matches(req, dev("U2"))  # listed, then excluded
    assert not matches(req, dev("U3"))
    assert not matches(req, dev("U1", "910B3"))


def test_nvidia_types_match_by_substring_and_uuid_annotations() -> None:
    ann = {"nvidia.com/use-gputype": "A100", "nvidia.com/nouse-gpuuuid": "GPU-bad"}
    req = only_request(convert_pod(pod({"nvidia.com/gpu": 1}, annotations=ann), TABLE))

    def dev(uuid: str, product: str) -> dict:
        return {
            "driver": "hami-core-gpu.project-hami.io",
            "attributes": {"hami-core-gpu.project-hami.io": {"type": "hami-gpu", "uuid": uuid, "productName": product}},
        }

    assert matches(req, dev("GPU-1", "NVIDIA A100-SXM4-40GB"))
    assert not matches(req, dev("GPU-bad", "NVIDIA A100-SXM4-40GB"))
    assert not matches(req, dev("GPU-1", "NVIDIA L4"))


def test_hygon_annotations() -> None:
    ann = {"hygon.com/use-gpuuuid": "H1", "hygon.com/nouse-hcutype": "Z100"}
    sels = selectors(only_request(convert_pod(pod({"hygon.com/hcunum": 1}, annotations=ann), TABLE)))
    assert sels[1] == 'device.attributes["dra.hygon.com"].uuid in ["H1"]'
    assert sels[2] == '!(device.attributes["dra.hygon.com"].productName.upperAscii().contains("Z100"))'


def test_chip_selector_when_enabled() -> None:
    table = load_vendor_table({"ascend": {"chipSelector": True}})
    sels = selectors(only_request(convert_pod(pod({"huawei.com/Ascend910B3": 1}), table)))
    assert sels[1] == 'device.attributes["ascend.project-hami.io"].productName in ["910B3"]'


def test_hostile_annotation_is_denied_with_its_name() -> None:
    ann = {"hami.io/use-Ascend310P-uuid": '"] || true || ["'}
    with pytest.raises(Denied, match=r"^metadata\.annotations\[hami\.io/use-Ascend310P-uuid\]: "):
        convert_pod(pod({"huawei.com/Ascend310P": 1}, annotations=ann), TABLE)


# -- refusals -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("limits", "field", "message"),
    [
        ({"huawei.com/Ascend310P-memory": "8192"}, "limits[huawei.com/Ascend310P-memory]", "needs the device count"),
        ({"nvidia.com/gpucores": "10"}, "limits[nvidia.com/gpucores]", "add `nvidia.com/gpu: 1`"),
        ({"nvidia.com/gpu": 1, "nvidia.com/gpucores": "150"}, "limits[nvidia.com/gpucores]", "outside 0..100"),
        ({"nvidia.com/gpu": 0}, "limits[nvidia.com/gpu]", "requests no device"),
        ({"nvidia.com/gpu": 1, "nvidia.com/gpumem": "0"}, "limits[nvidia.com/gpumem]", "no memory"),
        ({"nvidia.com/gpu": 1, "nvidia.com/gpumem": "-5"}, "limits[nvidia.com/gpumem]", "no memory"),
        ({"nvidia.com/gpu": 1, "nvidia.com/gpumem": "500m"}, "limits[nvidia.com/gpumem]", "milli"),
        (
            {"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": "50"},
            "limits[nvidia.com/gpumem-percentage]",
            "cannot be expressed as a DRA capacity request at admission",
        ),
        (
            {"huawei.com/Ascend999": 1, "huawei.com/Ascend999-memory": "1024"},
            "limits[huawei.com/Ascend999-memory]",
            "unknown Huawei Ascend NPU chip",
        ),
        ({"hygon.com/hcunum": 1, "hygon.com/hcucores": "101"}, "limits[hygon.com/hcucores]", "outside 0..100"),
    ],
)
def test_denials_name_the_field_and_fix(limits: dict, field: str, message: str) -> None:
    with pytest.raises(Denied) as info:
        convert_pod(pod(limits), TABLE)
    text = str(info.value)
    assert text.startswith(f"spec.containers[0].resources.{field}: "), text
    assert message in text


def test_limits_and_requests_that_differ_are_denied() -> None:
    with pytest.raises(Denied, match=r"requests\[nvidia.com/gpumem\].*differs from limits"):
        convert_pod(
            pod(
                {"nvidia.com/gpu": 1, "nvidia.com/gpumem": "1000"},
                requests={"nvidia.com/gpu": 1, "nvidia.com/gpumem": "2000"},
            ),
            TABLE,
        )


def test_disabled_vendor_is_left_alone() -> None:
    table = load_vendor_table(enabled=["ascend"])
    conv = convert_pod(pod({"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": "50"}), table)
    assert not conv.changed and conv.pod is conv.original


# -- pass-through, idempotence, naming ------------------------------------------------------------


def test_pods_without_hami_resources_pass_untouched() -> None:
    p = pod({"cpu": "1"})
    conv = convert_pod(p, TABLE)
    assert not conv.changed and conv.patch == [] and conv.objects == []


def test_dra_native_pod_passes_untouched() -> None:
    p = pod({})
    p["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    p["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "t"}]
    assert convert_pod(p, TABLE).patch == []


def test_converting_twice_changes_nothing() -> None:
    first = convert_pod(pod({"huawei.com/Ascend310P": 1, "huawei.com/Ascend310P-memory": "8192"}), TABLE)
    second = convert_pod(first.pod, TABLE)
    assert not second.changed and second.patch == []


def test_opt_out_label() -> None:
    conv = convert_pod(pod({"nvidia.com/gpu": 1}, labels={"dralab.io/convert": "false"}), TABLE)
    assert not conv.changed


def test_hami_webhook_ignore_is_not_an_opt_out() -> None:
    conv = convert_pod(pod({"nvidia.com/gpu": 1}, labels={"hami.io/webhook": "ignore"}), TABLE)
    assert conv.changed


def test_generate_name_pods_get_names_from_the_admission_uid() -> None:
    p = pod({"nvidia.com/gpu": 1}, name="")
    del p["metadata"]["name"]
    p["metadata"]["generateName"] = "web-7f9c-"
    a = Converter(TABLE).convert(p, namespace="ns", request_uid="uid-1")
    b = Converter(TABLE).convert(p, namespace="ns", request_uid="uid-1")
    c = Converter(TABLE).convert(p, namespace="ns", request_uid="uid-2")
    assert a.plans[0].object_name == b.plans[0].object_name != c.plans[0].object_name
    assert a.plans[0].object_name == f"ns-{naming.generated_name('web-7f9c-', 'uid-1')}-app-nvidia"
    assert a.objects[0]["metadata"]["annotations"]["dralab.io/pod-generate-name"] == "web-7f9c-"
    assert a.objects[0]["metadata"]["labels"]["dralab.io/pod"] == "web-7f9c"
    offline = convert_pod(p, TABLE, namespace="ns")
    assert offline.plans[0].object_name == convert_pod(copy.deepcopy(p), TABLE, namespace="ns").plans[0].object_name


def test_renames_apply_to_claim_and_references() -> None:
    p = pod({"nvidia.com/gpu": 1})
    conv = Converter(TABLE).convert(p, namespace="ns", renames={"ns-p-app-nvidia": "ns-p-app-nvidia-0123456789"})
    assert conv.objects[0]["metadata"]["name"] == "ns-p-app-nvidia-0123456789"
    assert conv.pod["spec"]["resourceClaims"][0]["resourceClaimName"] == "ns-p-app-nvidia-0123456789"
    assert conv.pod["spec"]["containers"][0]["resources"]["claims"] == [{"name": "ns-p-app-nvidia-0123456789"}]


def test_claims_carry_their_pod() -> None:
    conv = Converter(TABLE).convert(pod({"nvidia.com/gpu": 1}), namespace="ns", request_uid="u-1")
    meta = conv.objects[0]["metadata"]
    assert meta["labels"] == {
        "app.kubernetes.io/managed-by": "dralab",
        "dralab.io/lifecycle": "claim",
        "dralab.io/pod": "p",
    }
    assert meta["annotations"] == {
        "dralab.io/container": "app",
        "dralab.io/pod-name": "p",
        "dralab.io/admission-uid": "u-1",
    }


def test_patch_applies_to_the_converted_pod() -> None:
    p = pod({"huawei.com/Ascend310P": 1, "cpu": "1"}, labels={"hami.io/webhook": "ignore"})
    conv = convert_pod(p, TABLE)
    assert jsonpatch.apply(p, conv.patch) == conv.pod
    assert {"op": "add", "path": "/metadata/labels/hami.io~1dra", "value": "true"} in conv.patch


# -- template lifecycle ---------------------------------------------------------------------------


def test_template_mode_shares_templates_by_shape() -> None:
    limits = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": "1000"}
    a = convert_pod(pod(limits, name="a"), TABLE, namespace="ns", lifecycle="template")
    b = convert_pod(pod(limits, name="b"), TABLE, namespace="ns", lifecycle="template")
    c = convert_pod(
        pod({"nvidia.com/gpu": 1, "nvidia.com/gpumem": "2000"}, name="c"), TABLE, namespace="ns", lifecycle="template"
    )
    (ta,), (tb,), (tc,) = a.objects, b.objects, c.objects
    assert ta["kind"] == "ResourceClaimTemplate"
    assert ta == tb and ta["metadata"]["name"] != tc["metadata"]["name"]
    assert a.pod["spec"]["resourceClaims"] == [
        {"name": "app-nvidia", "resourceClaimTemplateName": ta["metadata"]["name"]}
    ]
    assert ta["spec"]["spec"]["devices"]["requests"][0]["exactly"]["capacity"]["requests"]["memory"] == str(1000 * MIB)


# -- type matching ignores case, as HAMi's does --------------------------------------------------


def _gpu(product: str) -> dict:
    return {
        "driver": "hami-core-gpu.project-hami.io",
        "attributes": {"hami-core-gpu.project-hami.io": {"type": "hami-gpu", "uuid": "GPU-1", "productName": product}},
    }


@pytest.mark.parametrize("written", ["a100", "A100", "A100-sxm4"])
def test_use_and_nouse_gputype_ignore_case(written: str) -> None:
    use = only_request(convert_pod(pod({"nvidia.com/gpu": 1}, annotations={"nvidia.com/use-gputype": written}), TABLE))
    nouse = only_request(
        convert_pod(pod({"nvidia.com/gpu": 1}, annotations={"nvidia.com/nouse-gputype": written}), TABLE)
    )
    assert matches(use, _gpu("NVIDIA A100-SXM4-40GB"))
    assert not matches(use, _gpu("NVIDIA H100 80GB HBM3"))
    assert not matches(nouse, _gpu("NVIDIA A100-SXM4-40GB"))  # the excluded card stays excluded
    assert matches(nouse, _gpu("NVIDIA H100 80GB HBM3"))


def test_hygon_hcutype_ignores_case() -> None:
    ann = {"hygon.com/use-hcutype": "k100"}
    req = only_request(convert_pod(pod({"hygon.com/hcunum": 1}, annotations=ann), TABLE))
    dev = {"driver": "dra.hygon.com",
           "attributes": {"dra.hygon.com": {"type": "hcu", "uuid": "H1", "productName": "K100_AI"}}}
    assert matches(req, dev)


# -- Hygon compute units come from the configuration, never from a constant ----------------------


HCU = {"hygon.com/hcunum": 1, "hygon.com/hcumem": "2048", "hygon.com/hcucores": "50"}


def test_hcucores_without_a_configured_reference_is_refused_with_the_fix() -> None:
    with pytest.raises(Denied) as exc:
        convert_pod(pod(HCU), TABLE)
    assert exc.value.field == "spec.containers[0].resources.limits[hygon.com/hcucores]"
    assert "vendors.overrides.hygon.computeUnits.reference" in exc.value.problem
    assert "referenceComputeUnits" in exc.value.problem


def test_hygon_default_cores_without_a_reference_is_refused_naming_the_default() -> None:
    table = load_vendor_table({"hygon": {"defaults": {"cores": 20}}})
    with pytest.raises(Denied, match=r"hygon defaults\.cores"):
        convert_pod(pod({"hygon.com/hcunum": 1}), table)


@pytest.mark.parametrize(("reference", "units"), [(120, "60"), (64, "32"), (60, "30")])
def test_hcucores_with_a_reference_reserves_its_share_only_on_cards_with_that_many_units(
    reference: int, units: str
) -> None:
    table = load_vendor_table({"hygon": {"computeUnits": {"reference": reference}}})
    req = only_request(convert_pod(pod(HCU), table))
    assert req["exactly"]["capacity"]["requests"]["cores"] == units
    guard = selectors(req)[-1]
    assert guard == (
        f'device.capacity["dra.hygon.com"].cores.compareTo(quantity("{reference}")) == 0'
    )


@pytest.mark.parametrize("bad", [0, -1, "120", 1.5, True])
def test_a_bad_compute_unit_reference_is_refused(bad: object) -> None:
    from dralab.errors import UserError

    with pytest.raises(UserError, match=r"computeUnits\.reference"):
        load_vendor_table({"hygon": {"computeUnits": {"reference": bad}}})
