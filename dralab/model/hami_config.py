"""HAMi's device config (``device-config.yaml``) translated into dralab's vendor table, as a pure function.

Teams switching from HAMi or HAMi-DRA already have this file (the ``device-config.yaml`` key of the
HAMi scheduler's ConfigMap). It names the resources a pod asks for (count, memory, memory
percentage, cores), the Ascend chips with their memory and AI cores, the card-selection annotation
keys and the ``vendors:`` list. :func:`translate` turns it into complete vendor-table entries plus a
list of findings: every key is either translated or reported (ignored with the reason, unknown, or
a vendor dralab does not serve); nothing is dropped silently. No I/O: the caller reads the file.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from dralab import yamlio
from dralab.errors import UserError

CONFIGMAP_KEY = "device-config.yaml"
SUPPORTED_VENDORS = ("nvidia", "hygon", "ascend")
# Sections of HAMi's config for vendors dralab has no DRA driver or conversion for.
OTHER_VENDOR_SECTIONS = (
    "cambricon", "metax", "enflame", "mthreads", "iluvatars", "kunlun", "awsneuron", "amd", "vastai", "biren",
)
_RESOURCE_NAME = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")

# Keys that configure HAMi's scheduler, device plugin or in-container library, not admission:
# under DRA they belong to the node driver / device inventory, so they are reported, not applied.
_NODE_SIDE = "configures HAMi's device plugin or scheduler; under DRA the node driver publishes this"
_IGNORED_GPU_KEYS = {
    "overwriteEnv": "HAMi's env overwrite; dralab's node driver writes the enforcement env through CDI",
    "preConfiguredDeviceMemory": _NODE_SIDE,
    "deviceSplitCount": _NODE_SIDE + " (a device takes as many shares as its capacity allows)",
    "deviceMemoryScaling": _NODE_SIDE + " (memory over-commit is not expressible as DRA capacity)",
    "deviceCoreScaling": _NODE_SIDE,
    "enableNumaTopology": _NODE_SIDE,
    "gpuCorePolicy": "an in-container enforcement setting; set it in the node driver's enforcement profile",
    "libCudaLogLevel": "an in-container enforcement setting; set it in the node driver's enforcement profile",
    "disableCoreLimit": "an in-container enforcement setting; set it in the node driver's enforcement profile",
    "runtimeClassName": "dralab's chart installs the RuntimeClass; pods keep the runtimeClassName they set",
    "migProfileAllowlist": "MIG geometries are not converted by dralab (only shared HAMi-core devices)",
    "knownMigGeometries": "MIG geometries are not converted by dralab (only shared HAMi-core devices)",
    "defaultGPUNum": "dralab requires an explicit device count with memory/cores and denies a pod without one",
}
_ANNOTATION_KEYS = {
    "useUUIDAnnotation": "useUUID",
    "noUseUUIDAnnotation": "noUseUUID",
    "useTypeAnnotation": "useType",
    "noUseTypeAnnotation": "noUseType",
}
_ENTRY_KEYS = {"deviceClassName": "deviceClass", "draDriverName": "driver", "requestName": "requestName"}
_CHIP_IGNORED = {
    "memoryFactor": "memory requests are converted to bytes exactly; a factor other than 1 is not applied",
    "templates": "vNPU templates are a device-plugin concept; DRA shares by consumable capacity",
    "aiCPU": "AI CPUs are not a DRA capacity dralab publishes",
    "runtimeClassName": "dralab's chart installs the RuntimeClass; pods keep the runtimeClassName they set",
    "overwriteEnv": "HAMi's env overwrite; dralab's node driver writes the enforcement env through CDI",
    "superPod": "super-pod topology is not converted",
}


@dataclass(frozen=True)
class Finding:
    """One key of the HAMi config that was not translated as is, and why.

    ``kind``: ``ignored`` (known, no DRA equivalent), ``unknown`` (not a HAMi key: a typo?),
    ``unsupported`` (a vendor dralab does not serve), ``conflict`` (contradicts another key).
    """

    path: str
    kind: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.kind}: {self.message}"


@dataclass
class Translation:
    """Complete vendor-table entries (built from HAMi's config over the shipped table) and findings."""

    vendors: dict[str, dict[str, Any]]
    enabled: list[str] | None
    findings: list[Finding] = field(default_factory=list)
    source: str = "<hami-config>"

    def report(self) -> list[str]:
        """The findings as lines for a terminal or a log."""
        return [f"{self.source}: {f}" for f in self.findings]


def parse_document(text: str, source: str) -> dict[str, Any]:
    """The device config inside ``text``: the file itself or a ConfigMap holding it under ``device-config.yaml``."""
    try:
        doc = yamlio.load(text, source)
    except yaml.YAMLError as exc:
        first = str(exc).splitlines()[0] if str(exc) else "parse error"
        raise UserError(f"{source}: not valid YAML ({first})") from None
    if isinstance(doc, dict) and doc.get("kind") == "ConfigMap":
        data = doc.get("data") or {}
        if CONFIGMAP_KEY not in data:
            raise UserError(
                f"{source}: ConfigMap has no data.{CONFIGMAP_KEY}; pass the HAMi scheduler's device ConfigMap "
                "(kubectl -n <hami-namespace> get configmap <release>-device -o yaml)"
            )
        return parse_document(str(data[CONFIGMAP_KEY]), f"{source}:data.{CONFIGMAP_KEY}")
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise UserError(f"{source}: a HAMi device config is a YAML mapping with nvidia/hygon/ascend sections")
    return doc


class _Reader:
    """Walks one HAMi config, collecting findings; the translation steps read through it."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.findings: list[Finding] = []
        self.claimed: dict[str, str] = {}  # resource name -> where it was configured

    def note(self, path: str, kind: str, message: str) -> None:
        self.findings.append(Finding(path, kind, message))

    def mapping(self, value: Any, path: str) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise UserError(f"{self.source}: {path} must be a mapping, got {type(value).__name__}")
        return value

    def string(self, section: dict[str, Any], key: str, path: str) -> str | None:
        value = section.get(key)
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            raise UserError(f"{self.source}: {path}.{key} must be a string, got {value!r}")
        return value

    def resource(self, section: dict[str, Any], key: str, path: str) -> str | None:
        name = self.string(section, key, path)
        if name is None:
            return None
        if not _RESOURCE_NAME.fullmatch(name) or len(name) > 253:
            raise UserError(
                f"{self.source}: {path}.{key} {name!r} is not a valid resource name (e.g. nvidia.com/gpu)"
            )
        where = f"{path}.{key}"
        if name in self.claimed:
            raise UserError(
                f"{self.source}: resource {name!r} is configured by both {self.claimed[name]} and {where}; "
                "each resource name may belong to one vendor role only"
            )
        self.claimed[name] = where
        return name

    def integer(self, section: dict[str, Any], key: str, path: str, minimum: int = 0) -> int | None:
        value = section.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise UserError(f"{self.source}: {path}.{key} must be a whole number >= {minimum}, got {value!r}")
        return value


def _gpu_like(reader: _Reader, raw: dict[str, Any], entry: dict[str, Any], vendor: str) -> None:
    """Translate an ``nvidia`` or ``hygon`` section onto ``entry`` (a copy of the shipped entry)."""
    section = reader.mapping(raw, vendor)
    res = entry.setdefault("resources", {})
    for key, role in (("resourceCountName", "count"), ("resourceMemoryName", "memory"), ("resourceCoreName", "cores")):
        name = reader.resource(section, key, vendor)
        if name is not None:
            res[role] = name
    pct = reader.resource(section, "resourceMemoryPercentageName", vendor)
    if pct is not None:
        res["unsupported"] = {
            pct: "a percentage of a card's memory cannot be expressed as a DRA capacity request at admission; "
            f"request an absolute {res.get('memory')} in MiB instead"
        }
    prio = reader.resource(section, "resourcePriorityName", vendor)
    if prio is not None:
        res["ignored"] = [prio]
    for key, target in _ENTRY_KEYS.items():
        value = reader.string(section, key, vendor)
        if value is not None:
            entry[target] = value
    ann = entry.setdefault("annotations", {})
    for key, target in _ANNOTATION_KEYS.items():
        value = reader.string(section, key, vendor)
        if value is not None:
            ann[target] = value
    defaults = entry.setdefault("defaults", {})
    memory = reader.integer(section, "defaultMemory", vendor)
    if memory is not None:
        defaults["memory"] = memory or None  # HAMi: 0 = the whole card, i.e. no memory request
    cores = reader.integer(section, "defaultCores", vendor)
    if cores is not None:
        if cores > 100:
            raise UserError(f"{reader.source}: {vendor}.defaultCores must be 0..100 (percent), got {cores}")
        defaults["cores"] = cores
    reference = reader.integer(section, "referenceComputeUnits", vendor, minimum=1)
    if reference is not None:
        entry["computeUnits"] = {"reference": reference}
    factor = section.get("memoryFactor")
    if factor is not None and factor != 1:
        reader.note(f"{vendor}.memoryFactor", "ignored", f"{factor!r}: {_CHIP_IGNORED['memoryFactor']}")
    handled = {
        "resourceCountName", "resourceMemoryName", "resourceCoreName", "resourceMemoryPercentageName",
        "resourcePriorityName", "deviceClassName", "draDriverName", "requestName", "defaultMemory",
        "defaultCores", "referenceComputeUnits", "memoryFactor", *_ANNOTATION_KEYS,
    }
    for key in section:
        if key in handled:
            continue
        if key in _IGNORED_GPU_KEYS:
            reader.note(f"{vendor}.{key}", "ignored", _IGNORED_GPU_KEYS[key])
        else:
            reader.note(f"{vendor}.{key}", "unknown", "not a key of HAMi's device config for this vendor; not applied")


@dataclass
class _Chip:
    word: str
    product: str | None = None
    count: str | None = None
    memory: str | None = None
    cores: str | None = None
    spec: dict[str, int] = field(default_factory=dict)


_CHIP_KEYS = ("commonWord", "chipName", "resourceName", "resourceMemoryName", "resourceCoreName")
_CHIP_SPEC_KEYS = {"memoryCapacity": "memoryMiB", "memoryAllocatable": "allocatableMiB", "aiCore": "aiCores"}


def _chip(reader: _Reader, raw: Any, path: str, names: bool) -> _Chip:
    """One chip entry (``ascend.devices[i]`` or ``vnpus[i]``); ``names``: its resource names count."""
    item = reader.mapping(raw, path)
    word = reader.string(item, "commonWord", path)
    count = reader.string(item, "resourceName", path)
    if word is None and count:
        word = count.rsplit("/", 1)[-1]
    if word is None:
        raise UserError(f"{reader.source}: {path} needs commonWord (e.g. Ascend310P) or resourceName")
    if not re.fullmatch(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?", word):
        raise UserError(f"{reader.source}: {path}.commonWord {word!r} is not a valid chip word such as Ascend310P")
    chip = _Chip(word=word, product=reader.string(item, "chipName", path))
    if names:
        chip.count = reader.resource(item, "resourceName", path)
        chip.memory = reader.resource(item, "resourceMemoryName", path)
        chip.cores = reader.resource(item, "resourceCoreName", path)
    for key, target in _CHIP_SPEC_KEYS.items():
        value = reader.integer(item, key, path)
        if value is not None:
            chip.spec[target] = value
    for key in item:
        if key in _CHIP_KEYS or key in _CHIP_SPEC_KEYS:
            continue
        if key == "memoryFactor" and item[key] == 1:
            continue
        if key in _CHIP_IGNORED:
            reader.note(f"{path}.{key}", "ignored", _CHIP_IGNORED[key])
        else:
            reader.note(f"{path}.{key}", "unknown", "not a key of a HAMi Ascend chip entry; not applied")
    return chip


def _vnpu_list(reader: _Reader, raw: Any) -> tuple[list[Any], str]:
    """HAMi writes ``vnpus`` as a list, or as ``{hamiVnpuCore, configs: [...]}``."""
    if isinstance(raw, list):
        return raw, "vnpus"
    section = reader.mapping(raw, "vnpus")
    for key in section:
        if key == "hamiVnpuCore":
            reader.note("vnpus.hamiVnpuCore", "ignored", "dralab always serves Ascend through HAMivNPUCore devices")
        elif key != "configs":
            reader.note(f"vnpus.{key}", "unknown", "not a key of HAMi's vnpus section; not applied")
    configs = section.get("configs") or []
    if not isinstance(configs, list):
        raise UserError(f"{reader.source}: vnpus.configs must be a list of chips")
    return configs, "vnpus.configs"


def _ascend(reader: _Reader, raw: Any, vnpus: Any, entry: dict[str, Any]) -> None:
    """Translate the ``ascend`` section (HAMi-DRA) and ``vnpus`` (HAMi's chip list) onto ``entry``."""
    section = reader.mapping(raw, "ascend")
    res = entry["resources"]
    templates = {"count": res["count"], "memory": res["memory"], "cores": res["cores"]}

    # the chip list: ascend.devices (HAMi-DRA) wins; else HAMi's vnpus; else the shipped chips
    described: list[_Chip] = []
    if vnpus is not None:
        items, path = _vnpu_list(reader, vnpus)
        # HAMi's chip list names the resources only when HAMi-DRA's ascend section does not
        names_from_vnpus = "devices" not in section and not section.get("resourceCountName")
        described = [_chip(reader, item, f"{path}[{i}]", names_from_vnpus) for i, item in enumerate(items)]
    chips: list[_Chip] = []
    devices = section.get("devices")
    if devices:
        if not isinstance(devices, list):
            raise UserError(f"{reader.source}: ascend.devices must be a list of chips")
        chips = [_chip(reader, item, f"ascend.devices[{i}]", True) for i, item in enumerate(devices)]
        by_word = {c.word: c for c in described}
        for chip in chips:
            extra = by_word.get(chip.word)
            if extra is not None:
                chip.spec = {**extra.spec, **chip.spec}
                chip.product = chip.product or extra.product
    elif section.get("resourceCountName"):
        # HAMi-DRA's legacy single-chip form
        count = reader.resource(section, "resourceCountName", "ascend")
        assert count is not None
        word = count.rsplit("/", 1)[-1] if "/" in count else "Ascend310P"
        chips = [_Chip(
            word=word,
            count=count,
            memory=reader.resource(section, "resourceMemoryName", "ascend") or f"{count}-memory",
            cores=reader.resource(section, "resourceCoreName", "ascend") or f"{count}-core",
        )]
        spec = next((c for c in described if c.word == word), None)
        if spec is not None:
            chips[0].spec, chips[0].product = spec.spec, spec.product
    else:
        chips = described

    if chips:
        shipped = dict(entry.get("chips") or {})
        table_chips: dict[str, str] = {}
        chip_resources: dict[str, dict[str, str]] = {}
        chip_specs: dict[str, dict[str, int]] = {}
        for chip in chips:
            product = chip.product or shipped.get(chip.word)
            if product is None:
                raise UserError(
                    f"{reader.source}: Ascend chip {chip.word} has no chipName (the productName npu-smi reports, "
                    "e.g. 310P3); add chipName to its entry"
                )
            if chip.word in table_chips:
                raise UserError(f"{reader.source}: Ascend chip {chip.word} is listed twice")
            table_chips[chip.word] = str(product)
            names: dict[str, str] = {}
            for role, actual in (("count", chip.count), ("memory", chip.memory), ("cores", chip.cores)):
                default = templates[role].replace("{chip}", chip.word)
                # an absent name keeps HAMi's own naming (huawei.com/<chip>-memory, -core)
                if actual is not None and actual != default:
                    names[role] = actual
            if names:
                chip_resources[chip.word] = names
            if chip.spec:
                chip_specs[chip.word] = chip.spec
        entry["chips"] = table_chips
        entry["chipResources"] = chip_resources
        entry["chipSpecs"] = chip_specs

    for key, target in _ENTRY_KEYS.items():
        value = reader.string(section, key, "ascend")
        if value is not None:
            entry[target] = value
    ann = entry["annotations"]
    for key in ("useTypeAnnotation", "noUseTypeAnnotation"):
        value = reader.string(section, key, "ascend")
        if value is not None:
            ann[_ANNOTATION_KEYS[key]] = value
    for key in ("useUUIDAnnotation", "noUseUUIDAnnotation"):
        value = reader.string(section, key, "ascend")
        if value is not None:
            if "{chip}" not in value and len(entry.get("chips") or {}) > 1:
                reader.note(
                    f"ascend.{key}", "conflict",
                    "one annotation for several chips: write it with {chip} (e.g. hami.io/use-{chip}-uuid)",
                )
            ann[_ANNOTATION_KEYS[key]] = value
    handled = {
        "devices", "deviceClassName", "draDriverName", "requestName", "resourceCountName",
        "resourceMemoryName", "resourceCoreName", *_ANNOTATION_KEYS,
    }
    for key in section:
        if key in handled:
            continue
        if key == "runtimeClassName":
            reader.note("ascend.runtimeClassName", "ignored", _CHIP_IGNORED["runtimeClassName"])
        else:
            reader.note(f"ascend.{key}", "unknown", "not a key of HAMi-DRA's ascend section; not applied")


def translate(doc: dict[str, Any], builtin: dict[str, Any], source: str = "<hami-config>") -> Translation:
    """HAMi's device config ``doc`` over the shipped vendor table ``builtin`` (vendor key -> entry).

    Returns complete entries for every vendor of ``builtin`` (untouched ones copied), the enabled
    list from ``vendors:`` (None when the file has none), and the findings.
    """
    reader = _Reader(source)
    doc = reader.mapping(doc, "the document")
    vendors = copy.deepcopy(builtin)
    for key in ("nvidia", "hygon"):
        if key in doc and key in vendors:
            _gpu_like(reader, doc[key], vendors[key], key)
    if ("ascend" in doc or "vnpus" in doc) and "ascend" in vendors:
        _ascend(reader, doc.get("ascend"), doc.get("vnpus"), vendors["ascend"])

    enabled: list[str] | None = None
    if "vendors" in doc:
        listed = doc["vendors"]
        if not isinstance(listed, list) or not all(isinstance(v, str) for v in listed):
            raise UserError(f"{source}: vendors must be a list of vendor names such as [nvidia, ascend]")
        enabled = []
        for index, name in enumerate(listed):
            if name in enabled:
                raise UserError(f"{source}: vendors lists {name!r} twice")
            if name in vendors:
                enabled.append(name)
            else:
                reader.note(
                    f"vendors[{index}]", "unsupported",
                    f"dralab has no vendor {name!r} (it serves {', '.join(sorted(vendors))}); not enabled",
                )
        if not enabled:
            raise UserError(f"{source}: vendors enables none of dralab's vendors ({', '.join(sorted(vendors))})")
    if "vendor" in doc:
        reader.note("vendor", "ignored", "HAMi-DRA removed the single 'vendor' key; list them under 'vendors'")
    for key in doc:
        if key in (*SUPPORTED_VENDORS, "vnpus", "vendors", "vendor"):
            continue
        if key in OTHER_VENDOR_SECTIONS:
            reader.note(key, "unsupported", "dralab has no DRA conversion for this vendor; its pods are left alone")
        else:
            reader.note(key, "unknown", "not a section of HAMi's device config; not applied")
    return Translation(vendors=vendors, enabled=enabled, findings=reader.findings, source=source)
