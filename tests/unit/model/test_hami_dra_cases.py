"""HAMi-DRA's own webhook test cases, replayed through dralab's converter (fixtures/hami_dra_cases.yaml).

Each case states its input, what HAMi-DRA does with it, and the facts dralab produces; where the two
differ, the case says how and why (``difference``). Pods go through :class:`Converter`, Volcano Jobs
through :func:`convert_job`; selectors are evaluated with CEL against device attribute maps.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from dralab.model.convert import DRA_LABEL, Converter
from dralab.model.denials import Denied
from dralab.model.vendors import Vendor, VendorTable, load_vendor_table
from dralab.model.volcano import API_VERSION as VOLCANO_API_VERSION
from dralab.model.volcano import KIND as VOLCANO_KIND
from dralab.model.volcano import convert_job, template_converter

from .cel_eval import evaluate

CASES_FILE = Path(__file__).parent / "fixtures" / "hami_dra_cases.yaml"
CASES: list[dict[str, Any]] = yaml.safe_load(CASES_FILE.read_text())
DEFAULT_TABLE = load_vendor_table()

CASE_KEYS = {"id", "source", "pod", "job", "config", "lifecycle", "hami_dra_outcome", "expect", "difference"}
EXPECT_KEYS = {
    "claims", "object_kind", "names", "name_prefix", "name_max_length", "name_excludes", "refs", "labels",
    "object_labels", "remaining", "requests", "denied", "denied_field", "unchanged",
}
REQUEST_KEYS = {
    "count", "memory", "cores", "request_name", "device_class", "selectors", "selector_contains", "matches",
    "excludes",
}
POD_KEYS = {"namespace", "name", "annotations", "schedulerName", "containers", "initContainers"}
JOB_KEYS = {"namespace", "name", "schedulerName", "tasks"}
CONTAINER_KEYS = {"name", "limits", "requests"}


# -- building the input ---------------------------------------------------------------------------


def _container(spec: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"name": spec.get("name", "app"), "image": "busybox"}
    resources = {where: dict(spec[where]) for where in ("limits", "requests") if where in spec}
    if resources:
        out["resources"] = resources
    return out


def build_pod(spec: dict[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": spec.get("name", "test-pod"), "namespace": spec.get("namespace", "default")}
    if spec.get("annotations"):
        meta["annotations"] = dict(spec["annotations"])
    pod_spec: dict[str, Any] = {}
    if "schedulerName" in spec:
        pod_spec["schedulerName"] = spec["schedulerName"]
    for kind in ("initContainers", "containers"):
        if kind in spec:
            pod_spec[kind] = [_container(c) for c in spec[kind]]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod_spec}


def build_job(spec: dict[str, Any]) -> dict[str, Any]:
    tasks = [
        {
            "name": task["name"],
            "replicas": task.get("replicas", 1),
            "template": {"spec": {"restartPolicy": "Never", "containers": [_container(c) for c in task["containers"]]}},
        }
        for task in spec["tasks"]
    ]
    job_spec: dict[str, Any] = {"tasks": tasks}
    if "schedulerName" in spec:
        job_spec["schedulerName"] = spec["schedulerName"]
    return {
        "apiVersion": VOLCANO_API_VERSION,
        "kind": VOLCANO_KIND,
        "metadata": {"name": spec["name"], "namespace": spec.get("namespace", "default")},
        "spec": job_spec,
    }


def table_for(case: dict[str, Any]) -> VendorTable:
    config = case.get("config")
    if not config:
        return DEFAULT_TABLE
    return load_vendor_table(config.get("overrides"), config.get("enabled"))


# -- running it -----------------------------------------------------------------------------------


@dataclass
class Result:
    """What dralab did with one case's input."""

    table: VendorTable
    denied: Denied | None = None
    changed: bool = False
    objects: list[dict[str, Any]] = field(default_factory=list)
    pod_likes: list[dict[str, Any]] = field(default_factory=list)  # the converted pod, or each task template

    @property
    def outcome(self) -> dict[str, Any]:
        """In ``hami_dra_outcome``'s terms."""
        if self.denied is not None:
            return {"denied": True}
        if not self.changed:
            return {"unchanged": True}
        return {"claims": len(self.objects)}


def run(case: dict[str, Any]) -> Result:
    table = table_for(case)
    result = Result(table)
    try:
        if "job" in case:
            conv = convert_job(build_job(case["job"]), template_converter(table))
            result.changed, result.objects = conv.changed, conv.objects
            result.pod_likes = [task["template"] for task in conv.job["spec"]["tasks"]]
        else:
            converter = Converter(table, case.get("lifecycle", "claim"))
            conv = converter.convert(build_pod(case["pod"]))
            result.changed, result.objects, result.pod_likes = conv.changed, conv.objects, [conv.pod]
    except Denied as exc:
        result.denied = exc
    return result


# -- checking the facts ---------------------------------------------------------------------------


def _vendor_of(table: VendorTable, device_class: str) -> Vendor:
    (vendor,) = [v for v in table.enabled_vendors() if v.device_class == device_class]
    return vendor


def device(vendor: Vendor, given: dict[str, Any]) -> dict[str, Any]:
    """A device of ``vendor`` as its DRA driver publishes it, with ``given``'s attributes (``driver``/``type`` too)."""
    attrs = dict(given)
    driver = attrs.pop("driver", vendor.driver)
    published = {
        "type": attrs.pop("type", vendor.type_attribute),
        "uuid": "unlisted-uuid",
        vendor.type_attribute_name: "unlisted-product",
        **attrs,
    }
    return {"driver": driver, "attributes": {vendor.attribute_domain: published}}


def _expressions(request: dict[str, Any]) -> list[str]:
    return [s["cel"]["expression"] for s in request["exactly"]["selectors"]]


def _selects(expressions: list[str], dev: dict[str, Any]) -> bool:
    return all(bool(evaluate(e, {"device": dev})) for e in expressions)


def check_request(table: VendorTable, request: dict[str, Any], want: dict[str, Any], where: str) -> None:
    exactly = request["exactly"]
    capacity = (exactly.get("capacity") or {}).get("requests") or {}
    exprs = _expressions(request)
    if "count" in want:
        assert exactly["count"] == want["count"], where
    for key in ("memory", "cores"):
        if key in want:
            if want[key] is None:
                assert key not in capacity, f"{where}: unexpected {key} request {capacity.get(key)!r}"
            else:
                assert capacity.get(key) == str(want[key]), f"{where}: {key} {capacity.get(key)!r}"
    if "request_name" in want:
        assert request["name"] == want["request_name"], where
    if "device_class" in want:
        assert exactly["deviceClassName"] == want["device_class"], where
    if "selectors" in want:
        assert len(exprs) == want["selectors"], f"{where}: {exprs}"
    for text in want.get("selector_contains", []):
        assert any(text in e for e in exprs), f"{where}: no selector contains {text!r} in {exprs}"
    vendor = _vendor_of(table, exactly["deviceClassName"])
    for given in want.get("matches", []):
        assert _selects(exprs, device(vendor, given)), f"{where}: should select {given} with {exprs}"
    for given in want.get("excludes", []):
        assert not _selects(exprs, device(vendor, given)), f"{where}: should not select {given} with {exprs}"


def _containers(pod_like: dict[str, Any]) -> list[dict[str, Any]]:
    spec = pod_like.get("spec") or {}
    return [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]


def _refs(result: Result) -> list[dict[str, Any]]:
    return [ref for p in result.pod_likes for ref in ((p.get("spec") or {}).get("resourceClaims") or [])]


def check_converted(result: Result, expect: dict[str, Any]) -> None:
    assert result.changed, "expected a conversion, the input came back unchanged"
    objects = result.objects
    names = [o["metadata"]["name"] for o in objects]
    assert len(objects) == expect["claims"], f"objects created: {names}"
    if "object_kind" in expect:
        assert {o["kind"] for o in objects} == {expect["object_kind"]}
    if "names" in expect:
        assert names == expect["names"]
    for name in names:
        assert name.startswith(expect.get("name_prefix", "")), name
        assert len(name) <= expect.get("name_max_length", 63), name
        if "name_excludes" in expect:
            assert expect["name_excludes"] not in name, name
    for obj in objects:
        labels = obj["metadata"].get("labels") or {}
        for key, value in (expect.get("object_labels") or {}).items():
            assert labels.get(key) == value, f"{obj['metadata']['name']}: labels {labels}"

    refs = _refs(result)
    for ref in refs:  # every claim entry of the pod names an object the conversion creates
        target = ref.get("resourceClaimName") or ref.get("resourceClaimTemplateName")
        assert target in names, f"pod claim entry {ref} names no created object"
    if "refs" in expect:
        assert [r["name"] for r in refs] == expect["refs"]

    converted = [p for p in result.pod_likes if (p.get("spec") or {}).get("resourceClaims")]
    assert converted, "no pod (or task template) references a claim"
    for pod_like in converted:
        labels = (pod_like.get("metadata") or {}).get("labels") or {}
        for key, value in (expect.get("labels") or {}).items():
            assert labels.get(key) == value, f"labels {labels}"

    containers = {c["name"]: c for p in result.pod_likes for c in _containers(p)}
    for name, left in (expect.get("remaining") or {}).items():
        assert name in containers, f"no container {name}: {sorted(containers)}"
        resources = containers[name].get("resources") or {}
        kept = {where: resources[where] for where in ("limits", "requests") if resources.get(where)}
        assert kept == left, f"container {name} keeps {kept}"

    wanted = expect.get("requests") or []
    if wanted:
        assert len(wanted) == len(objects), "one expected request per created object"
    for index, (obj, want) in enumerate(zip(objects, wanted, strict=False)):
        spec = obj["spec"]["spec"] if obj["kind"] == "ResourceClaimTemplate" else obj["spec"]
        (request,) = spec["devices"]["requests"]
        check_request(result.table, request, want, f"object {index} ({names[index]})")


# -- the tests ------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_hami_dra_case(case: dict[str, Any]) -> None:
    expect = case["expect"]
    result = run(case)
    if "denied" in expect:
        assert result.denied is not None, f"expected a denial, got {result.outcome}"
        assert expect["denied"] in str(result.denied), str(result.denied)
        if "denied_field" in expect:
            assert result.denied.field == expect["denied_field"]
        return
    assert result.denied is None, f"unexpected denial: {result.denied}"
    if expect.get("unchanged"):
        assert not result.changed and result.objects == []
        for pod_like in result.pod_likes:
            assert DRA_LABEL not in ((pod_like.get("metadata") or {}).get("labels") or {})
            assert not (pod_like.get("spec") or {}).get("resourceClaims")
        return
    check_converted(result, expect)


def test_every_differing_outcome_names_its_difference() -> None:
    undocumented = [
        f"{c['id']}: dralab {run(c).outcome}, HAMi-DRA {c['hami_dra_outcome']}"
        for c in CASES
        if run(c).outcome != c["hami_dra_outcome"] and "difference" not in c
    ]
    assert not undocumented, "cases whose outcome differs from HAMi-DRA's without a difference:\n" + "\n".join(
        undocumented
    )
    for case in CASES:
        if "difference" in case:
            diff = case["difference"]
            assert isinstance(diff, dict) and set(diff) == {"hami_dra", "why"}, case["id"]
            for key in ("hami_dra", "why"):
                assert isinstance(diff[key], str) and diff[key].strip(), f"{case['id']}: empty difference.{key}"


def test_case_ids_are_unique() -> None:
    ids = [c["id"] for c in CASES]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    assert not repeated, f"repeated case ids: {repeated}"


def test_cases_are_well_formed() -> None:
    """Unknown keys would be facts nobody asserts: every key must be one the test reads."""
    outcomes = ({"denied": True}, {"unchanged": True})
    for case in CASES:
        cid = case.get("id", "?")
        assert set(case) <= CASE_KEYS, f"{cid}: unknown keys {set(case) - CASE_KEYS}"
        assert isinstance(case.get("source"), str) and case["source"].strip(), f"{cid}: no source"
        assert ("pod" in case) != ("job" in case), f"{cid}: needs exactly one of pod or job"
        hami = case["hami_dra_outcome"]
        assert hami in outcomes or (set(hami) == {"claims"} and hami["claims"] >= 1), f"{cid}: {hami}"
        expect = case["expect"]
        assert set(expect) <= EXPECT_KEYS, f"{cid}: unknown expect keys {set(expect) - EXPECT_KEYS}"
        kinds = [k for k in ("claims", "denied", "unchanged") if k in expect]
        assert len(kinds) == 1, f"{cid}: expect needs exactly one of claims, denied, unchanged"
        for want in expect.get("requests") or []:
            assert set(want) <= REQUEST_KEYS, f"{cid}: unknown request keys {set(want) - REQUEST_KEYS}"
        if "pod" in case:
            assert set(case["pod"]) <= POD_KEYS, f"{cid}: unknown pod keys"
            containers = [*(case["pod"].get("containers") or []), *(case["pod"].get("initContainers") or [])]
        else:
            assert set(case["job"]) <= JOB_KEYS, f"{cid}: unknown job keys"
            containers = [c for task in case["job"]["tasks"] for c in task["containers"]]
        for container in containers:
            assert set(container) <= CONTAINER_KEYS, f"{cid}: unknown container keys {set(container)}"
