"""The cluster side of ``dralab migrate``: list what a plan needs, and carry out a plan's actions."""

from __future__ import annotations

from typing import Any

from dralab.kube import Kube, KubeError
from dralab.kube.paths import CLAIMS_PATH, claims_path, pods_path, segment
from dralab.migrate.plan import MigrationPlan, Snapshot
from dralab.model.podclaims import claim_names
from dralab.webhook.controllers.adoption import adoption_patch

ADMISSION = "/apis/admissionregistration.k8s.io/v1"


def snapshot(api: Kube, namespace: str | None = None) -> Snapshot:
    """Every object the plan reads, listed once (pods and claims of one ``namespace`` when given)."""

    def items(path: str) -> list[dict[str, Any]]:
        try:
            return api.list_all(path)[0]
        except KubeError as exc:
            if exc.status == 404:  # an API the cluster does not serve
                return []
            raise

    return Snapshot(
        pods=items(pods_path(namespace)),
        claims=items(claims_path(namespace) if namespace else CLAIMS_PATH),
        device_classes=items("/apis/resource.k8s.io/v1/deviceclasses"),
        mutating=items(f"{ADMISSION}/mutatingwebhookconfigurations"),
        validating=items(f"{ADMISSION}/validatingwebhookconfigurations"),
    )


def apply_plan(api: Kube, plan: MigrationPlan, snap: Snapshot, remove_webhooks: bool = False) -> list[str]:
    """Carry out ``plan``'s actions; returns one line per action taken (or skipped, and why)."""
    claims = {f"{c['metadata'].get('namespace')}/{c['metadata'].get('name')}": c for c in snap.claims}
    pods = {f"{p['metadata'].get('namespace')}/{p['metadata'].get('name')}": p for p in snap.pods}
    done: list[str] = []
    for action in plan.actions:
        kind = action["action"]
        try:
            if kind == "adopt-claim":
                ns, name = action["claim"].split("/", 1)
                api.patch(claims_path(ns, name), adoption_patch(claims[action["claim"]], pods[action["pod"]]))
                done.append(f"adopted {action['claim']} (owner {action['pod']})")
            elif kind == "delete-claim":
                ns, name = action["claim"].split("/", 1)
                live = api.list(pods_path(ns)).get("items") or []
                if any(name in claim_names(p, generated=False) for p in live):
                    done.append(f"kept {action['claim']}: a pod references it now")
                    continue
                api.delete(claims_path(ns, name), uid=action.get("uid"))
                done.append(f"deleted {action['claim']}")
            elif kind == "delete-webhook-configuration":
                if not remove_webhooks:
                    done.append(f"kept {action['kind']}/{action['name']} (pass --remove-hami-webhooks)")
                    continue
                plural = action["kind"].lower() + "s"
                api.delete(f"{ADMISSION}/{plural}/{segment(action['name'])}")
                done.append(f"deleted {action['kind']}/{action['name']}")
        except KubeError as exc:
            if exc.status in (404, 409):
                done.append(f"skipped {kind} {action.get('claim') or action.get('name')}: changed meanwhile")
            else:
                done.append(f"FAILED {kind} {action.get('claim') or action.get('name')}: {exc.message}")
    return done
