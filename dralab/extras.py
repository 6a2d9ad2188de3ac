"""Which optional dependency group (pyproject extra) provides a module, so a missing one names its fix.

``pip install dralab`` installs what the webhook, the driver, the monitor and the local cluster
need. Lab replays (pytest, which the harness plugs into), provisioning (Pulumi, Ansible), benchmark
plots and fuzzing, the NVIDIA backend and the test tools are extras; a command that needs one fails
with the ``pip install`` line instead of a traceback.
"""

from __future__ import annotations

from dralab.errors import UserError

# top-level module -> the extra of pyproject.toml that installs it
MODULE_EXTRAS: dict[str, str] = {
    "pulumi": "provision",
    "pulumi_kubernetes": "provision",
    "pulumi_command": "provision",
    "ansible_runner": "provision",
    "ansible": "provision",
    "matplotlib": "bench",
    "hypothesis": "bench",
    "pynvml": "nvidia",
    # `dralab lab run` replays through pytest; the container image holds neither pytest nor the
    # harness and its labs (the Dockerfile builds its wheel from dralab/ alone)
    "pytest": "lab",
    "_pytest": "lab",
    "harness": "lab",
    "labs": "lab",
    "grpc_tools": "test",
    "celpy": "test",
    "testinfra": "test",
}


def missing_extra(exc: ModuleNotFoundError) -> UserError | None:
    """A ``UserError`` naming the extra that provides the missing module, or None when no extra does."""
    top = (exc.name or "").split(".")[0]
    extra = MODULE_EXTRAS.get(top)
    if extra is None:
        return None
    return UserError(
        f"{top} is not installed; it comes with dralab's {extra!r} extra: "
        f"pip install 'dralab[{extra}]' (from a checkout: pip install -e '.[{extra}]')"
    )
