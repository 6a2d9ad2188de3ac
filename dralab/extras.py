"""Which distribution and optional dependency group (extra) provides a module, so a missing one names its fix.

``pip install dralab`` installs what the webhook, the driver and the monitor need. The lab kit
(``dralab-kit``: the local cluster, lab replays, provisioning, benchmarks) is a distribution of its
own, with extras of its own: lab replays (pytest, which the harness plugs into), provisioning
(Pulumi, Ansible), benchmark plots and fuzzing, and the test tools. The NVIDIA backend is the
product's ``nvidia`` extra. A command that needs one fails with the ``pip install`` line instead
of a traceback.
"""

from __future__ import annotations

from dralab.errors import UserError

PRODUCT = "dralab"
KIT = "dralab-kit"
# the folder of each distribution in a checkout (pip install -e <folder>)
CHECKOUT_FOLDER = {PRODUCT: ".", KIT: "./kit"}

# top-level module -> (distribution, extra of its pyproject.toml; None: the distribution itself)
MODULE_EXTRAS: dict[str, tuple[str, str | None]] = {
    "pynvml": (PRODUCT, "nvidia"),
    # the kit's own packages: the container image holds none of them (its wheel is the product's)
    "dralab_kit": (KIT, None),
    "harness": (KIT, None),
    "labs": (KIT, None),
    "pulumi": (KIT, "provision"),
    "pulumi_kubernetes": (KIT, "provision"),
    "pulumi_command": (KIT, "provision"),
    "ansible_runner": (KIT, "provision"),
    "ansible": (KIT, "provision"),
    "matplotlib": (KIT, "bench"),
    "hypothesis": (KIT, "bench"),
    # `dralab lab run` replays through pytest; the image holds neither pytest nor the kit
    "pytest": (KIT, "lab"),
    "_pytest": (KIT, "lab"),
    "grpc_tools": (KIT, "test"),
    "celpy": (KIT, "test"),
    "testinfra": (KIT, "test"),
}


def install_line(distribution: str, extra: str | None) -> str:
    """``pip install 'dist[extra]' (from a checkout: pip install -e 'folder[extra]')``."""
    folder = CHECKOUT_FOLDER[distribution]
    if extra is None:
        return f"pip install {distribution} (from a checkout: pip install -e {folder})"
    return f"pip install '{distribution}[{extra}]' (from a checkout: pip install -e '{folder}[{extra}]')"


def missing_extra(exc: ModuleNotFoundError) -> UserError | None:
    """A ``UserError`` naming what installs the missing module, or None when nothing of dralab's does."""
    top = (exc.name or "").split(".")[0]
    if top not in MODULE_EXTRAS:
        return None
    distribution, extra = MODULE_EXTRAS[top]
    source = distribution if extra is None else f"{distribution}'s {extra!r} extra"
    return UserError(f"{top} is not installed; it comes with {source}: {install_line(distribution, extra)}")
