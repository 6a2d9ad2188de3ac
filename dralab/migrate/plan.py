"""What a cluster switching from HAMi / HAMi-DRA to dralab holds, and what ``migrate apply`` would change.

Pure: a :class:`Snapshot` of listed objects in, a :class:`MigrationPlan` out. The plan lists pods
still asking for HAMi resources, pods HAMi-DRA converted, every claim of a class dralab serves with
its owner and fate, the DeviceClasses and admission webhooks of HAMi, HAMi-DRA and dralab, and the
conflicts between them (two mutating webhooks converting the same resources; a DeviceClass whose
``extendedResourceName`` is a resource the webhook strips). Actions are what apply would do.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dralab.model.convert import DRA_LABEL, Converter
from dralab.model.denials import Denied
from dralab.model.objects import MANAGED_BY
from dralab.model.podclaims import claim_names
from dralab.model.vendors import VendorTable
from dralab.webhook.controllers.adoption import AdoptionSettings, fingerprint
from dralab.webhook.controllers.adoption import plan as adoption_plan

HAMI_MARKERS = ("hami", "project-hami.io")


@dataclass
class Snapshot:
    """The listed objects a plan is made from (plain dicts as the API returns them)."""

    pods: list[dict[str, Any]] = field(default_factory=list)
    claims: list[dict[str, Any]] = field(default_factory=list)
    device_classes: list[dict[str, Any]] = field(default_factory=list)
    mutating: list[dict[str, Any]] = field(default_factory=list)
    validating: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class MigrationPlan:
    """Findings by topic plus the actions ``migrate apply`` would take (each a dict with ``action``)."""

    hami_pods: list[dict[str, Any]] = field(default_factory=list)
    hami_dra_pods: list[dict[str, Any]] = field(default_factory=list)
    claims: list[dict[str, Any]] = field(default_factory=list)
    device_classes: list[dict[str, Any]] = field(default_factory=list)
    webhooks: list[dict[str, Any]] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    actions: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "summary": {
                "podsWithHamiResources": len(self.hami_pods),
                "hamiDraPods": len(self.hami_dra_pods),
                "claims": len(self.claims),
                "claimsToAdopt": sum(1 for a in self.actions if a["action"] == "adopt-claim"),
                "claimsToDelete": sum(1 for a in self.actions if a["action"] == "delete-claim"),
                "conflicts": len(self.conflicts),
            },
            "podsWithHamiResources": self.hami_pods,
            "hamiDraPods": self.hami_dra_pods,
            "claims": self.claims,
            "deviceClasses": self.device_classes,
            "webhooks": self.webhooks,
            "conflicts": self.conflicts,
            "actions": self.actions,
        }


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("metadata") or {}


def _ref(obj: dict[str, Any]) -> str:
    m = _meta(obj)
    return f"{m['namespace']}/{m.get('name', '')}" if m.get("namespace") else m.get("name", "")


def _is_dralab(obj: dict[str, Any]) -> bool:
    labels = _meta(obj).get("labels") or {}
    return all(labels.get(k) == v for k, v in MANAGED_BY.items()) or _meta(obj).get("name", "").startswith("dralab")


def _mentions_hami(obj: dict[str, Any], hook: dict[str, Any] | None = None) -> bool:
    texts = [_meta(obj).get("name", "")]
    if hook is not None:
        texts.append(hook.get("name", ""))
        client = hook.get("clientConfig") or {}
        service = client.get("service") or {}
        texts += [service.get("name", ""), service.get("namespace", ""), client.get("url", "")]
    return any(marker in t.lower() for t in texts for marker in HAMI_MARKERS)


def _covers_pod_create(hook: dict[str, Any]) -> bool:
    for rule in hook.get("rules") or []:
        groups = rule.get("apiGroups") or []
        resources = rule.get("resources") or []
        operations = rule.get("operations") or []
        if ("" in groups or "*" in groups) and ("pods" in resources or "*" in resources) and (
            "CREATE" in operations or "*" in operations
        ):
            return True
    return False


def _pods(snapshot: Snapshot, converter: Converter, out: MigrationPlan) -> None:
    for pod in snapshot.pods:
        try:
            fields = converter.leftovers(pod)
        except Denied:
            fields = []
        if fields:
            out.hami_pods.append({
                "pod": _ref(pod),
                "fields": fields,
                "note": "admitted before dralab (device plugin path); it keeps its resources until recreated",
            })
        labels = _meta(pod).get("labels") or {}
        if labels.get(DRA_LABEL) == "true":
            out.hami_dra_pods.append({"pod": _ref(pod), "claims": claim_names(pod, generated=False)})


def _claims(snapshot: Snapshot, table: VendorTable, settings: AdoptionSettings, now: float, out: MigrationPlan) -> None:
    classes = {v.device_class for v in table.enabled_vendors()}
    decided = adoption_plan(snapshot.claims, snapshot.pods, table, settings, now)
    adopt = {_ref(c): p for c, p in decided.adopt}
    reap = {_ref(c) for c in decided.reap}
    held = {_ref(c) for c in decided.held}
    refs: dict[str, list[str]] = {}
    for pod in snapshot.pods:
        ns = _meta(pod).get("namespace", "")
        for name in claim_names(pod, generated=False):
            refs.setdefault(f"{ns}/{name}", []).append(_meta(pod).get("name", ""))
    for claim in snapshot.claims:
        requests = ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []
        claim_classes = {(r.get("exactly") or {}).get("deviceClassName") for r in requests}
        if not claim_classes & classes:
            continue
        ref = _ref(claim)
        owners = [f"{o.get('kind')}/{o.get('name')}" for o in _meta(claim).get("ownerReferences") or []]
        if _is_dralab(claim):
            origin, fate = "dralab", "kept (dralab's janitor owns it)"
        elif fingerprint(claim, table, settings) is not None:
            origin = "hami-dra"
            if ref in adopt:
                fate = f"adopt: owner Pod/{_meta(adopt[ref]).get('name')}"
                out.actions.append({"action": "adopt-claim", "claim": ref, "pod": _ref(adopt[ref]),
                                    "podUID": _meta(adopt[ref]).get("uid")})
            elif ref in reap:
                fate = "delete: no live pod references or holds it"
                out.actions.append({"action": "delete-claim", "claim": ref, "uid": _meta(claim).get("uid")})
            elif ref in held:
                fate = "kept: reserved for a live pod"
            else:
                fate = "kept: within the grace period or referenced by a pod without hami.io/dra"
        else:
            origin, fate = ("other", "kept (owned)") if owners else ("other", "kept (not HAMi-DRA-shaped)")
        allocated = bool((claim.get("status") or {}).get("allocation"))
        out.claims.append({"claim": ref, "origin": origin, "owners": owners, "referencedBy": refs.get(ref, []),
                           "allocated": allocated, "fate": fate})


def _device_classes(snapshot: Snapshot, table: VendorTable, converter: Converter, out: MigrationPlan) -> None:
    ours = {v.device_class: v for v in table.enabled_vendors()}
    converted = set(converter._roles)
    for dc in snapshot.device_classes:
        name = _meta(dc).get("name", "")
        spec = dc.get("spec") or {}
        exprs = [(s.get("cel") or {}).get("expression", "") for s in spec.get("selectors") or []]
        row: dict[str, Any] = {"name": name, "dralab": _is_dralab(dc), "hami": any(
            m in name or any(m in e for e in exprs) for m in HAMI_MARKERS
        )}
        extended = spec.get("extendedResourceName")
        if extended:
            row["extendedResourceName"] = extended
            if extended in converted:
                out.conflicts.append(
                    f"DeviceClass {name} declares extendedResourceName {extended}, which dralab's webhook converts: "
                    "with DRAExtendedResource on, pods dralab converts use claims and pods it leaves alone "
                    "(opted out, excluded namespaces) are served by the scheduler through this class"
                )
        if name in ours and not row["dralab"]:
            vendor = ours[name]
            if vendor.class_selector() not in exprs:
                out.conflicts.append(
                    f"DeviceClass {name} exists (not dralab's) with selectors {exprs}; dralab expects "
                    f"{vendor.class_selector()!r}: check it selects the same devices before switching"
                )
            row["usedByDralab"] = True
        if row["hami"] or row["dralab"] or extended or name in ours:
            out.device_classes.append(row)


def _webhooks(snapshot: Snapshot, out: MigrationPlan) -> None:
    mutators: list[tuple[str, str, bool]] = []
    for kind, items in (("MutatingWebhookConfiguration", snapshot.mutating),
                        ("ValidatingWebhookConfiguration", snapshot.validating)):
        for cfg in items:
            name = _meta(cfg).get("name", "")
            ours = _is_dralab(cfg)
            for hook in cfg.get("webhooks") or []:
                hami = not ours and _mentions_hami(cfg, hook)
                if not (hami or ours):
                    continue
                pods = _covers_pod_create(hook)
                out.webhooks.append({"kind": kind, "name": name, "webhook": hook.get("name", ""),
                                     "owner": "dralab" if ours else "hami", "podCreate": pods,
                                     "failurePolicy": hook.get("failurePolicy", "Fail")})
                if kind.startswith("Mutating") and pods:
                    mutators.append((name, hook.get("name", ""), ours))
    hami_mutators = [m for m in mutators if not m[2]]
    dralab_mutators = [m for m in mutators if m[2]]
    for name, hook, _ in hami_mutators:
        if dralab_mutators:
            out.conflicts.append(
                f"MutatingWebhookConfiguration {name} ({hook}) and dralab's both mutate pod CREATE for HAMi "
                "resources: whichever runs first converts them; remove HAMi-DRA's once dralab is ready"
            )
        out.actions.append({"action": "delete-webhook-configuration", "kind": "MutatingWebhookConfiguration",
                            "name": name, "only": "with --remove-hami-webhooks"})
    for row in out.webhooks:
        if row["owner"] == "hami" and row["kind"].startswith("Validating"):
            out.actions.append({"action": "delete-webhook-configuration", "kind": row["kind"], "name": row["name"],
                                "only": "with --remove-hami-webhooks"})
    unique: dict[tuple[str, ...], dict[str, Any]] = {}
    for action in out.actions:
        key = (action["action"], action.get("kind", ""), action.get("name", ""), action.get("claim", ""))
        unique.setdefault(key, action)
    out.actions[:] = list(unique.values())


def build_plan(
    snapshot: Snapshot, table: VendorTable, settings: AdoptionSettings, now: float
) -> MigrationPlan:
    """The whole read-only plan for ``snapshot`` under dralab's vendor ``table``."""
    converter = Converter(table)
    out = MigrationPlan()
    _pods(snapshot, converter, out)
    _claims(snapshot, table, settings, now, out)
    _device_classes(snapshot, table, converter, out)
    _webhooks(snapshot, out)
    return out


def render_text(plan: MigrationPlan) -> str:
    """A short human summary of the plan (the YAML form carries every detail)."""
    d = plan.as_dict()
    lines = [f"{k}: {v}" for k, v in d["summary"].items()]
    sections: tuple[tuple[str, str, Callable[[dict[str, Any]], str]], ...] = (
        ("pods still asking for HAMi resources", "podsWithHamiResources", lambda r: f"{r['pod']} {r['fields'][0]}"),
        ("claims", "claims", lambda r: f"{r['claim']} [{r['origin']}] owners={r['owners'] or '-'} -> {r['fate']}"),
        ("device classes", "deviceClasses", lambda r: f"{r['name']} " + ", ".join(
            k for k in ("dralab", "hami", "usedByDralab") if r.get(k)) + (
            f" extendedResourceName={r['extendedResourceName']}" if r.get("extendedResourceName") else "")),
        ("webhooks", "webhooks", lambda r: f"{r['kind']}/{r['name']} {r['webhook']} owner={r['owner']} "
                                           f"podCreate={r['podCreate']}"),
    )
    for title, key, fmt in sections:
        if d[key]:
            lines.append(f"\n{title}:")
            lines += [f"  {fmt(r)}" for r in d[key]]
    if d["conflicts"]:
        lines.append("\nconflicts:")
        lines += [f"  - {c}" for c in d["conflicts"]]
    lines.append("\nmigrate apply would:" if d["actions"] else "\nmigrate apply would change nothing")
    for a in d["actions"]:
        target = a.get("claim") or f"{a.get('kind')}/{a.get('name')}"
        extra = f" (owner {a['pod']})" if a.get("pod") else (f" ({a['only']})" if a.get("only") else "")
        lines.append(f"  {a['action']} {target}{extra}")
    return "\n".join(lines) + "\n"
