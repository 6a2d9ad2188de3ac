"""Who holds how much of which device: computed from ResourceSlices and ResourceClaims, as a pure function.

Devices and their capacity come from the slices (the highest pool generation only); allocations
come from each claim's ``status.allocation.devices.results`` with the ``consumedCapacity`` the
scheduler recorded, read by ``dralab.model.accounting`` (an exclusive result, without consumed capacity,
takes the whole device; an admin-access result takes nothing). The sharers of an allocation are the
pods in ``reservedFor``. What the node driver applied to an allocation (its quota and enforcement) is
the ``data`` of the claim's ``status.devices`` entry for that device and shareID, written by the driver
after Prepare. Whether a node's driver enforces the shares at all is the ``dralab.io/enforcement``
label of its slices (``required`` or ``none``, the driver's ``--enforcement``): a node without it is
``unknown``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from dralab.model.accounting import claim_uses, current_slices, device_capacities

__all__ = ["Allocation", "Device", "Share", "compute", "current_slices"]

MEMORY = "memory"
CORES = "cores"
CONTAINER_ANNOTATION = "dralab.io/container"  # what the webhook writes on a claim (dralab.model.convert.ANN_CONTAINER)
ENFORCEMENT_LABEL = "dralab.io/enforcement"  # what the node driver writes on its slices (dralab.driver.slices)
ENFORCEMENT_NONE = "none"  # the driver prepares claims without the enforcement library (an operator's choice)
ENFORCEMENT_UNKNOWN = "unknown"  # slices without the label: a driver older than it, or not dralab's


@dataclass
class Device:
    """One published device, with what is allocated on it."""

    driver: str
    pool: str
    name: str
    node: str
    memory_total: int = 0
    cores_total: int = 0
    memory_used: int = 0
    cores_used: int = 0
    shares: int = 0
    sharers: list[str] = field(default_factory=list)  # "<namespace>/<pod>" per allocation, or the claim
    uuid: str = ""  # the ``uuid`` attribute ("" when the slice publishes none)
    index: str = ""  # the ``index`` attribute, as text
    product: str = ""  # the ``productName`` attribute, else ``type``

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.driver, self.pool, self.name)

    @property
    def memory_free(self) -> int:
        return max(self.memory_total - self.memory_used, 0)

    @property
    def cores_free(self) -> int:
        return max(self.cores_total - self.cores_used, 0)


@dataclass
class Share:
    """One allocation result of one claim on one device."""

    namespace: str
    claim: str
    device: tuple[str, str, str]
    memory: int
    cores: int
    pods: list[str]
    container: str = ""  # the claim's ``dralab.io/container`` annotation ("" for claims from templates)
    share_id: str = ""
    applied: dict[str, Any] | None = None  # the driver's status.devices data (None: not prepared or not reported)


@dataclass
class Allocation:
    """The whole picture: devices, shares, and sums per pod and per namespace."""

    devices: dict[tuple[str, str, str], Device] = field(default_factory=dict)
    shares: list[Share] = field(default_factory=list)
    unknown_devices: int = 0  # results naming a device no slice publishes (a slice was removed)
    enforcement: dict[tuple[str, str], str] = field(default_factory=dict)  # (node, driver) -> mode

    def unenforced(self) -> list[tuple[str, str]]:
        """(node, driver) of every driver that prepares claims without enforcing their quotas."""
        return sorted(k for k, mode in self.enforcement.items() if mode == ENFORCEMENT_NONE)

    def per_pod(self) -> dict[tuple[str, str], tuple[int, int]]:
        """(namespace, pod) -> (memory bytes, cores) summed over the claims reserved for the pod."""
        out: dict[tuple[str, str], tuple[int, int]] = {}
        for share in self.shares:
            for pod in share.pods:
                mem, cores = out.get((share.namespace, pod), (0, 0))
                out[(share.namespace, pod)] = (mem + share.memory, cores + share.cores)
        return out

    def per_namespace(self) -> dict[str, tuple[int, int]]:
        """namespace -> (memory bytes, cores) allocated to its claims (a shared claim counts once)."""
        out: dict[str, tuple[int, int]] = {}
        for share in self.shares:
            mem, cores = out.get(share.namespace, (0, 0))
            out[share.namespace] = (mem + share.memory, cores + share.cores)
        return out


def _attribute(attributes: dict[str, Any], name: str) -> str:
    """An attribute's value as text, whichever one-of field (string, int, bool, version) holds it."""
    entry = attributes.get(name)
    if isinstance(entry, dict):
        for kind in ("string", "int", "bool", "version"):
            if kind in entry and entry[kind] is not None:
                value = entry[kind]
                return str(value).lower() if isinstance(value, bool) else str(value)
        return ""
    return "" if entry is None else str(entry)


def slice_enforcement(slice_obj: dict[str, Any]) -> str:
    """The enforcement mode a slice's driver published (its label), ``unknown`` without one."""
    labels = (slice_obj.get("metadata") or {}).get("labels") or {}
    return str(labels.get(ENFORCEMENT_LABEL) or ENFORCEMENT_UNKNOWN)


def compute(
    slices: Iterable[dict[str, Any]], claims: Iterable[dict[str, Any]], namespace: str | None = None
) -> Allocation:
    """The allocation picture; ``namespace`` keeps only that namespace's claims."""
    out = Allocation()
    current = current_slices(slices)
    capacities = device_capacities(current)
    for s in current:
        spec = s.get("spec") or {}
        node = spec.get("nodeName") or ""
        pool = (spec.get("pool") or {}).get("name", "")
        where = (node, spec.get("driver", ""))
        if node and out.enforcement.get(where) != ENFORCEMENT_NONE:  # disagreeing slices: the unenforced one wins
            out.enforcement[where] = slice_enforcement(s)
        for dev in spec.get("devices") or []:
            attributes = dev.get("attributes") or {}
            device = Device(
                driver=spec.get("driver", ""),
                pool=pool,
                name=dev.get("name", ""),
                node=node,
                uuid=_attribute(attributes, "uuid"),
                index=_attribute(attributes, "index"),
                product=_attribute(attributes, "productName") or _attribute(attributes, "type"),
            )
            capacity = capacities.get(device.key) or {}
            device.memory_total = int(capacity.get(MEMORY, 0))
            device.cores_total = int(capacity.get(CORES, 0))
            out.devices[device.key] = device
    for claim in claims:
        meta = claim.get("metadata") or {}
        ns = meta.get("namespace", "")
        if namespace is not None and ns != namespace:
            continue
        status = claim.get("status") or {}
        pods = [r.get("name", "") for r in status.get("reservedFor") or [] if r.get("resource", "pods") == "pods"]
        reported = {
            (e.get("driver", ""), e.get("pool", ""), e.get("device", ""), e.get("shareID") or ""): e
            for e in status.get("devices") or []
            if isinstance(e, dict)
        }
        container = str((meta.get("annotations") or {}).get(CONTAINER_ANNOTATION) or "")
        for use in claim_uses(claim, capacities):
            held = out.devices.get(use.device)
            if held is None:
                out.unknown_devices += 1
                continue
            memory, cores = int(use.consumed.get(MEMORY, 0)), int(use.consumed.get(CORES, 0))
            entry = reported.get((*use.device, use.share_id)) or {}
            applied = entry.get("data") if isinstance(entry.get("data"), dict) else None
            share = Share(ns, use.claim, use.device, memory, cores, pods, container, use.share_id, applied)
            out.shares.append(share)
            held.memory_used += memory
            held.cores_used += cores
            held.shares += 1
            held.sharers.extend([f"{ns}/{p}" for p in pods] or [f"{ns}/claim:{share.claim}"])
    return out
