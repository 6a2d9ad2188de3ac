"""Device accounting: what each allocation result consumes, decided once for the monitor, the harness and the bench."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from dralab.errors import UserError
from dralab.model import accounting

DRIVER = "d.example"
GI = 2**30
TOTAL = {"memory": Fraction(21525 * 2**20), "cores": Fraction(100)}


def slice_(pool: str = "n1", generation: int = 1, devices: tuple[str, ...] = ("dev-0", "dev-1")) -> dict[str, Any]:
    return {"spec": {"driver": DRIVER, "nodeName": pool, "pool": {"name": pool, "generation": generation},
                     "devices": [{"name": d, "capacity": {"memory": {"value": "21525Mi"}, "cores": {"value": "100"}}}
                                 for d in devices]}}  # fmt: skip


def result(device: str, consumed: dict[str, str] | None = None, request: str = "npu", **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"request": request, "driver": DRIVER, "pool": "n1", "device": device, **extra}
    if consumed is not None:
        out["consumedCapacity"] = consumed
    return out


def claim(name: str, *results: dict[str, Any], ns: str = "a") -> dict[str, Any]:
    return {"metadata": {"namespace": ns, "name": name},
            "status": {"allocation": {"devices": {"results": list(results)}}}}  # fmt: skip


def key(device: str) -> accounting.DeviceKey:
    return (DRIVER, "n1", device)


def test_consumed_capacity_is_summed_per_device() -> None:
    claims = [claim("c1", result("dev-0", {"memory": "8Gi", "cores": "50"})),
              claim("c2", result("dev-0", {"memory": "8589934592", "cores": "30"}), ns="b")]
    assert accounting.consumed(claims, [slice_()]) == {key("dev-0"): {"memory": Fraction(16 * GI), "cores": 80}}


@pytest.mark.parametrize("consumed", [None, {}], ids=["absent", "empty"])
def test_an_exclusive_result_takes_the_whole_device(consumed: dict[str, str] | None) -> None:
    uses = accounting.uses([claim("c", result("dev-1", consumed))], accounting.device_capacities([slice_()]))
    assert [(u.device, u.exclusive, u.consumed) for u in uses] == [(key("dev-1"), True, TOTAL)]


def test_an_exclusive_result_on_a_device_no_slice_publishes_is_marked_unknown() -> None:
    (use,) = accounting.uses([claim("c", result("gone"))], accounting.device_capacities([slice_()]))
    assert use.exclusive and not use.known and use.consumed == {}


def test_a_multi_device_claim_consumes_on_each_of_its_devices() -> None:
    both = claim("c", result("dev-0", {"memory": "4Gi", "cores": "25"}), result("dev-1"))
    got = accounting.consumed([both], [slice_()])
    assert got == {key("dev-0"): {"memory": Fraction(4 * GI), "cores": 25}, key("dev-1"): TOTAL}
    assert [u.claim for u in accounting.uses([both], {})] == ["c", "c"]


def test_a_first_available_result_counts_like_any_other() -> None:
    sub = claim("c", result("dev-0", {"memory": "2Gi", "cores": "10"}, request="npu/small"))
    (use,) = accounting.uses([sub], accounting.device_capacities([slice_()]))
    assert use.request == "npu/small"
    assert use.consumed == {"memory": Fraction(2 * GI), "cores": 10}


def test_an_admin_access_result_consumes_nothing() -> None:
    claims = [claim("watch", result("dev-0", adminAccess=True)),
              claim("watch-shared", result("dev-1", {"memory": "1Gi", "cores": "1"}, adminAccess=True))]
    uses = accounting.uses(claims, accounting.device_capacities([slice_()]))
    assert [(u.admin, u.exclusive, u.consumed) for u in uses] == [(True, False, {}), (True, False, {})]
    assert accounting.consumed(claims, [slice_()]) == {key("dev-0"): {}, key("dev-1"): {}}


def test_unallocated_claims_consume_nothing() -> None:
    assert accounting.consumed([{"metadata": {"namespace": "a", "name": "pending"}}], [slice_()]) == {}


def test_only_the_newest_pool_generation_sizes_devices() -> None:
    caps = accounting.device_capacities([slice_(generation=1), slice_(generation=2, devices=("dev-9",))])
    assert list(caps) == [key("dev-9")]


def test_overcommit_compares_published_capacities_only() -> None:
    caps = accounting.device_capacities([slice_()])
    fits = {key("dev-0"): {"cores": Fraction(100), "other": Fraction(5)}}
    assert accounting.overcommitted(caps, fits) == []
    assert accounting.overcommitted(caps, {key("dev-0"): {"cores": Fraction(101)}}) == [key("dev-0")]
    assert accounting.overcommitted(caps, {key("gone"): {"cores": Fraction(500)}}) == []


def test_a_bad_quantity_names_the_claim_and_device() -> None:
    with pytest.raises(UserError, match=r"claim a/c device d\.example/n1/dev-0 consumedCapacity\.memory"):
        accounting.consumed([claim("c", result("dev-0", {"memory": "lots"}))], [slice_()])


def test_plain_numbers_for_json() -> None:
    assert accounting.plain(Fraction(8)) == 8 and isinstance(accounting.plain(Fraction(8)), int)
    assert accounting.plain(Fraction(1, 2)) == 0.5
