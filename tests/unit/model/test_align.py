"""dralab.io/align: a multi-device request gets a matchAttribute constraint on the PCIe root or NUMA node."""

from __future__ import annotations

import pytest

from dralab.model.convert import ANN_ALIGN, convert_pod
from dralab.model.denials import Denied
from dralab.model.vendors import load_vendor_table

TABLE = load_vendor_table()


def _pod(count: int, align: object) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "annotations": {ANN_ALIGN: align}},
        "spec": {"containers": [{"name": "app", "resources": {"limits": {
            "nvidia.com/gpu": count, "nvidia.com/gpumem": "1000"}}}]},
    }


def _devices(conv) -> dict:
    [claim] = [o for o in conv.objects if o["kind"] == "ResourceClaim"]
    return claim["spec"]["devices"]


def test_pcie_root_alignment_uses_the_standard_attribute() -> None:
    devices = _devices(convert_pod(_pod(2, "pcieRoot"), TABLE))
    assert devices["constraints"] == [{"requests": ["gpu"], "matchAttribute": "resource.kubernetes.io/pcieRoot"}]


def test_numa_alignment_uses_the_drivers_attribute() -> None:
    devices = _devices(convert_pod(_pod(4, "numaNode"), TABLE))
    assert devices["constraints"] == [{"requests": ["gpu"], "matchAttribute": "hami-core-gpu.project-hami.io/numaNode"}]


def test_one_device_needs_no_constraint() -> None:
    assert "constraints" not in _devices(convert_pod(_pod(1, "pcieRoot"), TABLE))


@pytest.mark.parametrize("bad", ["pcie", "PCIeRoot", "", ["pcieRoot"], 3])
def test_an_unknown_alignment_is_denied_naming_the_choices(bad: object) -> None:
    with pytest.raises(Denied) as exc:
        convert_pod(_pod(2, bad), TABLE)
    assert exc.value.field == f"metadata.annotations[{ANN_ALIGN}]"
    assert "pcieRoot, numaNode" in exc.value.problem


def test_templates_with_and_without_alignment_get_different_names() -> None:
    from dralab.model.convert import Converter

    conv = Converter(TABLE, lifecycle="template")
    aligned = conv.convert(_pod(2, "pcieRoot"))
    plain_pod = _pod(2, "pcieRoot")
    del plain_pod["metadata"]["annotations"][ANN_ALIGN]
    plain = conv.convert(plain_pod)
    [t1] = [o for o in aligned.objects if o["kind"] == "ResourceClaimTemplate"]
    [t2] = [o for o in plain.objects if o["kind"] == "ResourceClaimTemplate"]
    assert t1["metadata"]["name"] != t2["metadata"]["name"]
    assert t1["spec"]["spec"]["devices"]["constraints"][0]["matchAttribute"] == "resource.kubernetes.io/pcieRoot"
    assert "constraints" not in t2["spec"]["spec"]["devices"]
