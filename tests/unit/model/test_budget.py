"""ShareBudget accounting: demand of claims, use of a namespace, refusals, status and the CRD."""

from __future__ import annotations

from typing import Any

import pytest

from dralab.errors import UserError
from dralab.model import budget as model

GPU = "hami-core-gpu.project-hami.io"
GI = 2**30


def claim(memory: int | None, cores: int | None, *, count: int = 1, cls: str = GPU, deleting: bool = False) -> dict:
    caps: dict[str, Any] = {}
    if memory is not None:
        caps["memory"] = str(memory)
    if cores is not None:
        caps["cores"] = str(cores)
    exactly: dict[str, Any] = {"deviceClassName": cls, "allocationMode": "ExactCount", "count": count}
    if caps:
        exactly["capacity"] = {"requests": caps}
    meta: dict[str, Any] = {"name": "c", "namespace": "team-a"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}


def budget_obj(**spec: Any) -> dict:
    return {"apiVersion": model.API_VERSION, "kind": model.KIND,
            "metadata": {"name": "gpus", "namespace": "team-a"}, "spec": spec}


def test_claim_demand_multiplies_by_count_and_reads_quantities() -> None:
    d = model.claim_demand(claim(4 * GI, 30, count=2))[GPU]
    assert d.amount == model.Amount(8 * GI, 60) and d.claims == 1 and d.unsized == 0


def test_claim_classes_are_the_keys_of_claim_demand() -> None:
    odd = claim(GI, 10)
    odd["spec"]["devices"]["requests"] += [
        {"name": "alt", "firstAvailable": [{"deviceClassName": "other.example.com"}, "junk"]},
        {"name": "bad", "exactly": {"deviceClassName": 7}},
        "junk",
    ]
    for doc in (claim(GI, 10), claim(None, None, cls="x.example.com"), odd, {"spec": None}, {}):
        assert model.claim_classes(doc) == set(model.claim_demand(doc))
    assert model.claim_classes(odd) == {GPU, "other.example.com"}


def test_claim_without_memory_is_unsized() -> None:
    d = model.claim_demand(claim(None, 10))[GPU]
    assert d.unsized == 1 and d.amount.memory == 0


def test_use_ignores_deleting_claims_and_other_classes() -> None:
    claims = [claim(4 * GI, 20), claim(2 * GI, 10), claim(8 * GI, 50, deleting=True), claim(GI, 5, cls="other")]
    used = model.namespace_use(claims, GPU)
    assert used.amount == model.Amount(6 * GI, 30) and used.claims == 2


def test_refusal_names_budget_use_and_request() -> None:
    b = model.parse_budget(budget_obj(deviceClassName=GPU, memory="12Gi", cores=100))
    used = model.namespace_use([claim(8 * GI, 40)], GPU)
    why = model.refusal(b, used, model.claim_demand(claim(6 * GI, 20))[GPU])
    assert why is not None
    assert "memory budget 12Gi, in use 8Gi, this pod requests 6Gi (would be 14Gi)" in why
    assert "cores budget" not in why


def test_refusal_in_both_dimensions_and_exact_fit_allowed() -> None:
    b = model.parse_budget(budget_obj(deviceClassName=GPU, memory="12Gi", cores="50"))
    used = model.namespace_use([claim(8 * GI, 40)], GPU)
    assert model.refusal(b, used, model.claim_demand(claim(4 * GI, 10))[GPU]) is None  # exactly the budget
    why = model.refusal(b, used, model.claim_demand(claim(5 * GI, 11))[GPU])
    assert why and "memory budget 12Gi" in why and "cores budget 50, in use 40, this pod requests 11" in why


def test_memory_budget_refuses_a_request_without_memory() -> None:
    b = model.parse_budget(budget_obj(deviceClassName=GPU, memory="12Gi"))
    why = model.refusal(b, model.Demand(), model.claim_demand(claim(None, 0))[GPU])
    assert why and "without a memory amount" in why


def test_cores_only_budget_ignores_memory() -> None:
    b = model.parse_budget(budget_obj(deviceClassName=GPU, cores=50))
    assert model.refusal(b, model.Demand(), model.claim_demand(claim(None, 50))[GPU]) is None


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ({"memory": "1Gi"}, "deviceClassName"),
        ({"deviceClassName": GPU}, "give memory and/or cores"),
        ({"deviceClassName": GPU, "memory": "lots"}, "not a valid quantity"),
        ({"deviceClassName": GPU, "cores": "-3"}, "must not be negative"),
        ({"deviceClassName": GPU, "cores": "1.5"}, "whole number"),
    ],
)
def test_bad_budgets_name_the_field(spec: dict, fragment: str) -> None:
    with pytest.raises(UserError, match=fragment):
        model.parse_budget(budget_obj(**spec))


def test_status_flags_overshoot() -> None:
    b = model.parse_budget(budget_obj(deviceClassName=GPU, memory="8Gi", cores=100))
    status = model.status_of(b, model.namespace_use([claim(6 * GI, 10), claim(4 * GI, 10)], GPU))
    assert status["used"] == {"memory": "10Gi", "cores": "20"} and status["claims"] == 2
    assert status["overshoot"] == {"memory": "2Gi", "cores": "0"}
    assert status["conditions"][0]["status"] == "True"
    within = model.status_of(b, model.namespace_use([claim(6 * GI, 10)], GPU))
    assert within["conditions"][0]["status"] == "False" and within["overshoot"]["memory"] == "0"


def test_crd_is_namespaced_with_status_and_columns() -> None:
    crd = model.crd()
    version = crd["spec"]["versions"][0]
    assert crd["metadata"]["name"] == "sharebudgets.dralab.io" and crd["spec"]["scope"] == "Namespaced"
    assert version["subresources"] == {"status": {}}
    names = [c["name"] for c in version["additionalPrinterColumns"]]
    assert {"Class", "Memory", "Used-Memory", "Cores", "Used-Cores"} <= set(names)
    assert version["schema"]["openAPIV3Schema"]["properties"]["spec"]["required"] == ["deviceClassName"]


def test_the_charts_crd_is_the_models() -> None:
    from pathlib import Path

    import yaml

    path = Path(__file__).parents[3] / "charts" / "dralab" / "crds" / "sharebudgets.dralab.io.yaml"
    assert yaml.safe_load(path.read_text()) == model.crd(), f"regenerate {path} from dralab.model.budget.crd()"
