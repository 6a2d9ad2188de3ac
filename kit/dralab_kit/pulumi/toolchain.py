"""The Pulumi toolchain built from Go modules: the CLI, the kubernetes provider, the language launcher.

Nothing is downloaded at run time: the CLI (wrapper module ``pulumi``) and the kubernetes resource
provider (wrapper module ``pulumi_kubernetes``) are built like the cluster binaries, and the Python
language plugin is a launcher for :mod:`dralab_kit.pulumi.language_host`.

Layout: ``${DRALAB_CACHE:-~/.cache/dralab}/bin/pulumi-<v>/`` (``pulumi``, ``pulumi-language-python``)
and ``.../bin/pulumi-kubernetes-v<v>/pulumi-resource-kubernetes``.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dralab.errors import UserError

# The Pulumi CLI built from github.com/pulumi/pulumi/pkg/v3: the nearest release the module proxy
# serves that is not older than the pinned Python SDK (pulumi==3.272.0 on PyPI; pkg/v3 v3.272.0 is
# not served). Keep in step with kit/dralab_kit/gobuild/wrappers/pulumi/go.mod.
PULUMI_VERSION = "v3.274.1"
# The kubernetes provider: the proxy serves its module (provider/v4, which has no tags of its own)
# only at the commit tagged v4.25.0. Keep in step with kit/dralab_kit/gobuild/wrappers/pulumi_kubernetes/go.mod.
KUBERNETES_PROVIDER_VERSION = "4.25.0"
KUBERNETES_PROVIDER_MODULE = "github.com/pulumi/pulumi-kubernetes/provider/v4"
KUBERNETES_PROVIDER_MODULE_VERSION = "v4.0.0-20260115033456-f47bc2d6f199"

LANGUAGE_HOST = "pulumi-language-python"
LANGUAGE_HOST_MODULE = "dralab_kit.pulumi.language_host"
# Python dynamic providers (``pulumi.dynamic``, used by the ``node`` profile) run in a plugin of this
# name, which Pulumi's own installs ship as a script around the SDK's ``pulumi.dynamic`` module.
DYNAMIC_PROVIDER = "pulumi-resource-pulumi-python"
DYNAMIC_PROVIDER_MODULE = "pulumi.dynamic"
PROVIDER_BINARY = "pulumi-resource-kubernetes"


def pulumi_bin_dir() -> Path:
    """The Pulumi CLI and dralab's language launcher for it."""
    from dralab_kit.gobuild import cache_root

    return cache_root() / "bin" / f"pulumi-{PULUMI_VERSION}"


def provider_bin_dir() -> Path:
    """The kubernetes resource provider."""
    from dralab_kit.gobuild import cache_root

    return cache_root() / "bin" / f"pulumi-kubernetes-v{KUBERNETES_PROVIDER_VERSION}"


def pulumi_path() -> Path:
    return pulumi_bin_dir() / "pulumi"


def provider_path() -> Path:
    return provider_bin_dir() / PROVIDER_BINARY


def language_host_path() -> Path:
    return pulumi_bin_dir() / LANGUAGE_HOST


def missing_tools() -> list[str]:
    """Built tools that are not there."""
    return [p.name for p in (pulumi_path(), provider_path()) if not p.is_file()]


def require_tools() -> None:
    """Stop with the fix when the CLI or the provider is not built."""
    missing = missing_tools()
    if missing:
        raise UserError(f"Pulumi tools missing: {', '.join(missing)}; run `dralab infra build` first")


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
        from dralab_kit.gobuild.toolchain import explain_failure

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

    from dralab.util import atomic_write
    from dralab_kit.gobuild import cache_root

    module_dir = _go_module_dir(go, KUBERNETES_PROVIDER_MODULE, KUBERNETES_PROVIDER_MODULE_VERSION)
    cmd_dir = module_dir / "cmd" / PROVIDER_BINARY
    schema = json.loads((cmd_dir / "schema.json").read_text())
    mapping = json.loads((cmd_dir / "terraform-mapping.json").read_text())
    main_go = resources.files("dralab_kit.gobuild").joinpath("wrappers", "pulumi_kubernetes", "main.go").read_bytes()
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
    """Build the Pulumi CLI and the kubernetes provider (one ``go build`` at a time), write the launcher.

    A file lock makes concurrent callers (a test fixture, a shell) wait for one build and then skip it.
    """
    import filelock

    from dralab_kit.gobuild import cache_root

    cache_root().mkdir(parents=True, exist_ok=True)
    with filelock.FileLock(str(cache_root() / ".infra-build.lock")):
        return _build_tools(force, progress, go)


def _build_tools(force: bool, progress: bool, go: str | None) -> list[ToolBuild]:
    from dralab_kit.gobuild import build_go_tools, find_go

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


def language_host_script(python: str, module: str = LANGUAGE_HOST_MODULE) -> str:
    """A plugin executable that runs ``module`` with ``python`` (the language host, or dynamic providers)."""
    return f'#!/bin/sh\nexec {shlex.quote(python)} -m {module} "$@"\n'


def write_language_host(python: str | None = None) -> Path:
    """(Re)write the language launcher and the dynamic-provider launcher next to the CLI, bound to this
    interpreter; returns the language launcher."""
    from dralab.util import atomic_write

    launchers = {
        language_host_path(): LANGUAGE_HOST_MODULE,
        pulumi_bin_dir() / DYNAMIC_PROVIDER: DYNAMIC_PROVIDER_MODULE,
    }
    for path, module in launchers.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        text = language_host_script(python or sys.executable, module)
        if not path.is_file() or path.read_text() != text or not os.access(path, os.X_OK):
            atomic_write(path, text, mode=0o755)
    return language_host_path()
