"""HAMi-syntax pods to DRA pods plus the objects they need: the conversion, as a pure function.

Driven entirely by the vendor table: each container's ``count``/``memory``/``cores`` resources of
one vendor (and chip) become one claim with a single device request. The pod keeps everything
else; already converted pods and pods without these resources come back unchanged.

A pod annotated ``dralab.io/prefer-types: "a100,h100"`` gets, instead of an ``exactly`` request,
one with ``firstAvailable`` (KEP-4816, beta and on by default since Kubernetes 1.34): one
subrequest per listed type, in that order, each asking for the same count and capacity with the
selectors of the plain request plus that type's selector (matched as the vendor's ``use-*type``
annotation matches). The scheduler takes the first that can be allocated; the allocation result
names it as ``<request>/<subrequest>``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from dralab.model import cel, naming
from dralab.model.denials import Denied, check_type, json_type
from dralab.model.hami_units import compute_units, cores_percent, device_count, memory_bytes, same_quantity
from dralab.model.jsonpatch import diff, subtree_ops
from dralab.model.objects import MANAGED_BY
from dralab.model.quantity import MIB
from dralab.model.vendors import ResourceSet, Vendor, VendorTable

API_VERSION = "resource.k8s.io/v1"
DRA_LABEL = "hami.io/dra"
POD_LABEL = "dralab.io/pod"
LIFECYCLE_LABEL = "dralab.io/lifecycle"
ANN_POD_NAME = "dralab.io/pod-name"
ANN_GENERATE_NAME = "dralab.io/pod-generate-name"
ANN_CONTAINER = "dralab.io/container"
ANN_ADMISSION_UID = "dralab.io/admission-uid"
CONTAINER_KINDS = ("initContainers", "containers")
LIFECYCLES = ("claim", "template")
REQUEST_CACHE_SIZE = 1024  # distinct device requests remembered per converter
MEMORY_CAPACITY = "memory"
CORES_CAPACITY = "cores"
ANN_PREFER_TYPES = "dralab.io/prefer-types"
# dralab.io/align: all devices of a multi-device request share one PCIe root or NUMA node (matchAttribute)
ANN_ALIGN = "dralab.io/align"
PCIE_ROOT_ATTRIBUTE = "resource.kubernetes.io/pcieRoot"  # the standard attribute drivers publish (KEP-5316)
ALIGN_ATTRIBUTES = {
    "pcieRoot": PCIE_ROOT_ATTRIBUTE,
    "numaNode": "{driver}/numaNode",  # the driver's own: Kubernetes has no standard NUMA attribute
}
MAX_SUBREQUESTS = 8  # resource.k8s.io/v1 FirstAvailableDeviceRequestMaxSize
_NOT_LABEL = re.compile(r"[^a-z0-9]+")


@dataclass(frozen=True)
class ClaimPlan:
    """One claim of the converted pod: which container and vendor it serves and what it asks for."""

    kind: str
    index: int
    container: str
    vendor: str
    chip: str | None
    base: str
    ref_name: str
    object_name: str
    request: dict[str, Any]


@dataclass
class Conversion:
    """The result for one pod: the converted pod, the patch to it, and the objects to create."""

    original: dict[str, Any]
    pod: dict[str, Any]
    namespace: str
    pod_name: str
    plans: list[ClaimPlan] = field(default_factory=list)
    objects: list[dict[str, Any]] = field(default_factory=list)
    reason: str = ""
    touched: list[tuple[str | int, ...]] | None = None  # where conversion wrote (None: unknown, diff instead)

    @property
    def changed(self) -> bool:
        return bool(self.plans)

    @property
    def patch(self) -> list[dict[str, Any]]:
        if self.touched is not None and self.pod is not self.original:
            return subtree_ops(self.original, self.pod, self.touched)
        return diff(self.original, self.pod)

    @property
    def vendors(self) -> list[str]:
        return [p.vendor for p in self.plans]


@dataclass(frozen=True)
class _Role:
    rs: ResourceSet
    role: str  # count | memory | cores
    slot: int  # the resource set's number in its converter (a cheap key: ResourceSet hashes eleven fields)


@dataclass
class _Found:
    """What one container asks of one resource set."""

    rs: ResourceSet
    slot: int
    values: dict[str, tuple[object, str]] = field(default_factory=dict)  # role -> (value, field)
    names: list[str] = field(default_factory=list)


_ABSENT = (object(), "")  # (value, field) of a role the container does not set, in request cache keys


class Converter:
    """Converts pods for one vendor table and lifecycle; build once, call :meth:`convert` per pod."""

    def __init__(
        self,
        table: VendorTable,
        lifecycle: str = "claim",
        opt_out_label: str = "dralab.io/convert",
        max_claims: int | None = None,
    ) -> None:
        if lifecycle not in LIFECYCLES:
            raise ValueError(f"lifecycle must be one of {LIFECYCLES}, got {lifecycle!r}")
        self.table = table
        self.lifecycle = lifecycle
        self.opt_out_label = opt_out_label
        self.max_claims = max_claims  # None: no cap (offline conversion); the webhook passes its config's
        self._roles: dict[str, _Role] = {}
        self._unsupported: dict[str, str] = {}
        self._ignored: dict[str, str] = {}
        self._chip_patterns: list[tuple[str, str, Vendor]] = []
        self._requests: dict[tuple[Any, ...], bytes] = {}  # see _request
        slots = iter(range(1 << 30))
        for vendor in table.enabled_vendors():
            for rs in vendor.resource_sets():
                slot = next(slots)
                for role, name in zip(("count", "memory", "cores"), rs.names, strict=True):
                    self._roles[name] = _Role(rs, role, slot)
            self._unsupported.update(vendor.unsupported)
            for name in vendor.ignored:
                self._ignored[name] = vendor.key
            if vendor.chips:
                for role, template in vendor.resource_templates().items():
                    if role != "count" and "{chip}" in template:
                        prefix, _, suffix = template.partition("{chip}")
                        self._chip_patterns.append((prefix, suffix, vendor))

    # -- questions -------------------------------------------------------------------------

    def opted_out(self, pod: dict[str, Any]) -> bool:
        meta = pod.get("metadata") if isinstance(pod, dict) else None
        labels = meta.get("labels") if isinstance(meta, dict) else None
        if not isinstance(labels, dict):
            return False
        return str(labels.get(self.opt_out_label, "")).lower() == "false"

    def leftovers(self, pod: dict[str, Any]) -> list[str]:
        """Fields of ``pod`` that still carry HAMi resources of an enabled vendor.

        Raises :class:`Denied` for a pod whose fields have the wrong JSON types (see :func:`check_pod`).
        """
        check_pod(pod)
        found = []
        for kind, index, container in _containers(pod):
            res = container.get("resources") or {}
            for where in ("limits", "requests"):
                for name in res.get(where) or {}:
                    if name in self._roles or name in self._unsupported or self._unknown_chip(name):
                        found.append(f"spec.{kind}[{index}].resources.{where}[{name}]")
        return found

    def _unknown_chip(self, name: str) -> Vendor | None:
        for prefix, suffix, vendor in self._chip_patterns:
            if name.startswith(prefix) and name.endswith(suffix) and len(name) > len(prefix) + len(suffix):
                chip = name[len(prefix) : len(name) - len(suffix)]
                if chip not in vendor.chips and "/" not in chip:
                    return vendor
        return None

    # -- conversion ------------------------------------------------------------------------

    def convert(
        self,
        pod: dict[str, Any],
        *,
        namespace: str | None = None,
        request_uid: str | None = None,
        renames: dict[str, str] | None = None,
    ) -> Conversion:
        """Convert ``pod``; raises :class:`Denied` for requests that cannot be honoured.

        ``request_uid`` (the admission UID) seeds names of ``generateName`` pods and is recorded on
        claims; offline a hash of the manifest seeds them. ``renames`` maps a claim's uncut base name
        to the name to use instead (the webhook's answer to a name held by another pod's claim).
        """
        check_pod(pod)
        meta = pod.get("metadata") or {}
        ns = namespace or meta.get("namespace") or "default"
        pod_name = meta.get("name") or ""
        generate_name = meta.get("generateName") or ""
        if not pod_name:
            if not generate_name:
                raise Denied("metadata.name", "the pod has neither name nor generateName; set one")
            pod_name = naming.generated_name(generate_name, request_uid or naming.manifest_seed(pod))
        result = Conversion(original=pod, pod=pod, namespace=ns, pod_name=pod_name)
        if self.opted_out(pod):
            result.reason = f"opted out by label {self.opt_out_label}=false"
            return result

        found_per_container = []
        for kind, index, container in _containers(pod):
            groups = self._scan(kind, index, container)
            if groups:
                found_per_container.append((kind, index, container, groups))
        if not found_per_container:
            result.reason = "no HAMi resources of an enabled vendor"
            return result
        needed = sum(len(groups) for *_, groups in found_per_container)
        if self.max_claims is not None and needed > self.max_claims:
            kind = found_per_container[-1][0]
            raise Denied(
                f"spec.{kind}",
                f"the pod needs {needed} ResourceClaims (one per container and vendor); at most "
                f"{self.max_claims} per pod are allowed (webhook.maxClaimsPerPod): use fewer accelerator "
                "containers or raise the limit",
            )

        annotations = meta.get("annotations") or {}
        # Copy on write: only the containers on the paths conversion writes to are copied; every other
        # subtree of the converted pod is the original's own object (neither is changed afterwards).
        mutated = dict(pod)
        spec = mutated["spec"] = dict(pod["spec"])
        pod_claims = spec["resourceClaims"] = list(spec.get("resourceClaims") or [])
        for kind in {kind for kind, *_ in found_per_container}:
            spec[kind] = list(spec[kind])
        taken_refs = {c.get("name") for c in pod_claims}
        selector_cache: dict[str, list[str]] = {}
        renames = renames or {}
        templates: dict[str, dict[str, Any]] = {}

        touched: list[tuple[str | int, ...]] = [("spec", "resourceClaims"), _label_path(meta)]
        for kind, index, container, groups in found_per_container:
            touched.append(("spec", kind, index, "resources"))
            target = spec[kind][index] = dict(container)
            res = target["resources"] = dict(container.get("resources") or {})
            consumed: set[str] = set()
            for found in groups:
                rs = found.rs
                vendor = self.table.get(rs.vendor)
                request = self._request(vendor, rs, found, annotations, selector_cache)
                constraints = align_constraints(vendor.driver, request, annotations)
                cname = container.get("name") or f"{kind}-{index}"
                base = naming.claim_base(ns, pod_name, cname, rs.claim_suffix)
                if self.lifecycle == "claim":
                    ref = renames.get(base) or naming.dns_label(base)
                    if ref in taken_refs:
                        ref = naming.collision_variant(base, "pod")
                    obj_name = ref
                    obj = self._claim(ns, ref, request, meta, pod_name, cname, request_uid, constraints)
                    result.objects.append(obj)
                    pod_claims.append({"name": ref, "resourceClaimName": ref})
                else:
                    ref = naming.dns_label(f"{cname}-{rs.claim_suffix}")
                    if ref in taken_refs:
                        ref = naming.collision_variant(f"{cname}-{rs.claim_suffix}", "pod")
                    named = {"request": request, "constraints": constraints} if constraints else request
                    obj_name = naming.template_name(rs.claim_suffix, named)
                    if obj_name not in templates:
                        templates[obj_name] = self._template(ns, obj_name, request, constraints)
                    pod_claims.append({"name": ref, "resourceClaimTemplateName": obj_name})
                taken_refs.add(ref)
                res["claims"] = [*(res.get("claims") or []), {"name": ref}]
                consumed.update(found.names)
                consumed.update(n for n, v in self._ignored.items() if v == rs.vendor)
                result.plans.append(
                    ClaimPlan(kind, index, cname, rs.vendor, rs.chip, base, ref, obj_name, request)
                )
            for where in ("limits", "requests"):
                if where in res and isinstance(res[where], dict):
                    kept = {k: v for k, v in res[where].items() if k not in consumed}
                    if kept:
                        res[where] = kept
                    else:
                        del res[where]

        result.objects.extend(templates.values())
        mutated["metadata"] = {**meta, "labels": {**(meta.get("labels") or {}), DRA_LABEL: "true"}}
        result.pod = mutated
        result.touched = touched
        return result

    def _scan(self, kind: str, index: int, container: dict[str, Any]) -> list[_Found]:
        """What the container asks of each resource set, in the order its resources name them."""
        res = container.get("resources") or {}
        limits = res.get("limits") or {}
        requests = res.get("requests") or {}
        groups: dict[int, _Found] = {}
        for name in dict.fromkeys([*limits, *requests]):
            role = self._roles.get(name)
            if role is None and name not in self._unsupported and self._unknown_chip(name) is None:
                continue  # cpu, memory, other vendors' resources: most names, so no path is built for them
            where = "limits" if name in limits else "requests"
            path = f"spec.{kind}[{index}].resources.{where}[{name}]"
            if name in self._unsupported:
                raise Denied(path, self._unsupported[name])
            if role is None:
                vendor = self._unknown_chip(name)
                assert vendor is not None
                raise Denied(path, f"unknown {vendor.title} chip; known chips: {', '.join(vendor.chips)}")
            value = limits[name] if name in limits else requests[name]
            if name in limits and name in requests and not same_quantity(limits[name], requests[name]):
                raise Denied(
                    f"spec.{kind}[{index}].resources.requests[{name}]",
                    f"{requests[name]!r} differs from limits {limits[name]!r}; set both to the same value",
                )
            found = groups.get(role.slot)
            if found is None:
                found = groups[role.slot] = _Found(role.rs, role.slot)
            found.values[role.role] = (value, path)
            found.names.append(name)
        for found in groups.values():
            if "count" not in found.values:
                _, path = next(iter(found.values.values()))
                count = found.rs.count
                raise Denied(path, f"needs the device count {count}; add `{count}: 1` to the same limits")
        return list(groups.values())

    def _request(
        self,
        vendor: Vendor,
        rs: ResourceSet,
        found: _Found,
        annotations: dict[str, Any],
        cache: dict[str, list[str]],
    ) -> dict[str, Any]:
        """The claim's device request: built once per distinct input (pods of one template ask alike), a copy each time.

        The result depends only on the resource set, the resources' values and the selection annotations
        (never on names or paths, which only errors name), so that is the key; unhashable junk skips the cache.
        """
        values = found.values
        count, memory, cores = values.get("count", _ABSENT), values.get("memory", _ABSENT), values.get("cores", _ABSENT)
        # typed: 1, 1.0 and true are equal keys in Python, not the same quantity to conversion
        key = (found.slot, type(count[0]), count[0], type(memory[0]), memory[0], type(cores[0]), cores[0],
               annotations.get(rs.use_uuid, _ABSENT), annotations.get(rs.no_use_uuid, _ABSENT),  # null is not absent
               annotations.get(rs.use_type, _ABSENT), annotations.get(rs.no_use_type, _ABSENT),
               annotations.get(ANN_PREFER_TYPES, _ABSENT))
        try:
            built = self._requests.get(key)
        except TypeError:  # a list or an object where a quantity or annotation belongs
            return self._build_request(vendor, rs, found, annotations, cache)
        if built is None:
            request = self._build_request(vendor, rs, found, annotations, cache)
            if len(self._requests) >= REQUEST_CACHE_SIZE:
                self._requests.pop(next(iter(self._requests)))  # the oldest: distinct inputs cannot grow it
            self._requests[key] = orjson.dumps(request)
            return request
        return orjson.loads(built)  # kept as JSON: immutable, and decoding it is the cheapest deep copy

    def _build_request(
        self,
        vendor: Vendor,
        rs: ResourceSet,
        found: _Found,
        annotations: dict[str, Any],
        cache: dict[str, list[str]],
    ) -> dict[str, Any]:
        count = device_count(*found.values["count"])
        capacity: dict[str, str] = {}
        if "cores" in found.values:
            cores: int | None = cores_percent(*found.values["cores"])
        else:
            cores = vendor.default_cores
        units_guard = None
        if cores is not None:
            if vendor.counts_compute_units and cores:
                units = self._compute_units(vendor, rs, cores, found)
                capacity[CORES_CAPACITY] = str(compute_units(cores, units))
                units_guard = cel.capacity_equals(vendor.attribute_domain, CORES_CAPACITY, units)
            else:
                capacity[CORES_CAPACITY] = str(cores)
        if "memory" in found.values:
            mem: int | None = memory_bytes(*found.values["memory"])
        else:
            mem = vendor.default_memory_mib * MIB if vendor.default_memory_mib is not None else None
        if mem is not None:
            capacity[MEMORY_CAPACITY] = str(mem)
        exactly: dict[str, Any] = {
            "allocationMode": "ExactCount",
            "count": count,
            "deviceClassName": vendor.device_class,
        }
        if capacity:
            exactly["capacity"] = {"requests": capacity}
        preferred = _preferred_types(rs, annotations)
        if preferred is None:
            exprs = self._selectors(vendor, rs, annotations, cache)
            if units_guard is not None:
                exprs.append(units_guard)
            exactly["selectors"] = [{"cel": {"expression": e}} for e in exprs]
            return {"name": vendor.request_name, "exactly": exactly}
        subrequests = []
        for name, wanted in zip(_subrequest_names(preferred), preferred, strict=True):
            exprs = self._selectors(vendor, rs, annotations, cache, preferred=wanted)
            if units_guard is not None:
                exprs.append(units_guard)
            subrequests.append({"name": name, **exactly, "selectors": [{"cel": {"expression": e}} for e in exprs]})
        return {"name": vendor.request_name, "firstAvailable": subrequests}

    @staticmethod
    def _compute_units(vendor: Vendor, rs: ResourceSet, cores: int, found: _Found) -> int:
        """The compute units of one card, from the configuration; refused when none is configured."""
        if vendor.compute_reference_units is not None:
            return vendor.compute_reference_units
        field = found.values["cores"][1] if "cores" in found.values else f"{vendor.key} defaults.cores"
        raise Denied(
            field,
            f"{cores}% of a {vendor.title} cannot be reserved: its capacity counts compute units and the "
            "compute units of the cluster's cards are not configured. Set "
            f"vendors.overrides.{vendor.key}.computeUnits.reference in dralab's config (or HAMi's "
            f"{vendor.key}.referenceComputeUnits) to your cards' compute units, or omit {rs.cores}",
        )

    def _selectors(
        self,
        vendor: Vendor,
        rs: ResourceSet,
        annotations: dict[str, Any],
        cache: dict[str, list[str]],
        preferred: str | None = None,
    ) -> list[str]:
        """The request's CEL selectors; ``preferred``: one type of ``dralab.io/prefer-types`` (a subrequest's)."""
        domain = vendor.attribute_domain
        substring = vendor.type_match == "contains"
        exprs = [vendor.class_selector()]
        if vendor.chip_selector and rs.product_name:
            exprs.append(cel.one_of(domain, vendor.type_attribute_name, [rs.product_name]))

        def values(annotation: str, kind: cel.SelectionKind) -> list[str] | None:
            if annotation not in annotations:
                return None
            if annotation not in cache:
                cache[annotation] = cel.parse_values(annotation, annotations[annotation], kind)
            return cache[annotation]

        for annotation, negate in ((rs.use_uuid, False), (rs.no_use_uuid, True)):
            listed = values(annotation, cel.UUID)
            if listed:
                exprs.append(cel.one_of(domain, "uuid", listed, negate))
        if preferred is not None:  # use-*type is refused beside prefer-types (see _preferred_types)
            exprs.append(cel.type_match(domain, vendor.type_attribute_name, [preferred], substring=substring))
        for annotation, negate in ((rs.use_type, False), (rs.no_use_type, True)):
            listed = values(annotation, cel.TYPE)
            if listed:
                exprs.append(cel.type_match(domain, vendor.type_attribute_name, listed,
                                            substring=substring, negate=negate))
        return exprs

    def _claim(
        self,
        ns: str,
        name: str,
        request: dict[str, Any],
        meta: dict[str, Any],
        pod_name: str,
        container: str,
        request_uid: str | None,
        constraints: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        annotations = {ANN_CONTAINER: container}
        if meta.get("name"):
            annotations[ANN_POD_NAME] = meta["name"]
        else:
            annotations[ANN_GENERATE_NAME] = meta.get("generateName", "")
        if request_uid:
            annotations[ANN_ADMISSION_UID] = request_uid
        return {
            "apiVersion": API_VERSION,
            "kind": "ResourceClaim",
            "metadata": {
                "name": name,
                "namespace": ns,
                "labels": {
                    **MANAGED_BY,
                    LIFECYCLE_LABEL: "claim",
                    # generateName pods: the prefix until the janitor learns the real name
                    POD_LABEL: naming.label_value(meta.get("name") or meta.get("generateName", "").rstrip("-")),
                },
                "annotations": annotations,
            },
            "spec": {"devices": _devices(request, constraints)},  # the plan's own copy (see _request)
        }

    def _template(
        self, ns: str, name: str, request: dict[str, Any], constraints: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        return {
            "apiVersion": API_VERSION,
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": ns, "labels": {**MANAGED_BY, LIFECYCLE_LABEL: "template"}},
            "spec": {"spec": {"devices": _devices(request, constraints)}},
        }


def _devices(request: dict[str, Any], constraints: list[dict[str, Any]] | None) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": [request]}
    if constraints:
        devices["constraints"] = constraints
    return devices


def _request_count(request: dict[str, Any]) -> int:
    """How many devices ``request`` allocates (the most of its ``firstAvailable`` alternatives)."""
    blocks = [request["exactly"]] if "exactly" in request else list(request.get("firstAvailable") or [])
    return max((int(b.get("count", 1)) for b in blocks), default=1)


def align_constraints(driver: str, request: dict[str, Any], annotations: dict[str, Any]) -> list[dict[str, Any]]:
    """``dralab.io/align``'s ``matchAttribute`` constraint on ``request`` (none for a one-device request).

    With ``pcieRoot`` every device of the request must publish the same
    ``resource.kubernetes.io/pcieRoot``; with ``numaNode``, the same ``<driver>/numaNode``. The
    scheduler leaves a pod Pending when no PCIe root (or NUMA node) has enough free devices.
    """
    raw = annotations.get(ANN_ALIGN, _ABSENT)
    if raw is _ABSENT:
        return []
    if not isinstance(raw, str) or raw not in ALIGN_ATTRIBUTES:
        raise Denied(f"metadata.annotations[{ANN_ALIGN}]",
                     f"{raw!r} is not a topology to align on: use one of {', '.join(ALIGN_ATTRIBUTES)}")
    if _request_count(request) < 2:
        return []  # one device is always aligned with itself
    return [{"requests": [request["name"]], "matchAttribute": ALIGN_ATTRIBUTES[str(raw)].format(driver=driver)}]


def _preferred_types(rs: ResourceSet, annotations: dict[str, Any]) -> list[str] | None:
    """The device types of ``dralab.io/prefer-types``, most preferred first (None: not annotated).

    Types are free text, as in HAMi's ``use-*type``; refused are a value that names no type, one
    that cannot be a device type (:func:`cel.parse_values`), more types than a ``firstAvailable``
    list holds, and the annotation beside the vendor's ``use-*type`` (both would name the accepted
    types). ``nouse-*type`` may stay: it excludes from every alternative. Entries equal but for
    case are one type (matching ignores case).
    """
    if ANN_PREFER_TYPES not in annotations:
        return None
    field = f"metadata.annotations[{ANN_PREFER_TYPES}]"
    if rs.use_type in annotations:
        raise Denied(
            field,
            f"cannot be combined with {rs.use_type}: both name the accepted device types. Drop {rs.use_type} "
            f"and list its types in {ANN_PREFER_TYPES} in the order you prefer them, or drop {ANN_PREFER_TYPES} "
            "to accept the types in any order",
        )
    raw = annotations[ANN_PREFER_TYPES]
    if isinstance(raw, str):
        distinct = {cel.upper_ascii(v.strip()) for v in raw.split(",") if v.strip()}
        if len(distinct) > MAX_SUBREQUESTS:
            raise Denied(
                field,
                f"lists {len(distinct)} device types; a request holds at most {MAX_SUBREQUESTS} alternatives "
                f"(firstAvailable): keep the {MAX_SUBREQUESTS} you prefer most",
            )
    first: dict[str, str] = {}
    for value in cel.parse_values(ANN_PREFER_TYPES, raw, cel.TYPE):
        first.setdefault(cel.upper_ascii(value), value)
    return list(first.values())


def _subrequest_names(types: list[str]) -> list[str]:
    """DNS-label names for the subrequests of ``types``: the type in lower case (``NVIDIA A100`` is
    ``nvidia-a100``), else ``t<index>`` where that is taken; unique within the request."""
    names: list[str] = []
    for index, wanted in enumerate(types):
        slug = _NOT_LABEL.sub("-", wanted.lower()).strip("-")[:63].strip("-")
        name = slug if slug and slug not in names else f"t{index}"
        while name in names:
            name = f"{name}-{index}"
        names.append(name)
    return names


def check_pod(pod: Any) -> None:
    """Raise :class:`Denied` naming the first field conversion reads whose JSON type is wrong.

    The apiserver decodes pods into typed structs before admission, so only a direct caller can send
    such a pod; checking the shape once here lets every later step read fields without type guards.
    Absent and null fields are fine. Every admission passes here, so the usual case tests types inline
    and names a field (builds its path) only when one is wrong.
    """
    if not isinstance(pod, dict) or pod.get("kind", "Pod") != "Pod":
        raise Denied("kind", "expected a Pod")
    meta = check_type(pod, "metadata", dict, "metadata") or {}
    if _wrong(meta, _META_STR, str) or _wrong(meta, _META_MAPS, dict):
        for key in _META_STR:
            check_type(meta, key, str, f"metadata.{key}")
        for key in _META_MAPS:
            check_type(meta, key, dict, f"metadata.{key}")
    spec = check_type(pod, "spec", dict, "spec") or {}
    for index, claim in enumerate(check_type(spec, "resourceClaims", list, "spec.resourceClaims") or []):
        if not isinstance(claim, dict):
            raise Denied(f"spec.resourceClaims[{index}]", f"must be an object, got {json_type(claim)}")
        check_type(claim, "name", str, f"spec.resourceClaims[{index}].name")
    for kind in CONTAINER_KINDS:
        for index, container in enumerate(check_type(spec, kind, list, f"spec.{kind}") or []):
            if not isinstance(container, dict):
                raise Denied(f"spec.{kind}[{index}]", f"must be an object, got {json_type(container)}")
            res = container.get("resources")
            if (_wrong(container, ("name",), str) or _wrong(container, ("resources",), dict)
                    or (res and (_wrong(res, _RES_MAPS, dict) or _wrong(res, ("claims",), list)))):
                _name_wrong_container_field(container, f"spec.{kind}[{index}]")


_META_STR = ("name", "generateName", "namespace")
_META_MAPS = ("labels", "annotations")
_RES_MAPS = ("limits", "requests")


def _wrong(container: dict[str, Any], keys: tuple[str, ...], expected: type) -> bool:
    """Whether one of ``keys`` holds a non-null value that is not an ``expected``."""
    for key in keys:
        value = container.get(key)
        if value is not None and not isinstance(value, expected):
            return True
    return False


def _name_wrong_container_field(container: dict[str, Any], path: str) -> None:
    """Raise :class:`Denied` for the first wrong field of a container (in the order :func:`check_pod` reads)."""
    check_type(container, "name", str, f"{path}.name")
    res = check_type(container, "resources", dict, f"{path}.resources") or {}
    for where in _RES_MAPS:
        check_type(res, where, dict, f"{path}.resources.{where}")
    check_type(res, "claims", list, f"{path}.resources.claims")


def _label_path(meta: dict[str, Any]) -> tuple[str, ...]:
    """Where conversion's label goes in the patch: the label itself, or the whole labels map when it is null."""
    return ("metadata", "labels", DRA_LABEL) if isinstance(meta.get("labels"), dict) else ("metadata", "labels")


def _containers(pod: dict[str, Any]) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """(kind, index, container) of every container of a pod that passed :func:`check_pod`."""
    spec = pod.get("spec") or {}
    for kind in CONTAINER_KINDS:
        for index, container in enumerate(spec.get(kind) or []):
            yield kind, index, container


def convert_pod(
    pod: dict[str, Any],
    table: VendorTable,
    *,
    namespace: str | None = None,
    lifecycle: str = "claim",
    request_uid: str | None = None,
    opt_out_label: str = "dralab.io/convert",
) -> Conversion:
    """One-shot conversion (builds a :class:`Converter`; the webhook keeps one instead)."""
    return Converter(table, lifecycle, opt_out_label).convert(pod, namespace=namespace, request_uid=request_uid)
