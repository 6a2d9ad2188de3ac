"""``dralab migrate plan`` (read-only) and ``dralab migrate apply``."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click
import yaml

from dralab.config import load_config
from dralab.errors import UserError

if TYPE_CHECKING:
    from dralab.config import Config
    from dralab.kube import Kube
    from dralab.migrate.plan import MigrationPlan, Snapshot
    from dralab.webhook.controllers.adoption import AdoptionSettings

Command = TypeVar("Command", bound=Callable[..., Any])


def _settings(cfg: Config, grace_seconds: int | None) -> AdoptionSettings:
    from dralab.webhook.controllers.adoption import AdoptionSettings

    m = cfg.migration
    grace = m.grace_seconds if grace_seconds is None else grace_seconds
    return AdoptionSettings(dict(m.claim_labels), dict(m.claim_annotations), float(grace))


def _options(fn: Command) -> Command:
    fn = click.option("--kubeconfig", default=None, type=click.Path(dir_okay=False),
                      help="Default: in-cluster, then ~/.kube.")(fn)
    fn = click.option("--config", "config_path", default=None, type=click.Path(dir_okay=False),
                      help="dralab config file.")(fn)
    fn = click.option("--hami-config", default=None, type=click.Path(dir_okay=False),
                      help="HAMi's device-config.yaml: judge pods and claims by its resource names.")(fn)
    fn = click.option("-n", "--namespace", default=None,
                      help="Only this namespace's pods and claims (classes and webhooks are cluster-wide).")(fn)
    fn = click.option("--grace-seconds", default=None, type=click.IntRange(min=0),
                      help="How old an unreferenced HAMi-DRA claim must be to be deleted (default: config).")(fn)
    return fn


def _plan(kubeconfig: str | None, config_path: str | None, hami_config: str | None, namespace: str | None,
          grace_seconds: int | None) -> tuple[Kube, Snapshot, MigrationPlan]:
    from dralab.kube import Kube
    from dralab.migrate.apply import snapshot
    from dralab.migrate.plan import build_plan

    cfg = load_config(config_path, hami_config)
    api = Kube.from_kubeconfig(kubeconfig)
    snap = snapshot(api, namespace)
    return api, snap, build_plan(snap, cfg.vendors, _settings(cfg, grace_seconds), time.time())


@click.group("migrate")
def migrate() -> None:
    """Switch a cluster from HAMi / HAMi-DRA to dralab.

    \b
    Example:
      dralab migrate plan --hami-config hami-device-config.yaml
      dralab migrate apply --hami-config hami-device-config.yaml --remove-hami-webhooks
    """


@migrate.command("plan")
@_options
@click.option("-o", "--output", type=click.Choice(["text", "yaml", "json"]), default="text", show_default=True)
def plan_cmd(
    kubeconfig: str | None, config_path: str | None, hami_config: str | None, namespace: str | None,
    grace_seconds: int | None, output: str,
) -> None:
    """List HAMi pods, claims and owners, DeviceClasses, webhooks, conflicts and what apply would change.

    Reads only; changes nothing.
    """
    from dralab.migrate.plan import render_text

    _, _, the_plan = _plan(kubeconfig, config_path, hami_config, namespace, grace_seconds)
    if output == "yaml":
        click.echo(yaml.safe_dump(the_plan.as_dict(), sort_keys=False, width=4096), nl=False)
    elif output == "json":
        click.echo(json.dumps(the_plan.as_dict(), indent=2))
    else:
        click.echo(render_text(the_plan), nl=False)


@migrate.command("apply")
@_options
@click.option("--remove-hami-webhooks", is_flag=True, help="Also delete HAMi / HAMi-DRA webhook configurations.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def apply_cmd(
    kubeconfig: str | None, config_path: str | None, hami_config: str | None, namespace: str | None,
    grace_seconds: int | None, remove_hami_webhooks: bool, yes: bool,
) -> None:
    """Adopt HAMi-DRA's claims of live pods, delete the orphaned ones (and optionally HAMi's webhooks)."""
    from dralab.migrate.apply import apply_plan

    api, snap, the_plan = _plan(kubeconfig, config_path, hami_config, namespace, grace_seconds)
    if not the_plan.actions:
        click.echo("nothing to change")
        return
    if not yes and not click.confirm(f"apply {len(the_plan.actions)} action(s)?"):
        raise UserError("not applied (pass --yes to skip the question)")
    lines = apply_plan(api, the_plan, snap, remove_hami_webhooks)
    for line in lines:
        click.echo(line)
    if any(line.startswith("FAILED") for line in lines):
        raise UserError("some actions failed; run `dralab migrate plan` to see what is left")
