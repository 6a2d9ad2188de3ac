"""The Helm chart seen from Python: its location, its values, and how values map onto dralab's config.

``config_from_values`` is the Python twin of the chart's ``dralab.config`` template: the tests
render the chart and compare, so the chart can never ship a config ``dralab.config`` rejects.
``chart_values`` is what the Pulumi program and the harness pass to a release.
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path
from typing import Any

import yaml

from dralab import yamlio
from dralab.driver.devices import BACKENDS
from dralab.errors import UserError
from dralab.model.vendors import builtin_table_data
from dralab_kit import CHECKOUT

# What the chart reads: the DeviceClass template (driver, deviceClass, typeAttribute) and the webhooks'
# matchConditions (resources: the HAMi resource names, whose domains select the pods sent to dralab).
VENDOR_FIELDS = ("driver", "deviceClass", "typeAttribute", "resources")
LIFECYCLES = ("claim", "template")


def chart_dir() -> Path:
    """``charts/dralab`` of this source tree (the chart is not part of the Python distribution)."""
    path = CHECKOUT / "charts" / "dralab"
    if not (path / "Chart.yaml").is_file():
        raise UserError(f"the dralab chart is not at {path}: run from a dralab source checkout")
    return path


def default_values() -> dict[str, Any]:
    """The chart's values.yaml as data."""
    return yamlio.load_file(chart_dir() / "values.yaml")


def chart_vendor_file() -> str:
    """The text of ``charts/dralab/files/vendors.yaml``: the vendor-table fields the chart needs.

    Generated from dralab/model/vendors.yaml (``python -m dralab_kit.provision.chart sync``); a unit
    test fails when the two drift apart.
    """
    data = {key: {f: entry[f] for f in VENDOR_FIELDS} for key, entry in builtin_table_data().items()}
    header = "# Generated from dralab/model/vendors.yaml by `python -m dralab_kit.provision.chart sync`; do not edit.\n"
    return header + yaml.safe_dump({"vendors": data}, sort_keys=True)


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def merged_values(overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """values.yaml with ``overrides`` merged over it, as ``helm install -f`` would."""
    return deep_merge(default_values(), overrides or {})


def enforcement_library(driver_values: dict[str, Any]) -> str:
    """The host path of the enforcement library the chart configures (installed vcore by default)."""
    if driver_values.get("enforcementLibrary"):
        return str(driver_values["enforcementLibrary"])
    return str(driver_values["enforcementLibraryDir"]).rstrip("/") + "/libvcore.so"


def metrics_authorization(values: dict[str, Any]) -> bool:
    """``metrics.authorization`` (default true): the webhook's and the driver's ``metricsAuthorization``."""
    return bool((values.get("metrics") or {}).get("authorization", True))


def config_from_values(values: dict[str, Any]) -> dict[str, Any]:
    """dralab's config document as the chart renders it from complete ``values``."""
    v, w, d = values["vendors"], values["webhook"], values["driver"]
    return {
        "vendors": {"enabled": list(v["enabled"]), "overrides": dict(v.get("overrides") or {})},
        "webhook": {
            "lifecycle": w["lifecycle"],
            "claimGracePeriodSeconds": int(w["claimGracePeriodSeconds"]),
            "excludeNamespaces": list(w["excludeNamespaces"]),
            "optOutLabel": w["optOutLabel"],
            "failurePolicy": w["failurePolicy"],
            "namespaceSelector": dict(w.get("namespaceSelector") or {}),
            "objectSelector": dict(w.get("objectSelector") or {}),
            "maxClaimsPerPod": int(w["maxClaimsPerPod"]),
            "claimCreateRatePerSecond": w["claimCreateRatePerSecond"],
            "claimCreateBurst": int(w["claimCreateBurst"]),
            "admissionDeadlineSeconds": w["admissionDeadlineSeconds"],
            "metricsAuthorization": metrics_authorization(values),
        },
        "driver": {
            "backend": d["backend"],
            "cdiDir": d["cdiDir"],
            "pluginDir": d["pluginDir"],
            "registryDir": d["registryDir"],
            "stateDir": d["stateDir"],
            "enforcementLibrary": enforcement_library(d),
            "enforcement": d["enforcement"],
            "injectDeviceNodes": d["injectDeviceNodes"],
            "metricsAuthorization": metrics_authorization(values),
        },
        "migration": _migration_config(values),
    }


def _migration_config(values: dict[str, Any]) -> dict[str, Any]:
    """The migration section: a HAMi device config (text or ConfigMap) turns migration mode on."""
    m = values.get("migration") or {}
    hami = bool(m.get("hamiConfig")) or bool((m.get("hamiConfigMap") or {}).get("name"))
    return {
        "enabled": bool(m.get("enabled")) or hami,
        "adoptClaims": m.get("adoptClaims"),
        "claimLabels": dict(m.get("claimLabels") or {}),
        "claimAnnotations": dict(m.get("claimAnnotations") or {}),
        "graceSeconds": int(m.get("graceSeconds", 30)),
        "volcanoJobs": bool(m.get("volcanoJobs")),
    }


def chart_values(
    *,
    backend: str = "fake",
    vendors: list[str] | None = None,
    lifecycle: str = "claim",
    image: str | None = None,
    webhook_replicas: int | None = None,
    devices: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Values for a dralab release: only what differs from values.yaml.

    ``image`` is ``repository[:tag]``. The ascend backend enables only the Ascend vendor unless
    ``vendors`` says otherwise (Lab 20's ``deviceVendors: [ascend]``), likewise nvidia.
    """
    if backend not in BACKENDS:
        raise UserError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if lifecycle not in LIFECYCLES:
        raise UserError(f"claim lifecycle must be one of {', '.join(LIFECYCLES)}, got {lifecycle!r}")
    values: dict[str, Any] = {"driver": {"backend": backend}, "webhook": {"lifecycle": lifecycle}}
    if vendors is None and backend != "fake":
        vendors = [backend]
    if vendors is not None:
        known = set(builtin_table_data())
        unknown = [k for k in vendors if k not in known]
        if unknown:
            raise UserError(f"unknown vendor(s) {', '.join(unknown)}: choose from {', '.join(sorted(known))}")
        values["vendors"] = {"enabled": list(vendors)}
    if backend == "fake":
        values["driver"]["privileged"] = False
    if image:
        repo, tag = split_image(image)
        values["image"] = {"repository": repo, **({"tag": tag} if tag else {})}
    if webhook_replicas is not None:
        values["webhook"]["replicas"] = webhook_replicas
    if devices:
        values["driver"]["devices"] = devices
    return deep_merge(values, extra or {})


def split_image(image: str) -> tuple[str, str]:
    """``registry:5000/repo:tag`` -> (``registry:5000/repo``, ``tag``); a digest stays on the repository."""
    if "@" in image:
        return image, ""
    slash = image.rfind("/")
    colon = image.rfind(":")
    if colon > slash:
        return image[:colon], image[colon + 1 :]
    return image, ""


def main(argv: list[str] | None = None) -> int:
    """``python -m dralab_kit.provision.chart sync|check``: regenerate or verify the chart's vendor file."""
    parser = argparse.ArgumentParser(
        prog="python -m dralab_kit.provision.chart",
        description="Keep charts/dralab/files/vendors.yaml in step with the vendor table. "
        "Example: python -m dralab_kit.provision.chart sync",
    )
    parser.add_argument("action", choices=["sync", "check"])
    args = parser.parse_args(argv)
    target = chart_dir() / "files" / "vendors.yaml"
    text = chart_vendor_file()
    if args.action == "sync":
        from dralab.util import atomic_write

        atomic_write(target, text)
        return 0
    if not target.is_file() or target.read_text() != text:
        print(f"{target} is out of date: run python -m dralab_kit.provision.chart sync", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
