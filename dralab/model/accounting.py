"""What allocated ResourceClaims consume of each device: one definition for the monitor, lab harness and benches.

Each result of a claim's ``status.allocation.devices.results`` holds one device, keyed
``(driver, pool, device)``, and consumes of it:

- nothing when it is an admin-access result (``adminAccess: true``): it observes the device and
  holds none of its capacity;
- what its ``consumedCapacity`` says (the scheduler has already rounded it to the device's request
  policy);
- the whole device when it has no ``consumedCapacity`` (absent or empty): an exclusive allocation.

The request name plays no part: a ``firstAvailable`` result (``request: <request>/<subrequest>``)
counts like any other. Device capacities come from the ResourceSlices of each pool's newest
generation (older ones are being replaced). Values are exact (``Fraction``); callers round for display.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from dralab.model.quantity import quantity_value

DeviceKey = tuple[str, str, str]  # (driver, pool, device)
Capacity = dict[str, Fraction]  # capacity name (memory, cores, ...) -> exact value
Consumed = dict[DeviceKey, Capacity]


@dataclass(frozen=True)
class Use:
    """One allocation result: which claim holds which device, and how much of it."""

    namespace: str
    claim: str
    device: DeviceKey
    request: str
    consumed: Capacity = field(default_factory=dict)
    exclusive: bool = False  # no consumedCapacity: the whole device (``consumed`` is empty if its size is unknown)
    admin: bool = False  # adminAccess: consumes nothing
    share_id: str = ""
    known: bool = True  # a current slice publishes the device


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def current_slices(slices: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Only the slices of each pool's highest generation (older ones are being replaced)."""
    slices = list(slices)
    newest: dict[tuple[str, str], int] = {}
    for s in slices:
        spec = s.get("spec") or {}
        pool = spec.get("pool") or {}
        key = (spec.get("driver", ""), pool.get("name", ""))
        newest[key] = max(newest.get(key, 0), int(pool.get("generation") or 0))
    out = []
    for s in slices:
        spec = s.get("spec") or {}
        pool = spec.get("pool") or {}
        if int(pool.get("generation") or 0) == newest[(spec.get("driver", ""), pool.get("name", ""))]:
            out.append(s)
    return out


def capacity_value(entry: Any, what: str) -> Fraction:
    """A slice's capacity entry (``{value: 21525Mi}``, or the bare quantity) as an exact number."""
    value = entry.get("value", 0) if isinstance(entry, Mapping) else entry
    return quantity_value(str(value if value is not None else 0), what)


def device_capacities(slices: Iterable[dict[str, Any]]) -> dict[DeviceKey, Capacity]:
    """(driver, pool, device) -> its published capacity, from the current slices."""
    out: dict[DeviceKey, Capacity] = {}
    for s in current_slices(slices):
        spec = s.get("spec") or {}
        driver, pool = str(spec.get("driver", "")), str((spec.get("pool") or {}).get("name", ""))
        for dev in spec.get("devices") or []:
            name = str(dev.get("name", ""))
            out[(driver, pool, name)] = {
                str(k): capacity_value(v, f"slice {driver}/{pool} device {name} capacity {k}")
                for k, v in (dev.get("capacity") or {}).items()
            }
    return out


def result_key(result: Mapping[str, Any]) -> DeviceKey:
    return (str(result.get("driver", "")), str(result.get("pool", "")), str(result.get("device", "")))


def consumption(result: Mapping[str, Any], capacity: Mapping[str, Fraction] | None, what: str = "result") -> Capacity:
    """What one allocation result consumes of its device (``capacity``: the device's, None if unknown)."""
    if result.get("adminAccess"):
        return {}
    consumed = result.get("consumedCapacity")
    if not consumed:  # exclusive: the whole device
        return dict(capacity or {})
    return {str(k): quantity_value(str(v), f"{what} consumedCapacity.{k}") for k, v in consumed.items()}


def claim_uses(claim: Mapping[str, Any], capacities: Mapping[DeviceKey, Capacity]) -> list[Use]:
    """Every allocation result of one claim (none while it is unallocated)."""
    meta = _meta(claim)
    ns, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
    allocation = (claim.get("status") or {}).get("allocation") or {}
    out = []
    for result in (allocation.get("devices") or {}).get("results") or []:
        key = result_key(result)
        capacity = capacities.get(key)
        out.append(Use(
            namespace=ns,
            claim=name,
            device=key,
            request=str(result.get("request", "")),
            consumed=consumption(result, capacity, f"claim {ns}/{name} device {'/'.join(key)}"),
            exclusive=not result.get("adminAccess") and not result.get("consumedCapacity"),
            admin=bool(result.get("adminAccess")),
            share_id=str(result.get("shareID") or ""),
            known=capacity is not None,
        ))  # fmt: skip
    return out


def uses(claims: Iterable[Mapping[str, Any]], capacities: Mapping[DeviceKey, Capacity]) -> list[Use]:
    """Every allocation result of every claim, in claim order."""
    return [use for claim in claims for use in claim_uses(claim, capacities)]


def per_device(all_uses: Iterable[Use]) -> Consumed:
    """(driver, pool, device) -> summed consumption of the uses (a device every use of which is admin-only: empty)."""
    out: Consumed = {}
    for use in all_uses:
        slot = out.setdefault(use.device, {})
        for name, value in use.consumed.items():
            slot[name] = slot.get(name, Fraction(0)) + value
    return out


def consumed(claims: Iterable[Mapping[str, Any]], slices: Iterable[dict[str, Any]]) -> Consumed:
    """(driver, pool, device) -> what the allocated claims consume of it, sized against the slices."""
    return per_device(uses(claims, device_capacities(slices)))


def overcommitted(capacities: Mapping[DeviceKey, Capacity], used: Consumed) -> list[DeviceKey]:
    """Devices a current slice publishes of which more of a published capacity is consumed than it has.

    Must never happen: the scheduler allocates within capacity. A consumed name the device does not
    publish is not compared (the scheduler would not have allocated it).
    """
    out = []
    for key, amounts in used.items():
        have = capacities.get(key)
        if have is not None and any(v > have[name] for name, v in amounts.items() if name in have):
            out.append(key)
    return sorted(out)


def plain(value: Fraction) -> int | float:
    """A JSON-friendly number: whole values as int."""
    return int(value) if value.denominator == 1 else float(value)
