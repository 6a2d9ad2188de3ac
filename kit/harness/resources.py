"""How a lab names Kubernetes objects: resource references (pure, no I/O).

A reference is a mapping ``{apiVersion, kind, name, namespace, labelSelector, fieldSelector}``
or the shorthand ``Kind`` / ``Kind/name``. Without ``name`` it names a list. ``apiVersion``
may be left out for the kinds in :data:`KNOWN_KINDS` (``dralab.kube.kinds``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from dralab.errors import UserError
from dralab.kube.kinds import CLUSTER_SCOPED, KINDS

# the kinds a lab may name without apiVersion, and those never in a namespace: the one kind table's
KNOWN_KINDS: dict[str, str] = {name: kind.api_version for name, kind in KINDS.items()}

_REF_KEYS = {"apiVersion", "kind", "name", "namespace", "labelSelector", "fieldSelector"}


@dataclass(frozen=True)
class Ref:
    """One object (``name`` set) or a filtered list of objects of one kind."""

    api_version: str
    kind: str
    name: str | None = None
    namespace: str | None = None
    label_selector: str | None = None
    field_selector: str | None = None

    @property
    def is_list(self) -> bool:
        return self.name is None

    @property
    def namespaced(self) -> bool:
        return self.kind not in CLUSTER_SCOPED

    def in_namespace(self, namespace: str | None) -> Ref:
        """This reference with ``namespace`` filled in where the kind is namespaced and none was given."""
        if self.namespaced and self.namespace is None and namespace:
            return replace(self, namespace=namespace)
        return self

    def describe(self) -> str:
        where = f" in {self.namespace}" if self.namespace else ""
        if self.name:
            return f"{self.kind} {self.name}{where}"
        filters = [f for f in (self.label_selector, self.field_selector) if f]
        extra = f" ({'; '.join(filters)})" if filters else ""
        return f"{self.kind} list{where}{extra}"


def api_version_of(kind: str, api_version: str | None, where: str) -> str:
    if api_version:
        return api_version
    if kind in KNOWN_KINDS:
        return KNOWN_KINDS[kind]
    raise UserError(f"{where}: kind {kind!r} needs an apiVersion (known without one: {', '.join(sorted(KNOWN_KINDS))})")


def parse_ref(raw: Any, where: str) -> Ref:
    """A Ref from a lab's mapping or ``Kind/name`` shorthand (values may still hold ``${vars}``)."""
    if isinstance(raw, str):
        kind, _, name = raw.partition("/")
        if not kind:
            raise UserError(f"{where}: {raw!r} is not a resource reference (write Kind or Kind/name)")
        return Ref(api_version=api_version_of(kind, None, where), kind=kind, name=name or None)
    if not isinstance(raw, Mapping):
        raise UserError(f"{where}: a resource reference is a mapping with kind (and name) or 'Kind/name'")
    unknown = sorted(set(raw) - _REF_KEYS)
    if unknown:
        raise UserError(f"{where}: unknown key(s) {', '.join(unknown)} (valid: {', '.join(sorted(_REF_KEYS))})")
    given = raw.get("kind")
    if not given:
        raise UserError(f"{where}: a resource reference needs 'kind'")
    return Ref(
        api_version=api_version_of(str(given), raw.get("apiVersion"), where),
        kind=str(given),
        name=str(raw["name"]) if raw.get("name") is not None else None,
        namespace=str(raw["namespace"]) if raw.get("namespace") is not None else None,
        label_selector=raw.get("labelSelector"),
        field_selector=raw.get("fieldSelector"),
    )


def ref_of(obj: Mapping[str, Any]) -> Ref:
    """The reference of a concrete object."""
    meta = obj.get("metadata") or {}
    return Ref(
        api_version=str(obj.get("apiVersion", "")),
        kind=str(obj.get("kind", "")),
        name=meta.get("name"),
        namespace=meta.get("namespace"),
    )
