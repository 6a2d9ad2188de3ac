"""``dralab config show``: the vendor table a config (and a HAMi device config) results in."""

from __future__ import annotations

from typing import Any

import click
import yaml

from dralab.config import Config, load_config


def vendor_table_view(cfg: Config) -> dict[str, Any]:
    """The effective vendor table as plain data: what the webhook converts and what it asks for."""
    vendors: dict[str, Any] = {}
    for vendor in cfg.vendors.vendors.values():
        sets = []
        for rs in vendor.resource_sets():
            entry: dict[str, Any] = {}
            if rs.chip:
                entry["chip"] = rs.chip
                entry["productName"] = rs.product_name
            entry.update({"count": rs.count, "memory": rs.memory, "cores": rs.cores, "claimSuffix": rs.claim_suffix})
            entry["annotations"] = {
                "useUUID": rs.use_uuid, "noUseUUID": rs.no_use_uuid,
                "useType": rs.use_type, "noUseType": rs.no_use_type,
            }
            spec = (vendor._raw.get("chipSpecs") or {}).get(rs.chip) if rs.chip else None
            if spec:
                entry["chipSpec"] = dict(spec)
            sets.append(entry)
        vendors[vendor.key] = {
            "enabled": vendor.key in cfg.vendors.enabled,
            "driver": vendor.driver,
            "deviceClass": vendor.device_class,
            "requestName": vendor.request_name,
            "defaults": {"cores": vendor.default_cores, "memoryMiB": vendor.default_memory_mib},
            "computeUnitsReference": vendor.compute_reference_units,
            "denied": dict(vendor.unsupported),
            "ignored": list(vendor.ignored),
            "resources": sets,
        }
    return {"source": cfg.source, "enabled": list(cfg.vendors.enabled), "vendors": vendors}


@click.group("config")
def config() -> None:
    """Inspect dralab's configuration."""


@config.command("show")
@click.option("--config", "config_path", default=None, type=click.Path(dir_okay=False), help="dralab config file.")
@click.option(
    "--hami-config",
    default=None,
    type=click.Path(dir_okay=False),
    help="HAMi's device-config.yaml (or the ConfigMap holding it), translated into the vendor table.",
)
def show(config_path: str | None, hami_config: str | None) -> None:
    """Print the effective vendor table; what a HAMi config did not translate goes to stderr.

    \b
    Example:
      kubectl -n kube-system get configmap hami-scheduler-device -o yaml > hami.yaml
      dralab config show --hami-config hami.yaml
    """
    cfg = load_config(config_path, hami_config)
    for line in cfg.notes:
        click.echo(f"note: {line}", err=True)
    view = vendor_table_view(cfg)
    if hami_config:
        view = {"hamiConfig": hami_config, **view}
    click.echo(yaml.safe_dump(view, sort_keys=False, width=4096), nl=False)
