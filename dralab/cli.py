"""``dralab``: the command line.

Subcommand groups live next to the code they drive and are imported only when used, so
``dralab --help`` stays fast and a component's heavy imports (grpc, kubernetes) load on demand.
The product's commands are listed here; the lab kit (``dralab-kit``) adds its own (``cluster``,
``lab``, ``bench``, ...) through the ``dralab.commands`` entry points (:mod:`dralab.plugins`), so
they appear only where the kit is installed.
"""

from __future__ import annotations

import importlib
import sys

import click

from dralab import __version__, plugins
from dralab.errors import UserError

# command name -> "module:attribute" of a click command or group, and its line in --help
COMMANDS: dict[str, tuple[str, str]] = {
    "convert": ("dralab.webhook.cli:convert", "Convert HAMi-syntax pods to DRA pods and claims, offline."),
    "webhook": ("dralab.webhook.cli:webhook", "Run the admission webhook."),
    "driver": ("dralab.driver.cli:driver", "Run the DRA node driver or preview its slices and CDI specs."),
    "schema": ("dralab.schema_cli:schema", "Print the JSON Schema of a file format (config, and the kit's)."),
    "config": ("dralab.config_cli:config", "Show the effective configuration (also from a HAMi device config)."),
    "migrate": ("dralab.migrate.cli:migrate", "Plan and apply a switch from HAMi / HAMi-DRA to dralab."),
    "monitor": ("dralab.monitor.cli:monitor", "Serve per-device, per-pod and per-namespace allocation gauges."),
    "top": ("dralab.monitor.cli:top", "A live table of device shares: memory, cores and sharers."),
}

# The kit's commands, by name only: without the kit installed, asking for one says how to install it.
KIT_COMMANDS = ("bench", "cluster", "image", "infra", "lab")


def _load(ref: str) -> click.Command:
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


def _commands() -> dict[str, str]:
    """Every installed command: the kit's entry points, then the product's (a product name always wins)."""
    refs = plugins.entry_refs(plugins.COMMANDS_GROUP)
    refs.update({name: ref for name, (ref, _) in COMMANDS.items()})
    return refs


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_commands())

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        ref = _commands().get(name)
        if ref is None:
            if name in KIT_COMMANDS:
                raise UserError(
                    f"`dralab {name}` is a command of the lab kit ({plugins.KIT_DISTRIBUTION}), which is not "
                    f"installed: {plugins.KIT_INSTALL}"
                )
            return None
        return _load(ref)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name, ref in sorted(_commands().items()):
            if name in COMMANDS:
                rows.append((name, COMMANDS[name][1]))
                continue
            try:  # a kit command's line is its own short help: loaded for --help only
                rows.append((name, _load(ref).get_short_help_str(limit=120)))
            except Exception as exc:  # one broken plugin must not take --help down with it
                rows.append((name, f"(not loadable: {exc})"))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="dralab")
def cli() -> None:
    """dralab: accelerator sharing on Kubernetes DRA, and the labs that prove it.

    \b
    Example (cluster and lab come with the lab kit, dralab-kit):
      dralab cluster up            # a local Kubernetes 1.35 with fake Ascend 310P devices
      dralab lab run lab20-ascend-hami-dra
    """


def main(argv: list[str] | None = None) -> None:
    """Entry point: user errors become one line on stderr and exit code 2, never a traceback."""
    try:
        code = cli.main(args=argv, prog_name="dralab", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except UserError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except ModuleNotFoundError as exc:
        from dralab.extras import missing_extra

        hint = missing_extra(exc)
        if hint is None:
            raise
        click.echo(f"error: {hint}", err=True)
        sys.exit(2)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    # Without standalone mode click returns ctx.exit(n)'s code instead of exiting: pass it on.
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
