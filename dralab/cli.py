"""``dralab``: the command line.

Subcommand groups live next to the code they drive and are imported only when used, so
``dralab --help`` stays fast and a component's heavy imports (grpc, kubernetes) load on demand.
"""

from __future__ import annotations

import importlib
import sys

import click

from dralab import __version__
from dralab.errors import UserError

# command name -> "module:attribute" of a click command or group
COMMANDS: dict[str, tuple[str, str]] = {
    "convert": ("dralab.webhook.cli:convert", "Convert HAMi-syntax pods to DRA pods and claims, offline."),
    "webhook": ("dralab.webhook.cli:webhook", "Run the admission webhook."),
    "driver": ("dralab.driver.cli:driver", "Run the DRA node driver or preview its slices and CDI specs."),
    "cluster": ("dralab.cluster.cli:cluster", "Build, start and operate the local Kubernetes 1.35 cluster."),
    "image": ("dralab.image.cli:image", "Build dralab's container image with buildah (no Docker daemon)."),
    "lab": ("harness.cli:lab", "List and replay labs on a cluster profile."),
    "bench": ("dralab.bench:bench", "Run benchmarks that write JSON results."),
    "infra": ("dralab.pulumi.cli:infra", "Build the Pulumi toolchain and run the infra/ program."),
    "schema": ("dralab.schema_cli:schema", "Print the JSON Schema of a file format (profile, infra)."),
    "config": ("dralab.config_cli:config", "Show the effective configuration (also from a HAMi device config)."),
    "migrate": ("dralab.migrate.cli:migrate", "Plan and apply a switch from HAMi / HAMi-DRA to dralab."),
    "monitor": ("dralab.monitor.cli:monitor", "Serve per-device, per-pod and per-namespace allocation gauges."),
    "top": ("dralab.monitor.cli:top", "A live table of device shares: memory, cores and sharers."),
}


def _load(ref: str) -> click.Command:
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        return _load(COMMANDS[name][0])

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][1]) for name in sorted(COMMANDS)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="dralab")
def cli() -> None:
    """dralab: accelerator sharing on Kubernetes DRA, and the labs that prove it.

    \b
    Example:
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
