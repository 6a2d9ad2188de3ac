"""ShareBudget accounting of ``firstAvailable`` requests: the largest alternative, or the allocated one."""

from __future__ import annotations

from typing import Any

from dralab.model import budget as model
from dralab.model.convert import ANN_PREFER_TYPES, convert_pod
from dralab.model.vendors import load_vendor_table

GPU = "hami-core-gpu.project-hami.io"
OTHER = "other.example.com"
GI = 2**30


def sub(name: str, memory: int | None, cores: int | None, *, count: int = 1, cls: str = GPU) -> dict[str, Any]:
    caps: dict[str, str] = {}
    if memory is not None:
        caps["memory"] = str(memory)
    if cores is not None:
        caps["cores"] = str(cores)
    out: dict[str, Any] = {"name": name, "deviceClassName": cls, "allocationMode": "ExactCount", "count": count}
    if caps:
        out["capacity"] = {"requests": caps}
    return out


def claim(*subs: dict[str, Any], allocated: str | None = None, extra: list | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "metadata": {"name": "c", "namespace": "team-a"},
        "spec": {"devices": {"requests": [{"name": "gpu", "firstAvailable": list(subs)}, *(extra or [])]}},
    }
    if allocated is not None:
        result = {"request": allocated, "driver": GPU, "pool": "node", "device": "gpu-1"}
        doc["status"] = {"allocation": {"devices": {"results": [result]}}}
    return doc


def test_an_unallocated_request_counts_its_largest_alternative_in_each_dimension() -> None:
    d = model.claim_demand(claim(sub("a100", 8 * GI, 20), sub("h100", 4 * GI, 50, count=2)))
    assert d == {GPU: model.Demand(model.Amount(8 * GI, 100), unsized=0, claims=1)}


def test_an_allocated_request_counts_the_allocated_subrequest() -> None:
    subs = (sub("a100", 8 * GI, 20), sub("h100", 4 * GI, 50))
    assert model.claim_demand(claim(*subs, allocated="gpu/h100"))[GPU].amount == model.Amount(4 * GI, 50)
    assert model.claim_demand(claim(*subs, allocated="gpu/a100"))[GPU].amount == model.Amount(8 * GI, 20)


def test_an_allocation_naming_no_listed_subrequest_counts_the_largest() -> None:
    subs = (sub("a100", 8 * GI, 20), sub("h100", 4 * GI, 50))
    for allocated in ("gpu/l4", "gpu", "other/h100"):
        assert model.claim_demand(claim(*subs, allocated=allocated))[GPU].amount == model.Amount(8 * GI, 50)


def test_an_alternative_without_memory_makes_the_request_unsized_until_another_is_allocated() -> None:
    subs = (sub("a100", 8 * GI, 20), sub("any", None, 20))
    assert model.claim_demand(claim(*subs))[GPU].unsized == 1
    allocated = model.claim_demand(claim(*subs, allocated="gpu/a100"))[GPU]
    assert allocated.unsized == 0 and allocated.amount == model.Amount(8 * GI, 20)


def test_alternatives_of_other_classes_count_toward_their_own_class() -> None:
    subs = (sub("a100", 8 * GI, 20), sub("npu", 2 * GI, 10, cls=OTHER))
    d = model.claim_demand(claim(*subs))
    assert d[GPU].amount == model.Amount(8 * GI, 20) and d[OTHER].amount == model.Amount(2 * GI, 10)
    assert model.claim_classes(claim(*subs)) == {GPU, OTHER}
    chosen = claim(*subs, allocated="gpu/npu")
    assert set(model.claim_demand(chosen)) == model.claim_classes(chosen) == {OTHER}


def test_requests_of_one_claim_add_up() -> None:
    exact = {"name": "more", "exactly": {"deviceClassName": GPU, "capacity": {"requests": {"memory": str(GI)}}}}
    d = model.claim_demand(claim(sub("a", 8 * GI, 20), sub("b", 4 * GI, 30), extra=[exact, "junk"]))[GPU]
    assert d.amount == model.Amount(9 * GI, 30) and d.claims == 1


def test_junk_alternatives_and_results_are_skipped() -> None:
    doc = claim(sub("a", GI, 5), "junk", allocated="gpu/a")  # type: ignore[arg-type]
    doc["status"]["allocation"]["devices"]["results"].insert(0, "junk")
    assert model.claim_demand(doc)[GPU].amount == model.Amount(GI, 5)
    assert model.claim_demand(claim("junk")) == {}  # type: ignore[arg-type]
    assert model.claim_demand({"spec": {"devices": {"requests": [{"name": "x", "firstAvailable": None}]}}}) == {}


def test_a_converted_prefer_types_claim_counts_once_in_namespace_use() -> None:
    pod = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "team-a", "annotations": {ANN_PREFER_TYPES: "a100,h100,l4"}},
        "spec": {"containers": [{"name": "app", "resources": {"limits": {
            "nvidia.com/gpu": 1, "nvidia.com/gpumem": "4096", "nvidia.com/gpucores": "25"}}}]},
    }  # fmt: skip
    (doc,) = convert_pod(pod, load_vendor_table()).objects
    used = model.namespace_use([doc, doc], GPU)
    assert used.amount == model.Amount(2 * 4 * GI, 50) and used.claims == 2 and used.unsized == 0
