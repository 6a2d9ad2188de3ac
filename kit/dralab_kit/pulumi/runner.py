"""Run ``infra/`` with the Pulumi Automation API and the CLI dralab built.

``pulumi.automation`` drives the CLI: a :class:`LocalWorkspace` per directory, the built binary as
its ``pulumi_command``, and an environment that keeps everything on this machine:

- state in a local file backend (``${DRALAB_HOME:-~/.dralab}/pulumi/backend``) with its own
  ``PULUMI_HOME``; no service account, and the user's ``~/.pulumi`` is untouched;
- the passphrase from ``PULUMI_CONFIG_PASSPHRASE`` (or ``_FILE``), defaulting to a fixed one only
  on the lab profiles (local, kind), whose stacks hold no real secret;
- plugin acquisition off: the built provider and language host are found on ``PATH``.

The stack's own file (its passphrase salt and the merged config) lives beside the state, in a
stand-in project directory, so nothing is written into ``infra/``; the program itself runs from
``infra/`` (a local program, not an inline one), exactly as ``pulumi up`` there would run it.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from dralab.errors import UserError
from dralab_kit import CHECKOUT
from dralab_kit.pulumi import toolchain

PROFILES = ("local", "kind", "baremetal", "node")
ACTIONS = ("preview", "up", "destroy")
DEFAULT_PASSPHRASE = "dralab-local"  # for local labs only: the stacks hold no secret worth a passphrase
# Environment the CLI must not inherit: a service token (state never leaves this machine) and the
# switch that would hide the built provider on PATH. The Automation API starts the CLI with
# os.environ plus the workspace's variables, so these are blanked rather than removed.
_BLANKED = ("PULUMI_ACCESS_TOKEN", "PULUMI_IGNORE_AMBIENT_PLUGINS")
_TRUE = (
    "PULUMI_SKIP_UPDATE_CHECK",
    "PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK",
    "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION",
    "PULUMI_SKIP_CONFIRMATIONS",
    "PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER",
)


def state_root() -> Path:
    """``${DRALAB_HOME:-~/.dralab}/pulumi``: backend state and PULUMI_HOME, apart from any user install."""
    from dralab_kit.cluster.layout import dralab_home

    return dralab_home() / "pulumi"


def default_infra_dir() -> Path:
    """``infra/`` of the source tree dralab runs from (``$DRALAB_INFRA_DIR`` overrides)."""
    override = os.environ.get("DRALAB_INFRA_DIR")
    if override:
        return Path(override)
    return CHECKOUT / "infra"


def parse_config_pairs(pairs: Sequence[str]) -> dict[str, Any]:
    """``KEY=VALUE`` options as a mapping; a bare key gets the project namespace (``profile`` -> ``dralab:profile``).

    A JSON array or object (``hosts=[{...}]``) becomes structured config, as Pulumi.yaml types
    ``array`` and ``object`` keys; anything else stays text.
    """
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UserError(f"bad --config {pair!r}: write KEY=VALUE, e.g. --config dralab:profile=local")
        out[key if ":" in key else f"dralab:{key}"] = _structured(key, value)
    return out


def _structured(key: str, value: str) -> Any:
    if value.lstrip()[:1] not in ("[", "{"):
        return value
    try:
        return json.loads(value)
    except ValueError as exc:
        raise UserError(
            f"--config {key}: the value starts like JSON but does not parse ({exc}); quote it for the shell"
        ) from None


def passphrase_env(env: Mapping[str, str], profile: str) -> dict[str, str]:
    """The passphrase settings: the caller's, or the documented default on the local and kind profiles."""
    if env.get("PULUMI_CONFIG_PASSPHRASE") is not None or env.get("PULUMI_CONFIG_PASSPHRASE_FILE"):
        return {}
    if profile == "baremetal":
        raise UserError(
            "the baremetal stack protects real secrets: set PULUMI_CONFIG_PASSPHRASE "
            "(or PULUMI_CONFIG_PASSPHRASE_FILE) before `dralab infra` runs it"
        )
    return {"PULUMI_CONFIG_PASSPHRASE": DEFAULT_PASSPHRASE}


def pulumi_env(
    base: Mapping[str, str],
    *,
    state: Path,
    tool_dirs: Sequence[Path],
    profile: str,
    python: str,
    kubeconfig: Path | None = None,
) -> dict[str, str]:
    """The CLI's environment: local file backend, own PULUMI_HOME, built tools first on PATH, no downloads."""
    env = dict(base)
    env.update(passphrase_env(base, profile))
    env["PATH"] = os.pathsep.join([*(str(d) for d in tool_dirs), base.get("PATH", "")]).rstrip(os.pathsep)
    env["PULUMI_HOME"] = str(state / "home")
    env["PULUMI_BACKEND_URL"] = (state / "backend").resolve().as_uri()
    env["PULUMI_PYTHON_CMD"] = python
    for name in _TRUE:
        env[name] = "true"
    for name in _BLANKED:
        env.pop(name, None)
    if kubeconfig is not None:
        env["KUBECONFIG"] = str(kubeconfig)
    return env


def workspace_env(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` as Automation API workspace variables: what ``pulumi_env`` removed is set empty instead."""
    out = dict(env)
    for name in _BLANKED:
        out.setdefault(name, "")
    return out


def stack_config_document(
    current: Mapping[str, Any] | None, base: Mapping[str, Any] | None, overrides: Mapping[str, Any]
) -> dict[str, Any]:
    """The stack file passed as ``config_file``: its own keys (salt), infra/'s config, then ``overrides``."""
    doc = dict(current or {})
    config = dict((base or {}).get("config") or {})
    config.update(overrides)
    doc["config"] = config
    return doc


def op_counts(changes: Mapping[Any, Any] | None) -> dict[str, int]:
    """A change summary keyed by plain operation names (the API's OpType enums are str subclasses)."""
    return {str(getattr(op, "value", op)): int(n) for op, n in (changes or {}).items()}


def has_changes(summary: Mapping[str, int]) -> bool:
    """True when a summary holds anything but unchanged resources."""
    return any(count for op, count in summary.items() if op != "same")


def describe_changes(summary: Mapping[str, int]) -> str:
    """``2 create, 3 same`` (sorted by operation), or ``no resources``."""
    parts = [f"{count} {op}" for op, count in sorted(summary.items()) if count]
    return ", ".join(parts) or "no resources"


class PlannedStep(TypedDict):
    """One resource step the engine planned, as :attr:`PulumiRun.steps` and ``on_step`` pass it on."""

    op: str  # create, update, same, delete, ...
    type: str  # the resource type token
    urn: str
    inputs: dict[str, Any]  # the new state's inputs (the old one's for a delete)


def step_of(event: Any) -> PlannedStep | None:
    """One planned step (op, type, urn, inputs) of an engine event, or None for other events."""
    pre = getattr(event, "resource_pre_event", None)
    if pre is None:
        return None
    meta = pre.metadata
    state = meta.new or meta.old
    return PlannedStep(
        op=str(getattr(meta.op, "value", meta.op)),
        type=meta.type,
        urn=meta.urn,
        inputs=dict(state.inputs or {}) if state is not None else {},
    )


def render_step(step: Mapping[str, Any]) -> str:
    """``  create   kubernetes:node.k8s.io/v1:RuntimeClass  runtimeclass-ascend``."""
    return f"  {step.get('op', '?'):<8} {step.get('type', '?')}  {str(step.get('urn', '')).rsplit('::', 1)[-1]}"


def command_error_code(exc: BaseException) -> int:
    """The CLI's exit code from an Automation API CommandError (its text carries ``code: N``)."""
    found = re.search(r"code: (-?\d+)", str(exc))
    return int(found.group(1)) if found and int(found.group(1)) != 0 else 1


@dataclass
class PulumiRun:
    """One Automation API operation: what it said and what it changed."""

    action: str
    stack: str
    returncode: int
    seconds: float
    changes: dict[str, int]
    output: str = ""
    steps: list[PlannedStep] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Target:
    """Where one run points: the program, the stack, its state and its environment."""

    infra_dir: Path
    project: str
    stack: str
    profile: str
    state: Path
    config_file: Path
    env: dict[str, str]


def _yaml_load(path: Path) -> dict[str, Any]:
    import yaml

    from dralab import yamlio

    if not path.is_file():
        return {}
    try:
        data = yamlio.load_file(path) or {}
    except yaml.YAMLError as exc:
        raise UserError(f"{path}: not valid YAML ({exc})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path} is not a YAML mapping")
    return data


def local_kubeconfig(cluster_name: str) -> Path:
    """The kubeconfig of local cluster ``cluster_name``, or the command that makes it."""
    from dralab_kit.cluster.api import get_cluster

    handle = get_cluster(cluster_name)
    if handle is None or not handle.kubeconfig.is_file():
        raise UserError(
            f"no local cluster named {cluster_name!r}: run `dralab cluster up --name {cluster_name}` first "
            "(the local profile deploys into it)"
        )
    return handle.kubeconfig


def built_command() -> Any:
    """The built CLI as the Automation API's ``pulumi_command`` (its version is known: nothing is run)."""
    from pulumi.automation import PulumiCommand
    from semver import VersionInfo

    class BuiltPulumi(PulumiCommand):
        def __init__(self, path: Path, version: str) -> None:  # no super(): it would run `pulumi version`
            self.command = str(path)
            self.version = VersionInfo.parse(version.lstrip("v"))

    return BuiltPulumi(toolchain.pulumi_path(), toolchain.PULUMI_VERSION)


def workspace(target: Target, work_dir: Path, **options: Any) -> Any:
    """A LocalWorkspace in ``work_dir`` running the built CLI with the target's environment."""
    from pulumi.automation import LocalWorkspace

    return LocalWorkspace(
        work_dir=str(work_dir),
        pulumi_home=target.env["PULUMI_HOME"],
        env_vars=workspace_env(target.env),
        pulumi_command=built_command(),
        **options,
    )


def prepare_target(
    *,
    profile: str = "local",
    stack: str | None = None,
    cluster: str = "dralab",
    infra_dir: Path | None = None,
    state: Path | None = None,
    config: Mapping[str, Any] | None = None,
) -> Target:
    """Check the tools and the program, create the stack when new, write its config file."""
    from dralab.util import atomic_write

    if profile not in PROFILES:
        raise UserError(f"unknown profile {profile!r} (use one of {', '.join(PROFILES)})")
    toolchain.require_tools()
    infra_dir = (infra_dir or default_infra_dir()).resolve()
    project_doc = _yaml_load(infra_dir / "Pulumi.yaml")
    if not project_doc.get("name"):
        raise UserError(f"{infra_dir} holds no Pulumi project (Pulumi.yaml with a name); pass --infra-dir")
    project = str(project_doc["name"])
    stack = stack or profile
    state = (state or state_root()).resolve()
    (state / "backend").mkdir(parents=True, exist_ok=True)
    kubeconfig = local_kubeconfig(cluster) if profile == "local" else None
    toolchain.write_language_host()
    env = pulumi_env(
        os.environ,
        state=state,
        tool_dirs=[toolchain.pulumi_bin_dir(), toolchain.provider_bin_dir()],
        profile=profile,
        python=sys.executable,
        kubeconfig=kubeconfig,
    )
    # The stack's file lives in a folder that stands in for the project: `stack init` writes the
    # passphrase salt there instead of into the source tree.
    config_dir = state / "config" / project
    config_dir.mkdir(parents=True, exist_ok=True)
    config_file = config_dir / f"Pulumi.{stack}.yaml"
    target = Target(infra_dir, project, stack, profile, state, config_file, env)
    _create_or_select(target, project_doc)
    overrides = {"dralab:profile": profile, **(config or {})}
    base_file = infra_dir / f"Pulumi.{stack}.yaml"
    if not base_file.is_file():
        base_file = infra_dir / f"Pulumi.{profile}.yaml"
    import yaml

    doc = stack_config_document(_yaml_load(config_file), _yaml_load(base_file), overrides)
    text = yaml.safe_dump(doc, sort_keys=True)
    if not config_file.is_file() or config_file.read_text() != text:
        atomic_write(config_file, text)
    return target


def _create_or_select(target: Target, project_doc: Mapping[str, Any]) -> None:
    """Create the stack (passphrase secrets) in the stand-in project, or select it when it exists."""
    from pulumi.automation import ProjectSettings, Stack
    from pulumi.automation.errors import CommandError

    stand_in = ProjectSettings(
        name=target.project, runtime="python", description=str(project_doc.get("description") or "") or None
    )
    ws = workspace(target, target.config_file.parent, project_settings=stand_in, secrets_provider="passphrase")
    try:
        Stack.create_or_select(target.stack, ws)
    except CommandError as exc:
        raise UserError(f"cannot create or select stack {target.stack!r}: {_last_line(str(exc))}") from None


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip() and not line.strip().startswith("code:")]
    return lines[-1].strip() if lines else "no output"


def run_action(
    action: str,
    target: Target,
    *,
    capture: bool = False,
    on_step: Callable[[PlannedStep], None] | None = None,
) -> PulumiRun:
    """Run ``preview``, ``up`` or ``destroy`` of the target's stack; output streams unless ``capture``."""
    from pulumi.automation import Stack
    from pulumi.automation.errors import CommandError

    if action not in ACTIONS:
        raise UserError(f"unknown action {action!r} (use one of {', '.join(ACTIONS)})")
    lines: list[str] = []

    def out(line: str) -> None:
        lines.append(line)
        if not capture:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    def err(line: str) -> None:
        lines.append(line)
        if not capture:
            sys.stderr.write(line + "\n")

    run = PulumiRun(action, target.stack, 0, 0.0, {})

    def event(evt: Any) -> None:
        step = step_of(evt)
        if step is not None:
            run.steps.append(step)
            if on_step:
                on_step(step)

    start = time.monotonic()
    common: dict[str, Any] = {
        "config_file": str(target.config_file),
        "color": "never",
        "on_output": out,
        "on_error": err,
        "on_event": event,
    }
    try:
        stack = Stack.select(target.stack, workspace(target, target.infra_dir))
        if action == "preview":
            previewed = stack.preview(**common)
            run.changes = op_counts(previewed.change_summary)
        elif action == "up":
            updated = stack.up(show_secrets=False, **common)
            run.changes = op_counts(updated.summary.resource_changes)
            run.outputs = {k: v.value for k, v in updated.outputs.items() if not v.secret}
        else:
            destroyed = stack.destroy(show_secrets=False, **common)
            run.changes = op_counts(destroyed.summary.resource_changes)
    except CommandError as exc:
        run.returncode = command_error_code(exc)
    run.seconds = time.monotonic() - start
    run.output = "\n".join(lines)
    return run
