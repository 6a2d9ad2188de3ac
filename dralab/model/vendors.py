"""The vendor table: what each accelerator vendor's resources, drivers, classes and attributes are.

The table is data (``vendors.yaml``); this module turns it into typed objects and answers the
questions the webhook, driver and harness ask, so none of them branches on vendor names.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from dralab import yamlio
from dralab.errors import UserError

_REQUIRED = ("driver", "deviceClass", "typeAttribute", "requestName", "claimSuffix", "resources", "annotations")


@dataclass(frozen=True)
class ResourceSet:
    """The concrete HAMi resource names of one vendor (and, for Ascend, one chip)."""

    vendor: str
    chip: str | None
    count: str
    memory: str
    cores: str
    claim_suffix: str
    use_uuid: str
    no_use_uuid: str
    use_type: str
    no_use_type: str
    product_name: str | None

    @property
    def names(self) -> tuple[str, str, str]:
        """The three resource names (count, memory, cores) this set converts."""
        return (self.count, self.memory, self.cores)


@dataclass(frozen=True)
class DeviceSpec:
    """How a vendor's devices look on a node: names, CDI kind, device nodes."""

    name_pattern: str
    cdi_vendor: str
    cdi_class: str
    device_nodes: tuple[str, ...]
    toolkit_cdi_kind: str | None

    @property
    def cdi_kind(self) -> str:
        return f"{self.cdi_vendor}/{self.cdi_class}"


@dataclass(frozen=True)
class Vendor:
    """One entry of the vendor table."""

    key: str
    title: str
    brand: str
    driver: str
    device_class: str
    type_attribute: str
    type_attribute_name: str
    request_name: str
    enforcement: str
    device: DeviceSpec
    default_cores: int | None
    default_memory_mib: int | None
    # capacity ``cores`` counts compute units (Hygon), not percent; the reference is the compute
    # units of the cluster's cards, from the operator's config (None: hcucores cannot be converted)
    compute_reference_units: int | None
    unsupported: dict[str, str]
    ignored: tuple[str, ...]
    chips: dict[str, str] = field(default_factory=dict)
    _raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    type_match: str = "exact"
    counts_compute_units: bool = False
    chip_selector: bool = False

    @property
    def attribute_domain(self) -> str:
        """Attributes are qualified by the driver name (``device.attributes["<driver>"]``)."""
        return self.driver

    def resource_sets(self) -> list[ResourceSet]:
        """Every concrete set of resource names: one per chip for chip-templated vendors."""
        chips: list[str | None] = list(self.chips) if self.chips else [None]
        return [self._resource_set(chip) for chip in chips]

    def _resource_set(self, chip: str | None) -> ResourceSet:
        res = self._raw["resources"]
        if chip is not None:
            # a chip whose resources were renamed (HAMi's per-chip resourceName etc.) overrides the templates
            res = {**res, **((self._raw.get("chipResources") or {}).get(chip) or {})}
        ann = self._raw["annotations"]

        def fill(template: str) -> str:
            if chip is None:
                return template
            return template.replace("{chip_lower}", chip.lower()).replace("{chip}", chip)

        return ResourceSet(
            vendor=self.key,
            chip=chip,
            count=fill(res["count"]),
            memory=fill(res["memory"]),
            cores=fill(res["cores"]),
            claim_suffix=fill(self._raw["claimSuffix"]),
            use_uuid=fill(ann["useUUID"]),
            no_use_uuid=fill(ann["noUseUUID"]),
            use_type=fill(ann["useType"]),
            no_use_type=fill(ann["noUseType"]),
            product_name=self.chips.get(chip) if chip else None,
        )

    def resource_templates(self) -> dict[str, str]:
        """The count/memory/cores name templates as written in the table (``{chip}`` unfilled)."""
        res = self._raw["resources"]
        return {"count": res["count"], "memory": res["memory"], "cores": res["cores"]}

    def class_selector(self) -> str:
        """The CEL expression that matches this vendor's shareable devices (DeviceClass and claim entry 1)."""
        return (
            f'device.driver == "{self.driver}" && '
            f'device.attributes["{self.attribute_domain}"].type == "{self.type_attribute}"'
        )


@dataclass(frozen=True)
class VendorTable:
    """All vendors, plus the subset a deployment enabled."""

    vendors: dict[str, Vendor]
    enabled: tuple[str, ...]

    def get(self, key: str) -> Vendor:
        try:
            return self.vendors[key]
        except KeyError:
            known = ", ".join(sorted(self.vendors))
            raise UserError(f"unknown vendor {key!r}: known vendors are {known}") from None

    def enabled_vendors(self) -> list[Vendor]:
        return [self.vendors[k] for k in self.enabled]

    def by_driver(self, driver: str) -> Vendor | None:
        """The vendor whose DRA driver name is ``driver`` (None when no vendor uses it)."""
        return next((v for v in self.vendors.values() if v.driver == driver), None)

    def resource_sets(self, enabled_only: bool = True) -> list[ResourceSet]:
        vendors = self.enabled_vendors() if enabled_only else list(self.vendors.values())
        return [rs for v in vendors for rs in v.resource_sets()]


def _parse_vendor(key: str, raw: dict[str, Any]) -> Vendor:
    missing = [name for name in _REQUIRED if name not in raw]
    if missing:
        raise UserError(
            f"vendor table entry {key!r} lacks {', '.join(missing)}: add them (see dralab/model/vendors.yaml)"
        )
    dev = raw.get("device") or {}
    defaults = raw.get("defaults") or {}
    compute = raw.get("computeUnits")
    res = raw["resources"]
    return Vendor(
        key=key,
        title=raw.get("title", key),
        brand=raw.get("brand", key),
        driver=raw["driver"],
        device_class=raw["deviceClass"],
        type_attribute=raw["typeAttribute"],
        type_attribute_name=raw.get("typeAttributeName", "productName"),
        request_name=raw["requestName"],
        enforcement=raw.get("enforcement", "none"),
        device=DeviceSpec(
            name_pattern=dev.get("namePattern", "dev-{index}"),
            cdi_vendor=dev.get("cdiVendor", f"k8s.{raw['driver']}"),
            cdi_class=dev.get("cdiClass", raw["requestName"]),
            device_nodes=tuple(dev.get("deviceNodes") or ()),
            toolkit_cdi_kind=dev.get("toolkitCdiKind"),
        ),
        default_cores=defaults.get("cores"),
        default_memory_mib=defaults.get("memory"),
        compute_reference_units=_compute_reference(key, compute),
        unsupported=dict(res.get("unsupported") or {}),
        ignored=tuple(res.get("ignored") or ()),
        chips=dict(raw.get("chips") or {}),
        _raw=raw,
        type_match=_type_match(key, raw.get("typeMatch", "exact")),
        chip_selector=bool(raw.get("chipSelector", False)),
        counts_compute_units=isinstance(compute, dict),
    )


def _compute_reference(key: str, compute: object) -> int | None:
    """``computeUnits.reference``: a positive whole number, or null (not configured)."""
    if compute is None:
        return None
    if not isinstance(compute, dict):
        raise UserError(f"vendor table entry {key!r}: computeUnits must be a mapping with 'reference', or null")
    reference = compute.get("reference")
    if reference is None:
        return None
    if isinstance(reference, bool) or not isinstance(reference, int) or reference < 1:
        raise UserError(
            f"vendor table entry {key!r}: computeUnits.reference must be the compute units of one card "
            f"(a whole number of at least 1), got {reference!r}"
        )
    return reference


def _type_match(key: str, value: str) -> str:
    if value not in ("exact", "contains"):
        raise UserError(f"vendor table entry {key!r}: typeMatch must be 'exact' or 'contains', got {value!r}")
    return value


def _merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge ``override`` onto ``base`` (mappings merge, everything else replaces)."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


@cache
def builtin_table_data() -> dict[str, Any]:
    """The shipped vendor table as plain data."""
    text = resources.files("dralab.model").joinpath("vendors.yaml").read_text()
    return yamlio.load(text, "dralab/model/vendors.yaml")["vendors"]


def load_vendor_table(
    overrides: dict[str, Any] | None = None,
    enabled: list[str] | tuple[str, ...] | None = None,
    base: dict[str, Any] | None = None,
) -> VendorTable:
    """Build the vendor table from the shipped data, config ``overrides`` and the ``enabled`` list.

    ``overrides`` maps vendor keys to partial entries (merged) or to whole new vendors.
    ``enabled`` defaults to every vendor. ``base`` replaces the shipped data (complete entries,
    e.g. translated from a HAMi device config) before the overrides are merged.
    """
    data = copy.deepcopy(base if base is not None else builtin_table_data())
    for key, entry in (overrides or {}).items():
        if not isinstance(entry, dict):
            raise UserError(f"config vendors.{key} must be a mapping, got {type(entry).__name__}")
        data[key] = _merge(data.get(key, {}), entry)
    vendors = {key: _parse_vendor(key, raw) for key, raw in data.items()}
    chosen = tuple(enabled) if enabled is not None else tuple(vendors)
    unknown = [k for k in chosen if k not in vendors]
    if unknown:
        raise UserError(
            f"enabled vendor(s) {', '.join(unknown)} not in the vendor table: choose from {', '.join(sorted(vendors))}"
        )
    return VendorTable(vendors=vendors, enabled=chosen)
