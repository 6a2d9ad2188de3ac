"""dralab's Pulumi language host for Python: what makes ``dralab infra`` work with no Pulumi install.

The Pulumi engine runs a program through a language plugin found on ``PATH`` as
``pulumi-language-python``. Pulumi ships that plugin with its own installs, but its Go module is
not served by the module proxy, so dralab cannot build it. :mod:`dralab_kit.pulumi.toolchain` writes a
launcher under that name which runs this module: a gRPC server speaking Pulumi's LanguageRuntime
protocol that runs each program in a child interpreter with the Pulumi Python SDK.

Where Pulumi is installed normally, its own host runs ``infra/`` and this module is never used.

Usage (by the engine): ``python -m dralab_kit.pulumi.language_host [flags] ENGINE_ADDRESS``; the child:
``python -m dralab_kit.pulumi.language_host run-program --monitor ... -- PROGRAM [ARGS]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dralab.errors import UserError

if TYPE_CHECKING:
    from pulumi.runtime.proto import language_pb2

USER_PROGRAM_EXIT = 32  # the exit code meaning "the error was already shown to the user"
RUN_PROGRAM = "run-program"
MODULE = "dralab_kit.pulumi.language_host"  # also what the launcher runs (toolchain.LANGUAGE_HOST_MODULE)


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
    cmd = [python, "-u", "-m", MODULE, RUN_PROGRAM]
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


def sdk_version(dist: str = "pulumi") -> str:
    """The installed version of a distribution ("" when absent): what GetPluginInfo reports."""
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return ""


def _run_spec(request: language_pb2.RunRequest, engine: str) -> RunSpec:
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


def serve(argv: Sequence[str]) -> None:
    """Serve LanguageRuntime on a free loopback port; print the port (the engine reads it) and block."""
    from concurrent import futures

    import grpc
    from pulumi.runtime.proto import language_pb2, language_pb2_grpc, plugin_pb2

    engine = engine_address(argv)
    version = sdk_version("pulumi")

    class Host(language_pb2_grpc.LanguageRuntimeServicer):
        def Handshake(
            self, request: language_pb2.LanguageHandshakeRequest, context: grpc.ServicerContext
        ) -> language_pb2.LanguageHandshakeResponse:
            return language_pb2.LanguageHandshakeResponse()

        def GetPluginInfo(self, request: Any, context: grpc.ServicerContext) -> plugin_pb2.PluginInfo:
            # request: google.protobuf's Empty (protobuf ships no stubs, so Any)
            return plugin_pb2.PluginInfo(version=version)

        def GetRequiredPlugins(
            self, request: language_pb2.GetRequiredPluginsRequest, context: grpc.ServicerContext
        ) -> language_pb2.GetRequiredPluginsResponse:
            # Providers load on first use (from PATH): nothing to install up front.
            return language_pb2.GetRequiredPluginsResponse()

        def GetRequiredPackages(
            self, request: language_pb2.GetRequiredPackagesRequest, context: grpc.ServicerContext
        ) -> language_pb2.GetRequiredPackagesResponse:
            return language_pb2.GetRequiredPackagesResponse()

        def InstallDependencies(
            self, request: language_pb2.InstallDependenciesRequest, context: grpc.ServicerContext
        ) -> Iterator[language_pb2.InstallDependenciesResponse]:
            # The interpreter is dralab's own environment: its dependencies are installed with dralab.
            return iter(())

        def Run(self, request: language_pb2.RunRequest, context: grpc.ServicerContext) -> language_pb2.RunResponse:
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

    def body() -> None:  # run_in_stack awaits an awaitable result; run_path's namespace is not one
        runpy.run_path(program, run_name="__main__")

    try:
        loop.run_until_complete(pulumi.runtime.run_in_stack(body))
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


def _run_program_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE} {RUN_PROGRAM}")
    for flag in ("--monitor", "--engine", "--project", "--stack"):
        parser.add_argument(flag, required=True)
    parser.add_argument("--parallel", type=int, default=0)
    parser.add_argument("--pwd", default=".")
    parser.add_argument("--root-directory", default="")
    parser.add_argument("--organization", default="")
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("program")
    parser.add_argument("args", nargs="*")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Serve the engine, or (``run-program``) run one program as the host's child."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == [RUN_PROGRAM]:
        ns = _run_program_parser().parse_args(args[1:])
        return run_program(vars(ns), ns.program, ns.args)
    try:
        serve(args)
    except UserError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
