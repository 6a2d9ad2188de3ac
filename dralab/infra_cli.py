"""``dralab infra``: build the Pulumi toolchain from Go modules and run the ``infra/`` program with it.

Nothing is downloaded at run time: the Pulumi CLI and the kubernetes resource provider are built
from their Go modules (wrapper modules ``pulumi`` and ``pulumi_kubernetes``), and the Python
language host is dralab's own (the Go module of Pulumi's is not served by the module proxy): a
small gRPC server speaking Pulumi's LanguageRuntime protocol that runs the program with the
Pulumi Python SDK. The state lives in a local file backend, so no Pulumi service account is used.

Layout: binaries in ``${DRALAB_CACHE:-~/.cache/dralab}/bin/pulumi-<v>/`` and
``.../bin/pulumi-kubernetes-<v>/``; state in ``${DRALAB_HOME:-~/.dralab}/pulumi/``.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from dralab.errors import UserError

# The Pulumi CLI built from github.com/pulumi/pulumi/pkg/v3: the nearest release the module proxy
# serves that is not older than the pinned Python SDK (pulumi==3.272.0 on PyPI; pkg/v3 v3.272.0 is
# not served). Keep in step with dralab/gobuild/wrappers/pulumi/go.mod.
PULUMI_VERSION = "v3.274.1"
# The kubernetes provider: the proxy serves its module (provider/v4, which has no tags of its own)
# only at the commit tagged v4.25.0. Keep in step with dralab/gobuild/wrappers/pulumi_kubernetes/go.mod.
KUBERNETES_PROVIDER_VERSION = "4.25.0"
KUBERNETES_PROVIDER_MODULE = "github.com/pulumi/pulumi-kubernetes/provider/v4"
KUBERNETES_PROVIDER_MODULE_VERSION = "v4.0.0-20260115033456-f47bc2d6f199"

PROFILES = ("local", "kind", "baremetal")
DEFAULT_PASSPHRASE = "dralab-local"  # for local labs only: the stacks hold no secret worth a passphrase
LANGUAGE_HOST = "pulumi-language-python"
PROVIDER_BINARY = "pulumi-resource-kubernetes"
USER_PROGRAM_EXIT = 32  # the exit code meaning "the error was already shown to the user"


# --------------------------------------------------------------------------------------------------
# Where things live (pure apart from reading the environment)
# --------------------------------------------------------------------------------------------------


def pulumi_bin_dir() -> Path:
    """The Pulumi CLI and dralab's language host for it."""
    from dralab.gobuild import cache_root

    return cache_root() / "bin" / f"pulumi-{PULUMI_VERSION}"


def provider_bin_dir() -> Path:
    """The kubernetes resource provider."""
    from dralab.gobuild import cache_root

    return cache_root() / "bin" / f"pulumi-kubernetes-v{KUBERNETES_PROVIDER_VERSION}"


def pulumi_path() -> Path:
    return pulumi_bin_dir() / "pulumi"


def provider_path() -> Path:
    return provider_bin_dir() / PROVIDER_BINARY


def language_host_path() -> Path:
    return pulumi_bin_dir() / LANGUAGE_HOST


def state_root() -> Path:
    """``${DRALAB_HOME:-~/.dralab}/pulumi``: backend state and PULUMI_HOME, apart from any user install."""
    from dralab.cluster.layout import dralab_home

    return dralab_home() / "pulumi"


def default_infra_dir() -> Path:
    """``infra/`` of the source tree dralab runs from (``$DRALAB_INFRA_DIR`` overrides)."""
    override = os.environ.get("DRALAB_INFRA_DIR")
    if override:
        return Path(override)
    return Path(__file__).resolve().parent.parent / "infra"


def missing_tools() -> list[str]:
    """Built tools that are not there."""
    return [p.name for p in (pulumi_path(), provider_path()) if not p.is_file()]


# --------------------------------------------------------------------------------------------------
# Build
# --------------------------------------------------------------------------------------------------


def provider_schema_embed(schema: Mapping[str, Any], version: str) -> bytes:
    """The provider's embedded schema: its ``schema.json`` with the version set (what its go:generate does)."""
    spec = dict(schema)
    spec["version"] = version
    return json.dumps(spec, separators=(",", ":")).encode()


def compact_json(data: Any) -> bytes:
    return json.dumps(data, separators=(",", ":")).encode()


def _go_module_dir(go: str, module: str, version: str) -> Path:
    """Download one module (through the module proxy) and return its directory in the module cache."""
    out = subprocess.run(
        [go, "mod", "download", "-json", f"{module}@{version}"],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        env={**os.environ, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"},
    )
    try:
        info = json.loads(out.stdout)
    except ValueError:
        info = {}
    if out.returncode != 0 or info.get("Error") or not info.get("Dir"):
        from dralab.gobuild.toolchain import explain_failure

        detail = info.get("Error") or out.stderr or out.stdout
        raise UserError(explain_failure(detail, f"downloading Go module {module}@{version}", "see `go env GOPROXY`"))
    return Path(info["Dir"])


def _prepare_provider_build(go: str) -> None:
    """Put the provider's main package and the two files it embeds into the wrapper's build directory.

    The upstream ``cmd/pulumi-resource-kubernetes`` embeds ``schema-embed.json`` and
    ``terraform-mapping-embed.json``, which its ``go generate`` step writes and the module does not
    ship (and ``go build -overlay`` may not replace files in the module cache). The wrapper module's
    own ``main.go`` embeds them instead; they are made here from the shipped ``schema.json`` (with
    the version set) and ``terraform-mapping.json``.
    """
    from importlib import resources

    from dralab.gobuild import cache_root
    from dralab.util import atomic_write

    module_dir = _go_module_dir(go, KUBERNETES_PROVIDER_MODULE, KUBERNETES_PROVIDER_MODULE_VERSION)
    cmd_dir = module_dir / "cmd" / PROVIDER_BINARY
    schema = json.loads((cmd_dir / "schema.json").read_text())
    mapping = json.loads((cmd_dir / "terraform-mapping.json").read_text())
    main_go = resources.files("dralab.gobuild").joinpath("wrappers", "pulumi_kubernetes", "main.go").read_bytes()
    work = cache_root() / "gobuild" / "pulumi_kubernetes"  # where build_go_tools builds this wrapper
    work.mkdir(parents=True, exist_ok=True)
    files = {
        "main.go": main_go,
        "schema-embed.json": provider_schema_embed(schema, KUBERNETES_PROVIDER_VERSION),
        "terraform-mapping-embed.json": compact_json(mapping),
    }
    for name, data in files.items():
        target = work / name
        if not target.is_file() or target.read_bytes() != data:
            atomic_write(target, data)


@dataclass(frozen=True)
class ToolBuild:
    """What one built tool took."""

    name: str
    path: Path
    built: bool
    seconds: float


def build_tools(force: bool = False, progress: bool = True, go: str | None = None) -> list[ToolBuild]:
    """Build the Pulumi CLI and the kubernetes provider (one ``go build`` at a time), write the language host.

    A file lock makes concurrent callers (a test fixture, a shell) wait for one build and then skip it.
    """
    import filelock

    from dralab.gobuild import cache_root

    cache_root().mkdir(parents=True, exist_ok=True)
    with filelock.FileLock(str(cache_root() / ".infra-build.lock")):
        return _build_tools(force, progress, go)


def _build_tools(force: bool, progress: bool, go: str | None) -> list[ToolBuild]:
    from dralab.gobuild import build_go_tools, find_go

    tool = find_go(go)
    results: list[ToolBuild] = []
    cli = build_go_tools(
        "pulumi",
        {"pulumi": "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi"},
        pulumi_bin_dir(),
        ldflags=f"-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version={PULUMI_VERSION}",
        force=force,
        go=tool.path,
        progress=progress,
    )
    results.append(ToolBuild("pulumi", cli.paths["pulumi"], bool(cli.built), cli.seconds))
    _prepare_provider_build(tool.path)
    prov = build_go_tools(
        "pulumi_kubernetes",
        {PROVIDER_BINARY: "dralab.local/wrappers/pulumi_kubernetes"},
        provider_bin_dir(),
        ldflags=f"-X {KUBERNETES_PROVIDER_MODULE}/pkg/version.Version={KUBERNETES_PROVIDER_VERSION}",
        force=force,
        go=tool.path,
        progress=progress,
    )
    results.append(ToolBuild(PROVIDER_BINARY, prov.paths[PROVIDER_BINARY], bool(prov.built), prov.seconds))
    start = time.monotonic()
    write_language_host()
    results.append(ToolBuild(LANGUAGE_HOST, language_host_path(), True, time.monotonic() - start))
    return results


def language_host_script(python: str) -> str:
    """The ``pulumi-language-python`` executable: runs dralab's language host with ``python``."""
    return f'#!/bin/sh\nexec {shlex.quote(python)} -m dralab.infra_cli language-host "$@"\n'


def write_language_host(python: str | None = None) -> Path:
    """(Re)write the language host launcher next to the CLI, bound to this interpreter."""
    from dralab.util import atomic_write

    path = language_host_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    text = language_host_script(python or sys.executable)
    if not path.is_file() or path.read_text() != text or not os.access(path, os.X_OK):
        atomic_write(path, text, mode=0o755)
    return path


# --------------------------------------------------------------------------------------------------
# Language host: Pulumi's LanguageRuntime protocol, the program run in a child interpreter
# --------------------------------------------------------------------------------------------------


def engine_address(argv: Sequence[str]) -> str:
    """The engine's address: the last positional argument the engine starts a language plugin with."""
    positional = [a for a in argv if not a.startswith("-")]
    if not positional:
        raise UserError("the language host needs the engine address as its last argument")
    return positional[-1]


def program_interpreter(options: Mapping[str, Any], root_directory: str, env: Mapping[str, str], default: str) -> str:
    """The Python that runs the program: Pulumi.yaml's ``virtualenv`` option, ``PULUMI_PYTHON_CMD``, or ``default``."""
    venv = options.get("virtualenv")
    if venv:
        base = Path(venv) if Path(venv).is_absolute() else Path(root_directory) / venv
        return str(base / "bin" / "python")
    return env.get("PULUMI_PYTHON_CMD") or default


def choose_interpreter(options: Mapping[str, Any], root_directory: str, env: Mapping[str, str], default: str) -> str:
    """``program_interpreter``, falling back past a ``virtualenv`` that does not exist (said on stderr)."""
    python = program_interpreter(options, root_directory, env, default)
    if options.get("virtualenv") and not Path(python).is_file():
        fallback = program_interpreter({}, root_directory, env, default)
        sys.stderr.write(f"virtualenv interpreter {python} not found; running the program with {fallback}\n")
        return fallback
    return python


def program_path(program_directory: str, entry_point: str, legacy_program: str) -> str:
    """The file or directory the program runs from (a directory runs its ``__main__.py``)."""
    if program_directory:
        if entry_point and entry_point != ".":
            return str(Path(program_directory) / entry_point)
        return program_directory
    return legacy_program or "."


@dataclass(frozen=True)
class RunSpec:
    """What the engine asked a Run to do, in plain values (built from a RunRequest)."""

    project: str
    stack: str
    pwd: str
    program: str
    args: tuple[str, ...]
    config: dict[str, str]
    secret_keys: tuple[str, ...]
    dry_run: bool
    parallel: int
    monitor: str
    engine: str
    organization: str
    root_directory: str
    options: dict[str, Any]


def child_command(spec: RunSpec, python: str) -> list[str]:
    """The command line of the child that runs the program (``run-program`` of this module)."""
    cmd = [python, "-u", "-m", "dralab.infra_cli", "run-program"]
    cmd += ["--monitor", spec.monitor, "--engine", spec.engine, "--project", spec.project, "--stack", spec.stack]
    cmd += ["--parallel", str(spec.parallel), "--pwd", spec.pwd or ".", "--root-directory", spec.root_directory]
    if spec.organization:
        cmd += ["--organization", spec.organization]
    if spec.dry_run:
        cmd.append("--dry-run")
    return [*cmd, "--", spec.program, *spec.args]


def child_env(spec: RunSpec, base: Mapping[str, str]) -> dict[str, str]:
    """The child's environment: the config as the Python SDK reads it (PULUMI_CONFIG, PULUMI_CONFIG_SECRET_KEYS)."""
    env = dict(base)
    env["PULUMI_CONFIG"] = json.dumps(spec.config, sort_keys=True)
    env["PULUMI_CONFIG_SECRET_KEYS"] = json.dumps(list(spec.secret_keys))
    return env


def run_outcome(returncode: int) -> tuple[str, bool]:
    """(error, bail) of a RunResponse from the child's exit code."""
    if returncode == 0:
        return "", False
    if returncode == USER_PROGRAM_EXIT:
        return "", True
    return f"the Python program exited with code {returncode}", False


def _run_spec(request: Any, engine: str) -> RunSpec:
    from google.protobuf.json_format import MessageToDict

    info = request.info
    options = MessageToDict(info.options) if info.HasField("options") else {}
    return RunSpec(
        project=request.project,
        stack=request.stack,
        pwd=request.pwd,
        program=program_path(info.program_directory, info.entry_point, request.program),
        args=tuple(request.args),
        config=dict(request.config),
        secret_keys=tuple(request.configSecretKeys),
        dry_run=request.dryRun,
        parallel=request.parallel,
        monitor=request.monitor_address,
        engine=engine,
        organization=request.organization,
        root_directory=info.root_directory or request.pwd,
        options=options,
    )


def serve_language_host(argv: Sequence[str]) -> None:
    """Serve LanguageRuntime on a free loopback port; print the port (the engine reads it) and block."""
    from concurrent import futures

    import grpc
    from pulumi.runtime.proto import language_pb2, language_pb2_grpc, plugin_pb2

    engine = engine_address(argv)
    version = _sdk_version("pulumi")

    class Host(language_pb2_grpc.LanguageRuntimeServicer):
        def Handshake(self, request, context):
            return language_pb2.LanguageHandshakeResponse()

        def GetPluginInfo(self, request, context):
            return plugin_pb2.PluginInfo(version=version)

        def GetRequiredPlugins(self, request, context):
            # Providers load on first use (from PATH): nothing to install up front.
            return language_pb2.GetRequiredPluginsResponse()

        def GetRequiredPackages(self, request, context):
            return language_pb2.GetRequiredPackagesResponse()

        def InstallDependencies(self, request, context):
            # The interpreter is dralab's own environment: its dependencies are installed with dralab.
            return iter(())

        def Run(self, request, context):
            spec = _run_spec(request, engine)
            python = choose_interpreter(spec.options, spec.root_directory, os.environ, sys.executable)
            if not Path(python).is_file() and not shutil.which(python):
                return language_pb2.RunResponse(error=f"the Python interpreter {python} does not exist")
            proc = subprocess.run(child_command(spec, python), env=child_env(spec, os.environ), check=False)
            error, bail = run_outcome(proc.returncode)
            return language_pb2.RunResponse(error=error, bail=bail)

    options = [("grpc.max_receive_message_length", 400 * 1024 * 1024)]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), options=options)
    language_pb2_grpc.add_LanguageRuntimeServicer_to_server(Host(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    # The engine ends its plugins with SIGINT (then SIGKILL): stop quietly, not with a traceback.
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    server.start()
    sys.stdout.write(f"{port}\n")
    sys.stdout.flush()
    stop.wait()
    server.stop(grace=None)


def run_program(opts: Mapping[str, Any], program: str, args: Sequence[str]) -> int:
    """Run a Pulumi Python program against the engine's resource monitor; the exit code for the host."""
    import asyncio
    import runpy
    import traceback
    from concurrent.futures import ThreadPoolExecutor

    import pulumi
    import pulumi.runtime

    settings = pulumi.runtime.Settings(
        project=opts["project"],
        stack=opts["stack"],
        monitor=opts["monitor"],
        engine=opts["engine"],
        parallel=opts["parallel"],
        dry_run=opts["dry_run"],
        organization=opts["organization"],
        root_directory=opts["root_directory"],
    )
    pulumi.runtime.configure(settings)
    pulumi.runtime.set_all_config(pulumi.runtime.get_config_env(), pulumi.runtime.get_config_secret_keys_env())
    sys.argv = [program, *args]
    os.chdir(opts["pwd"])
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    executor = ThreadPoolExecutor(max_workers=max(opts["parallel"], 1) * 4)
    loop.set_default_executor(executor)
    code = USER_PROGRAM_EXIT
    try:
        loop.run_until_complete(pulumi.runtime.run_in_stack(lambda: runpy.run_path(program, run_name="__main__")))
        code = 0
    except pulumi.RunError as exc:
        pulumi.log.error(str(exc))
    except Exception:
        pulumi.log.error("the program failed:\n" + traceback.format_exc())
    finally:
        executor.shutdown(wait=True)
        loop.close()
        sys.stdout.flush()
        sys.stderr.flush()
    return code


def _sdk_version(dist: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return ""


# --------------------------------------------------------------------------------------------------
# Running the CLI on infra/ (state in a local file backend, config in a file dralab owns)
# --------------------------------------------------------------------------------------------------

ACTIONS = ("preview", "up", "destroy")


def parse_config_pairs(pairs: Sequence[str]) -> dict[str, str]:
    """``KEY=VALUE`` options as a mapping; a bare key gets the project namespace (``profile`` -> ``dralab:profile``)."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UserError(f"bad --config {pair!r}: write KEY=VALUE, e.g. --config dralab:profile=local")
        out[key if ":" in key else f"dralab:{key}"] = value
    return out


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
    for name in (
        "PULUMI_SKIP_UPDATE_CHECK",
        "PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION",
        "PULUMI_SKIP_CONFIRMATIONS",
        "PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER",
    ):
        env[name] = "true"
    env.pop("PULUMI_IGNORE_AMBIENT_PLUGINS", None)  # the built provider is found on PATH
    env.pop("PULUMI_ACCESS_TOKEN", None)  # state never goes to a service from here
    if kubeconfig is not None:
        env["KUBECONFIG"] = str(kubeconfig)
    return env


def stack_config_document(
    current: Mapping[str, Any] | None, base: Mapping[str, Any] | None, overrides: Mapping[str, str]
) -> dict[str, Any]:
    """The stack file dralab passes with --config-file: its own keys (salt), infra/'s config, then ``overrides``."""
    doc = dict(current or {})
    config = dict((base or {}).get("config") or {})
    config.update(overrides)
    doc["config"] = config
    return doc


def pulumi_args(
    action: str, stack: str, config_file: Path, infra_dir: Path, *, json_output: bool = False, extra: Sequence[str] = ()
) -> list[str]:
    """Arguments of one ``pulumi preview|up|destroy`` run, never interactive."""
    if action not in ACTIONS:
        raise UserError(f"unknown action {action!r} (use one of {', '.join(ACTIONS)})")
    args = [action, "--stack", stack, "--cwd", str(infra_dir), "--config-file", str(config_file)]
    args += ["--non-interactive", "--color", "never"]
    if action in ("up", "destroy"):
        args.append("--yes")
    if json_output:
        args.append("--json")
    return [*args, *extra]


def change_summary(history: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Resource changes of the newest update in ``pulumi stack history --json`` output."""
    if not history:
        return {}
    newest = max(history, key=lambda h: h.get("version", 0))
    return {k: int(v) for k, v in (newest.get("resourceChanges") or {}).items()}


def preview_summary(doc: Mapping[str, Any]) -> dict[str, int]:
    """The change summary of ``pulumi preview --json`` output."""
    return {k: int(v) for k, v in (doc.get("changeSummary") or {}).items()}


def render_preview(doc: Mapping[str, Any]) -> str:
    """``pulumi preview --json`` as lines a person reads: each planned step, then the engine's messages."""
    lines = []
    for step in doc.get("steps") or []:
        state = step.get("newState") or step.get("oldState") or {}
        urn = str(step.get("urn", ""))
        lines.append(f"  {step.get('op', '?'):<8} {state.get('type', '?')}  {urn.rsplit('::', 1)[-1]}")
    for diag in doc.get("diagnostics") or []:
        message = str(diag.get("message", "")).strip()
        if message:
            lines.append(f"{diag.get('severity', 'info')}: {message}")
    return "\n".join(lines) + ("\n" if lines else "")


def has_changes(summary: Mapping[str, int]) -> bool:
    """True when a summary holds anything but unchanged resources."""
    return any(count for op, count in summary.items() if op != "same")


@dataclass
class PulumiRun:
    """One CLI run: what it said and what it changed."""

    action: str
    stack: str
    returncode: int
    seconds: float
    changes: dict[str, int]
    output: str = ""
    preview: dict[str, Any] | None = None


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

    if not path.is_file():
        return {}
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict):
        raise UserError(f"{path} is not a YAML mapping")
    return data


def _local_kubeconfig(cluster_name: str) -> Path:
    from dralab.cluster.api import get_cluster

    handle = get_cluster(cluster_name)
    if handle is None or not handle.kubeconfig.is_file():
        raise UserError(
            f"no local cluster named {cluster_name!r}: run `dralab cluster up --name {cluster_name}` first "
            "(the local profile deploys into it)"
        )
    return handle.kubeconfig


def prepare_target(
    *,
    profile: str = "local",
    stack: str | None = None,
    cluster: str = "dralab",
    infra_dir: Path | None = None,
    state: Path | None = None,
    config: Mapping[str, str] | None = None,
) -> Target:
    """Check the tools and the program, create the stack when new, write its config file."""
    from dralab.util import atomic_write

    if profile not in PROFILES:
        raise UserError(f"unknown profile {profile!r} (use one of {', '.join(PROFILES)})")
    missing = missing_tools()
    if missing:
        raise UserError(f"Pulumi tools missing: {', '.join(missing)}; run `dralab infra build` first")
    infra_dir = (infra_dir or default_infra_dir()).resolve()
    project_doc = _yaml_load(infra_dir / "Pulumi.yaml")
    if not project_doc.get("name"):
        raise UserError(f"{infra_dir} holds no Pulumi project (Pulumi.yaml with a name); pass --infra-dir")
    project = str(project_doc["name"])
    stack = stack or profile
    state = (state or state_root()).resolve()
    (state / "backend").mkdir(parents=True, exist_ok=True)
    kubeconfig = _local_kubeconfig(cluster) if profile == "local" else None
    write_language_host()
    env = pulumi_env(
        os.environ,
        state=state,
        tool_dirs=[pulumi_bin_dir(), provider_bin_dir()],
        profile=profile,
        python=sys.executable,
        kubeconfig=kubeconfig,
    )
    # Stack files live beside the state, in a folder that stands in for the project: `stack init` writes
    # the passphrase salt there instead of into the source tree.
    config_dir = state / "config" / project
    config_dir.mkdir(parents=True, exist_ok=True)
    stand_in = {k: v for k, v in project_doc.items() if k in ("name", "runtime", "description")}
    import yaml

    stand_in_text = yaml.safe_dump(stand_in, sort_keys=False)
    if not (config_dir / "Pulumi.yaml").is_file() or (config_dir / "Pulumi.yaml").read_text() != stand_in_text:
        atomic_write(config_dir / "Pulumi.yaml", stand_in_text)
    config_file = config_dir / f"Pulumi.{stack}.yaml"
    target = Target(infra_dir, project, stack, profile, state, config_file, env)
    if not _stack_exists(target):
        init = ["stack", "init", stack, "--secrets-provider", "passphrase", "--no-select", "--non-interactive"]
        _pulumi(target, [*init, "--cwd", str(config_dir)], capture=True, check=True)
    overrides = {"dralab:profile": profile, **(config or {})}
    base_file = infra_dir / f"Pulumi.{stack}.yaml"
    if not base_file.is_file():
        base_file = infra_dir / f"Pulumi.{profile}.yaml"
    doc = stack_config_document(_yaml_load(config_file), _yaml_load(base_file), overrides)
    text = yaml.safe_dump(doc, sort_keys=True)
    if not config_file.is_file() or config_file.read_text() != text:
        atomic_write(config_file, text)
    return target


def _pulumi(target: Target, args: Sequence[str], *, capture: bool, check: bool = False) -> subprocess.CompletedProcess:
    cmd = [str(pulumi_path()), *args]
    proc = subprocess.run(
        cmd,
        env=target.env,
        text=True,
        capture_output=capture,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    if check and proc.returncode != 0:
        tail = ((proc.stderr or "") + (proc.stdout or "")).strip().splitlines()
        raise UserError(f"`pulumi {' '.join(args[:2])}` failed: {tail[-1] if tail else 'no output'}")
    return proc


def _stack_exists(target: Target) -> bool:
    proc = _pulumi(target, ["stack", "ls", "--json", "--cwd", str(target.config_file.parent)], capture=True)
    if proc.returncode != 0:
        return False
    try:
        stacks = json.loads(proc.stdout or "[]")
    except ValueError:
        return False
    return any(s.get("name") in (target.stack, f"organization/{target.project}/{target.stack}") for s in stacks)


def stack_history(target: Target) -> list[dict[str, Any]]:
    """``pulumi stack history --json`` of the target's stack (newest first)."""
    args = ["stack", "history", "--json", "--stack", target.stack, "--cwd", str(target.config_file.parent)]
    proc = _pulumi(target, args, capture=True)
    if proc.returncode != 0:
        return []
    try:
        return list(json.loads(proc.stdout or "[]"))
    except ValueError:
        return []


def run_action(action: str, target: Target, *, capture: bool = False, extra: Sequence[str] = ()) -> PulumiRun:
    """Run ``pulumi <action>`` on the target; output streams to the terminal unless ``capture``."""
    start = time.monotonic()
    json_output = action == "preview"
    args = pulumi_args(action, target.stack, target.config_file, target.infra_dir, json_output=json_output, extra=extra)
    proc = _pulumi(target, args, capture=capture or json_output)
    seconds = time.monotonic() - start
    output = (proc.stdout or "") + (proc.stderr or "")
    run = PulumiRun(action, target.stack, proc.returncode, seconds, {}, output if capture else "")
    if json_output:
        try:
            run.preview = json.loads(proc.stdout or "{}")
            run.changes = preview_summary(run.preview)
        except ValueError:
            run.preview = None
        if not capture:
            sys.stderr.write(proc.stderr or "")
            sys.stdout.write(render_preview(run.preview) if run.preview is not None else proc.stdout or "")
    elif proc.returncode == 0:
        run.changes = change_summary(stack_history(target))
    return run


def describe_changes(summary: Mapping[str, int]) -> str:
    """``2 create, 3 same`` (sorted by operation), or ``no resources``."""
    parts = [f"{count} {op}" for op, count in sorted(summary.items()) if count]
    return ", ".join(parts) or "no resources"


# --------------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------------


def _console():  # rich is imported lazily: `dralab infra --help` stays fast
    from rich.console import Console

    return Console(stderr=True)


@click.group()
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
    for result in build_tools(force=force):
        if result.name == LANGUAGE_HOST:
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


def _run_cli(action: str, profile, stack, cluster_name, infra_dir, state_dir, config_pairs, extra=()) -> None:
    target = prepare_target(
        profile=profile,
        stack=stack,
        cluster=cluster_name,
        infra_dir=infra_dir,
        state=state_dir,
        config=parse_config_pairs(config_pairs),
    )
    console = _console()
    console.print(f"pulumi {action}: stack {target.stack} (profile {profile}), state in {target.state}")
    result = run_action(action, target, extra=extra)
    if result.returncode != 0:
        raise UserError(f"pulumi {action} failed (exit {result.returncode}); its output above says why")
    console.print(f"{action}: {describe_changes(result.changes)} in {result.seconds:.1f}s")


@infra.command()
@_profile_option
@_stack_option
@_cluster_option
@_infra_option
@_state_option
@_config_option
def preview(profile, stack, cluster_name, infra_dir, state_dir, config_pairs) -> None:
    """Show what `up` would change.

    \b
    Example:
      dralab infra preview --profile local
    """
    _run_cli("preview", profile, stack, cluster_name, infra_dir, state_dir, config_pairs)


@infra.command()
@_profile_option
@_stack_option
@_cluster_option
@_infra_option
@_state_option
@_config_option
def up(profile, stack, cluster_name, infra_dir, state_dir, config_pairs) -> None:
    """Create or update the stack's resources (no prompt).

    The passphrase comes from PULUMI_CONFIG_PASSPHRASE (or _FILE); on the local and kind
    profiles it defaults to "dralab-local".

    \b
    Example:
      dralab cluster up && dralab infra up --profile local
    """
    _run_cli("up", profile, stack, cluster_name, infra_dir, state_dir, config_pairs)


@infra.command()
@_profile_option
@_stack_option
@_cluster_option
@_infra_option
@_state_option
@_config_option
def destroy(profile, stack, cluster_name, infra_dir, state_dir, config_pairs) -> None:
    """Delete every resource of the stack (no prompt); the stack and its history stay.

    \b
    Example:
      dralab infra destroy --profile local
    """
    _run_cli("destroy", profile, stack, cluster_name, infra_dir, state_dir, config_pairs)


@infra.command("env")
@_profile_option
@_cluster_option
@_state_option
def env_command(profile, cluster_name, state_dir) -> None:
    """Print shell exports for running the built `pulumi` yourself in infra/.

    \b
    Example:
      eval "$(dralab infra env)" && cd infra && pulumi stack select -c local && pulumi up
    """
    missing = missing_tools()
    if missing:
        raise UserError(f"Pulumi tools missing: {', '.join(missing)}; run `dralab infra build` first")
    state = (state_dir or state_root()).resolve()
    (state / "backend").mkdir(parents=True, exist_ok=True)
    write_language_host()
    kubeconfig = _local_kubeconfig(cluster_name) if profile == "local" else None
    env = pulumi_env(
        os.environ,
        state=state,
        tool_dirs=[pulumi_bin_dir(), provider_bin_dir()],
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


@infra.command("language-host", hidden=True, context_settings={"ignore_unknown_options": True})
@click.argument("argv", nargs=-1, type=click.UNPROCESSED)
def language_host(argv: tuple[str, ...]) -> None:
    """Pulumi's Python language plugin (started by the engine with its address)."""
    serve_language_host(argv)


@infra.command("run-program", hidden=True)
@click.option("--monitor", required=True)
@click.option("--engine", required=True)
@click.option("--project", required=True)
@click.option("--stack", required=True)
@click.option("--parallel", type=int, default=0)
@click.option("--pwd", default=".")
@click.option("--root-directory", default="")
@click.option("--organization", default="")
@click.option("--dry-run", is_flag=True)
@click.argument("program")
@click.argument("args", nargs=-1)
def run_program_command(program: str, args: tuple[str, ...], **opts: Any) -> None:
    """Run one Pulumi Python program against the engine (started by the language host)."""
    sys.exit(run_program(opts, program, args))


if __name__ == "__main__":
    infra()
