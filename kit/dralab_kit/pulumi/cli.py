"""``dralab infra build|preview|up|destroy|env``: the command line over the toolchain and the stack runner.

The runner (and with it the Pulumi SDK) is imported only when a command runs, so
``dralab infra --help`` stays fast.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from dralab.errors import UserError
from dralab_kit.pulumi import toolchain

if TYPE_CHECKING:
    from rich.console import Console

Command = TypeVar("Command", bound=Callable[..., Any])

PROFILES = ("local", "kind", "baremetal", "node")  # runner.PROFILES, repeated to keep the runner out of --help


def _console() -> Console:  # rich is imported lazily: `dralab infra --help` stays fast
    from rich.console import Console

    return Console(stderr=True)


@click.group(short_help="Build the Pulumi toolchain and run the infra/ program.")
def infra() -> None:
    """Build the Pulumi toolchain from Go modules and run the infra/ program with it (no downloads).

    \b
    Example:
      dralab infra build                      # once per machine: Go >= 1.25 and the Go module proxy
      dralab cluster up && dralab infra up    # namespaces, RuntimeClass ascend, DeviceClasses
      dralab infra destroy
    """


@infra.command()
@click.option("--force", is_flag=True, help="rebuild tools that are already built")
def build(force: bool) -> None:
    """Build the Pulumi CLI and the kubernetes provider from their Go modules.

    Tools land in ${DRALAB_CACHE:-~/.cache/dralab}/bin/pulumi-<v>/ and .../pulumi-kubernetes-<v>/;
    built ones are skipped. Takes tens of minutes on two cores the first time.

    \b
    Example:
      nice -n 10 dralab infra build
    """
    console = _console()
    for result in toolchain.build_tools(force=force):
        if result.name == toolchain.LANGUAGE_HOST:
            state = "launcher written"
        else:
            state = f"built in {result.seconds:.1f}s" if result.built else "already built"
        console.print(f"{result.name}: {state} ({result.path})")


_profile_option = click.option(
    "--profile",
    type=click.Choice(PROFILES),
    default="local",
    show_default=True,
    help="dralab:profile of the program: local deploys into the local cluster",
)
_stack_option = click.option("--stack", default=None, help="stack name (default: the profile's name)")
_cluster_option = click.option(
    "--cluster", "cluster_name", default="dralab", show_default=True, help="local cluster (profile local)"
)
_infra_option = click.option(
    "--infra-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="the Pulumi program (default: infra/ of this source tree)",
)
_state_option = click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="backend state and stack files (default: ${DRALAB_HOME:-~/.dralab}/pulumi)",
)
_config_option = click.option(
    "--config", "-c", "config_pairs", multiple=True, help="stack config KEY=VALUE (repeatable; bare keys are dralab:)"
)


def _stack_options(func: Command) -> Command:
    for option in (_config_option, _state_option, _infra_option, _cluster_option, _stack_option, _profile_option):
        func = option(func)
    return func


def _run(
    action: str, profile: str, stack: str | None, cluster_name: str, infra_dir: Path | None, state_dir: Path | None,
    config_pairs: tuple[str, ...],
) -> None:
    from dralab_kit.pulumi import runner

    target = runner.prepare_target(
        profile=profile,
        stack=stack,
        cluster=cluster_name,
        infra_dir=infra_dir,
        state=state_dir,
        config=runner.parse_config_pairs(config_pairs),
    )
    console = _console()
    console.print(f"pulumi {action}: stack {target.stack} (profile {profile}), state in {target.state}")
    result = runner.run_action(action, target)
    if result.returncode != 0:
        raise UserError(f"pulumi {action} failed (exit {result.returncode}); its output above says why")
    console.print(f"{action}: {runner.describe_changes(result.changes)} in {result.seconds:.1f}s")


@infra.command()
@_stack_options
def preview(
    profile: str, stack: str | None, cluster_name: str, infra_dir: Path | None, state_dir: Path | None,
    config_pairs: tuple[str, ...],
) -> None:
    """Show what `up` would change.

    \b
    Example:
      dralab infra preview --profile local
    """
    _run("preview", profile, stack, cluster_name, infra_dir, state_dir, config_pairs)


@infra.command()
@_stack_options
def up(
    profile: str, stack: str | None, cluster_name: str, infra_dir: Path | None, state_dir: Path | None,
    config_pairs: tuple[str, ...],
) -> None:
    """Create or update the stack's resources (no prompt).

    The passphrase comes from PULUMI_CONFIG_PASSPHRASE (or _FILE); on the local and kind
    profiles it defaults to "dralab-local".

    \b
    Example:
      dralab cluster up && dralab infra up --profile local
    """
    _run("up", profile, stack, cluster_name, infra_dir, state_dir, config_pairs)


@infra.command()
@_stack_options
def destroy(
    profile: str, stack: str | None, cluster_name: str, infra_dir: Path | None, state_dir: Path | None,
    config_pairs: tuple[str, ...],
) -> None:
    """Delete every resource of the stack (no prompt); the stack and its history stay.

    \b
    Example:
      dralab infra destroy --profile local
    """
    _run("destroy", profile, stack, cluster_name, infra_dir, state_dir, config_pairs)


@infra.command("env")
@_profile_option
@_cluster_option
@_state_option
def env_command(profile: str, cluster_name: str, state_dir: Path | None) -> None:
    """Print shell exports for running the built `pulumi` yourself in infra/.

    \b
    Example:
      eval "$(dralab infra env)" && cd infra && pulumi stack select -c local && pulumi up
    """
    from dralab_kit.pulumi import runner

    toolchain.require_tools()
    state = (state_dir or runner.state_root()).resolve()
    (state / "backend").mkdir(parents=True, exist_ok=True)
    toolchain.write_language_host()
    kubeconfig = runner.local_kubeconfig(cluster_name) if profile == "local" else None
    env = runner.pulumi_env(
        os.environ,
        state=state,
        tool_dirs=[toolchain.pulumi_bin_dir(), toolchain.provider_bin_dir()],
        profile=profile,
        python=sys.executable,
        kubeconfig=kubeconfig,
    )
    env.pop("PULUMI_SKIP_CONFIRMATIONS", None)  # a person at the shell keeps Pulumi's own prompts
    for key in sorted(env):
        if os.environ.get(key) != env[key]:
            click.echo(f"export {key}={shlex.quote(env[key])}")
    for key in sorted(set(os.environ) - set(env)):
        click.echo(f"unset {key}")
