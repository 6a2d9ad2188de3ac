"""Team budgets on shared capacity: pure accounting over ResourceClaims and ShareBudgets (no I/O).

A ``ShareBudget`` (``dralab.io/v1alpha1``, namespaced) caps what the claims of its namespace may
request from one DeviceClass, in memory (bytes) and cores, summed over the claims: ResourceQuota
counts devices, so many small shares of one card would otherwise escape it. Use is what the
namespace's live claims (no deletionTimestamp) request; a deleted claim gives its share back.
A request that names no memory takes a whole device, an amount unknown at admission: under a
memory budget it is refused and the message says to ask for an amount.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from dralab.errors import UserError
from dralab.model.quantity import format_binary, to_int

GROUP = "dralab.io"
VERSION = "v1alpha1"
KIND = "ShareBudget"
PLURAL = "sharebudgets"
API_VERSION = f"{GROUP}/{VERSION}"
MEMORY = "memory"
CORES = "cores"


@dataclass(frozen=True)
class Amount:
    """Memory in bytes and cores (percent of a device, summed over devices)."""

    memory: int = 0
    cores: int = 0

    def __add__(self, other: Amount) -> Amount:
        return Amount(self.memory + other.memory, self.cores + other.cores)


@dataclass(frozen=True)
class Demand:
    """What claims ask of one device class; ``unsized`` counts requests without a memory amount."""

    amount: Amount = Amount()
    unsized: int = 0
    claims: int = 0

    def __add__(self, other: Demand) -> Demand:
        return Demand(self.amount + other.amount, self.unsized + other.unsized, self.claims + other.claims)


@dataclass(frozen=True)
class Budget:
    """One ShareBudget: limits for one device class in one namespace (None: that dimension is free)."""

    namespace: str
    name: str
    device_class: str
    memory: int | None
    cores: int | None

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


def _quantity(spec: dict[str, Any], key: str, where: str) -> int | None:
    raw = spec.get(key)
    if raw is None:
        return None
    if not isinstance(raw, (str, int)) or isinstance(raw, bool):
        raise UserError(f"{where}.spec.{key}: must be a quantity such as 16Gi or 100, got {type(raw).__name__}")
    value = to_int(raw, f"{where}.spec.{key}")
    if value < 0:
        raise UserError(f"{where}.spec.{key}: must not be negative, got {raw!r}")
    return value


def parse_budget(obj: dict[str, Any]) -> Budget:
    """A Budget from a ShareBudget object; :class:`UserError` naming the bad field otherwise."""
    meta = obj.get("metadata") or {}
    where = f"ShareBudget {meta.get('namespace', '')}/{meta.get('name', '')}"
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        raise UserError(f"{where}: spec is missing; give spec.deviceClassName and spec.memory and/or spec.cores")
    device_class = spec.get("deviceClassName")
    if not isinstance(device_class, str) or not device_class:
        raise UserError(f"{where}.spec.deviceClassName: required, the DeviceClass the budget applies to")
    memory, cores = _quantity(spec, MEMORY, where), _quantity(spec, CORES, where)
    if memory is None and cores is None:
        raise UserError(f"{where}.spec: give memory and/or cores; a budget without either limits nothing")
    return Budget(str(meta.get("namespace", "")), str(meta.get("name", "")), device_class, memory, cores)


def _allocated_subrequests(claim: dict[str, Any]) -> dict[str, str]:
    """Request name -> the subrequest its allocation chose (results name ``<request>/<subrequest>``)."""
    allocation = (claim.get("status") or {}).get("allocation") if isinstance(claim.get("status"), dict) else None
    devices = allocation.get("devices") if isinstance(allocation, dict) else None
    results = devices.get("results") if isinstance(devices, dict) else None
    chosen: dict[str, str] = {}
    for result in results if isinstance(results, list) else ():
        ref = result.get("request") if isinstance(result, dict) else None
        if isinstance(ref, str) and "/" in ref:
            request, _, sub = ref.partition("/")
            chosen.setdefault(request, sub)
    return chosen


def _alternatives(claim: dict[str, Any]) -> Iterable[list[dict[str, Any]]]:
    """Per request of the claim, the device blocks of which one is allocated.

    An ``exactly`` request is its one block. A ``firstAvailable`` request is every subrequest while
    it is not allocated, since admission cannot know which the scheduler will pick (the first that
    fits when the pod is scheduled); once the claim's status names the allocated subrequest
    (``<request>/<subrequest>``), only that one.
    """
    spec = claim.get("spec")
    devices = spec.get("devices") if isinstance(spec, dict) else None
    requests = devices.get("requests") if isinstance(devices, dict) else None
    chosen: dict[str, str] | None = None
    for request in requests if isinstance(requests, list) else ():
        if not isinstance(request, dict):
            continue
        if isinstance(request.get("exactly"), dict):
            yield [request["exactly"]]
            continue
        subs = request.get("firstAvailable")
        subs = [sub for sub in subs if isinstance(sub, dict)] if isinstance(subs, list) else []
        if chosen is None:
            chosen = _allocated_subrequests(claim)
        picked = [sub for sub in subs if sub.get("name") == chosen.get(str(request.get("name")))]
        if picked or subs:
            yield picked[:1] or subs


def claim_classes(claim: dict[str, Any]) -> set[str]:
    """The device classes a claim requests from (the keys of :func:`claim_demand`, without its arithmetic)."""
    return {
        c for blocks in _alternatives(claim) for block in blocks if isinstance(c := block.get("deviceClassName"), str)
    }


def _block_demand(block: dict[str, Any]) -> Demand:
    count = block.get("count", 1)
    count = count if isinstance(count, int) and count > 0 else 1
    caps = ((block.get("capacity") or {}).get("requests")) or {}
    memory = caps.get(MEMORY)
    cores = caps.get(CORES)
    amount = Amount(
        memory=count * to_int(memory, "claim memory") if memory is not None else 0,
        cores=count * to_int(cores, "claim cores") if cores is not None else 0,
    )
    return Demand(amount, unsized=1 if memory is None else 0, claims=0)


def _largest(a: Demand, b: Demand) -> Demand:
    """Each dimension's larger value: what either of two alternatives may take."""
    return Demand(Amount(max(a.amount.memory, b.amount.memory), max(a.amount.cores, b.amount.cores)),
                  max(a.unsized, b.unsized), 0)


def claim_demand(claim: dict[str, Any]) -> dict[str, Demand]:
    """Device class -> what this claim requests from it (count x capacity requests).

    A ``firstAvailable`` request counts, per device class, as its largest subrequest (the larger
    memory, the larger cores, unsized when any alternative names no memory): admission cannot know
    which alternative the scheduler will allocate, so the budget holds room for the biggest. Once
    the claim is allocated, it counts as the subrequest that was allocated (see :func:`_alternatives`).
    """
    out: dict[str, Demand] = {}
    for blocks in _alternatives(claim):
        per_request: dict[str, Demand] = {}
        for block in blocks:
            device_class = block.get("deviceClassName")
            if not isinstance(device_class, str):
                continue
            demand = _block_demand(block)
            seen = per_request.get(device_class)
            per_request[device_class] = demand if seen is None else _largest(seen, demand)
        for device_class, demand in per_request.items():
            out[device_class] = out.get(device_class, Demand()) + demand
    return {k: Demand(v.amount, v.unsized, 1) for k, v in out.items()}


def is_live(claim: dict[str, Any]) -> bool:
    """A claim that still holds its share (being deleted gives it back)."""
    return not (claim.get("metadata") or {}).get("deletionTimestamp")


def namespace_use(claims: Iterable[dict[str, Any]], device_class: str) -> Demand:
    """What the live claims (of one namespace) request from ``device_class``."""
    total = Demand()
    for claim in claims:
        if is_live(claim):
            total = total + claim_demand(claim).get(device_class, Demand())
    return total


def refusal(budget: Budget, used: Demand, request: Demand) -> str | None:
    """Why ``request`` on top of ``used`` breaks ``budget`` (budget, use and request named), or None.

    The text follows ``ShareBudget <namespace>/<name>: `` in the denial the webhook returns.
    """
    problems = []
    if budget.memory is not None and request.unsized:
        problems.append(
            f"a request without a memory amount takes a whole device, which a memory budget cannot count; "
            f"set the memory amount (e.g. nvidia.com/gpumem, huawei.com/<chip>-memory) "
            f"[memory budget {format_binary(budget.memory)}, in use {format_binary(used.amount.memory)}]"
        )
    elif budget.memory is not None and used.amount.memory + request.amount.memory > budget.memory:
        problems.append(
            f"memory budget {format_binary(budget.memory)}, in use {format_binary(used.amount.memory)}, "
            f"this pod requests {format_binary(request.amount.memory)} "
            f"(would be {format_binary(used.amount.memory + request.amount.memory)})"
        )
    if budget.cores is not None and used.amount.cores + request.amount.cores > budget.cores:
        problems.append(
            f"cores budget {budget.cores}, in use {used.amount.cores}, this pod requests {request.amount.cores} "
            f"(would be {used.amount.cores + request.amount.cores})"
        )
    if not problems:
        return None
    return (
        f"over budget for DeviceClass {budget.device_class}: {'; '.join(problems)}. "
        "Lower the request, delete pods of this namespace that use the class, or raise the budget"
    )


def overshoot(budget: Budget, used: Demand) -> Amount:
    """How far ``used`` is past ``budget`` (zero in each dimension that is within it)."""
    memory = max(0, used.amount.memory - budget.memory) if budget.memory is not None else 0
    cores = max(0, used.amount.cores - budget.cores) if budget.cores is not None else 0
    return Amount(memory, cores)


def status_of(budget: Budget, used: Demand) -> dict[str, Any]:
    """The ShareBudget status for ``used``: use in both dimensions, claim count, an Overshoot condition."""
    over = overshoot(budget, used)
    exceeded = over.memory > 0 or over.cores > 0
    return {
        "used": {MEMORY: format_binary(used.amount.memory), CORES: str(used.amount.cores)},
        "claims": used.claims,
        "unsizedClaims": used.unsized,
        "overshoot": {MEMORY: format_binary(over.memory), CORES: str(over.cores)},
        "conditions": [
            {
                "type": "Overshoot",
                "status": "True" if exceeded else "False",
                "reason": "UseOverBudget" if exceeded else "WithinBudget",
                "message": (
                    f"claims request more than the budget: memory +{format_binary(over.memory)}, cores +{over.cores}"
                    if exceeded
                    else "use within the budget"
                ),
            }
        ],
    }


def crd() -> dict[str, Any]:
    """The ShareBudget CustomResourceDefinition: validation, a status subresource, printer columns."""
    quantity = {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "x-kubernetes-int-or-string": True,
        "pattern": r"^[0-9]+(\.[0-9]+)?([eE][0-9]+|[numkMGTPE]|[KMGTPE]i)?$",
    }
    status_amount = {"type": "object", "properties": {MEMORY: {"type": "string"}, CORES: {"type": "string"}}}
    schema = {
        "type": "object",
        "required": ["spec"],
        "properties": {
            "spec": {
                "type": "object",
                "required": ["deviceClassName"],
                "x-kubernetes-validations": [
                    {"rule": "has(self.memory) || has(self.cores)", "message": "give memory and/or cores"}
                ],
                "properties": {
                    "deviceClassName": {"type": "string", "minLength": 1, "maxLength": 253,
                                        "description": "The DeviceClass whose claims the budget caps."},
                    MEMORY: {**quantity, "description": "Sum of memory the namespace's claims may request."},
                    CORES: {**quantity, "description": "Sum of cores (percent of a device) they may request."},
                },
            },
            "status": {
                "type": "object",
                "properties": {
                    "used": status_amount,
                    "overshoot": status_amount,
                    "claims": {"type": "integer"},
                    "unsizedClaims": {"type": "integer"},
                    "observedGeneration": {"type": "integer"},
                    "conditions": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["type", "status"],
                            "properties": {k: {"type": "string"} for k in ("type", "status", "reason", "message")},
                        },
                    },
                },
            },
        },
    }
    columns = [
        {"name": "Class", "type": "string", "jsonPath": ".spec.deviceClassName"},
        {"name": "Memory", "type": "string", "jsonPath": ".spec.memory"},
        {"name": "Used-Memory", "type": "string", "jsonPath": ".status.used.memory"},
        {"name": "Cores", "type": "string", "jsonPath": ".spec.cores"},
        {"name": "Used-Cores", "type": "string", "jsonPath": ".status.used.cores"},
        {"name": "Claims", "type": "integer", "jsonPath": ".status.claims"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{GROUP}", "labels": {"app.kubernetes.io/managed-by": "dralab"}},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": PLURAL, "singular": "sharebudget", "kind": KIND, "shortNames": ["sb"]},
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema},
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": columns,
                }
            ],
        },
    }
