"""The kind cluster config: the version's feature gates on every component, CDI, the ``ascend`` handler.

Used by the Pulumi ``kind`` profile and by the e2e workflow (``python -m dralab_kit.provision.kind``),
so both create the same cluster. The Kubernetes version picks the gates (``feature_gates_for``: none
from 1.36 on) and the pinned node image (``kind_release``). kind nodes (v0.31) run containerd 2.2 but kind still ships a
``version = 2`` containerd config, so the patch uses the version 2 plugin names; containerd
migrates them on load.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import yaml

from dralab.errors import UserError
from dralab.versions import KUBERNETES_VERSION, check_supported, feature_gates_for, kind_release

CDI_SPEC_DIRS = ("/etc/cdi", "/var/run/cdi")


def containerd_patch(runtime_handler: str = "ascend") -> str:
    """The containerd config patch: CDI on with both spec dirs, and ``runtime_handler`` backed by runc.

    The handler lets Lab 20's pods (``runtimeClassName: ascend``) run unchanged on kind, where
    there is no Ascend runtime: device nodes and env then come from CDI alone.
    """
    lines = [
        '[plugins."io.containerd.grpc.v1.cri"]',
        "  enable_cdi = true",
        "  cdi_spec_dirs = [" + ", ".join(f'"{d}"' for d in CDI_SPEC_DIRS) + "]",
    ]
    if runtime_handler:
        lines += [
            f'[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.{runtime_handler}]',
            '  runtime_type = "io.containerd.runc.v2"',
        ]
    return "\n".join(lines) + "\n"


def kind_config(
    *,
    workers: int = 1,
    kubernetes_version: str = KUBERNETES_VERSION,
    feature_gates: dict[str, bool] | None = None,
    runtime_handler: str = "ascend",
    pin_image: bool = True,
) -> dict[str, Any]:
    """A kind ``Cluster`` (v1alpha4) of ``kubernetes_version``: one control plane plus ``workers`` workers.

    Top-level ``featureGates`` (the version's, unless ``feature_gates`` is given) reach
    kube-apiserver, kube-controller-manager, kube-scheduler and every kubelet; without any the key
    is left out. ``runtimeConfig`` is not needed because resource.k8s.io/v1 is on by default.
    ``pin_image=False`` leaves the node image to whoever creates the cluster (CI's kind-action).
    """
    if workers < 0:
        raise ValueError("workers must be >= 0")
    version = check_supported(kubernetes_version)
    gates = dict(feature_gates_for(version) if feature_gates is None else feature_gates)
    node: dict[str, Any] = {}
    if pin_image:
        node["image"] = kind_release(version)[1]
    nodes = [{"role": "control-plane", **node}] + [{"role": "worker", **node} for _ in range(workers)]
    config: dict[str, Any] = {"kind": "Cluster", "apiVersion": "kind.x-k8s.io/v1alpha4"}
    if gates:
        config["featureGates"] = gates
    config["containerdConfigPatches"] = [containerd_patch(runtime_handler)]
    config["nodes"] = nodes
    return config


class _BlockDumper(yaml.SafeDumper):
    """Writes multi-line strings (the containerd patch) as literal blocks, readable in review."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _str)


def render(config: dict[str, Any]) -> str:
    """YAML text of a kind config (block style, keys in the order built)."""
    return yaml.dump(config, Dumper=_BlockDumper, sort_keys=False, default_flow_style=False)


def main(argv: list[str] | None = None) -> int:
    """``python -m dralab_kit.provision.kind [--kubernetes V] [--workers N] [--out FILE]``: print or write it."""
    parser = argparse.ArgumentParser(
        prog="python -m dralab_kit.provision.kind",
        description="Write dralab's kind cluster config. Example: python -m dralab_kit.provision.kind --out kind.yaml",
    )
    parser.add_argument("--kubernetes", default=KUBERNETES_VERSION, help=f"the version (default {KUBERNETES_VERSION})")
    parser.add_argument("--workers", type=int, default=1, help="number of worker nodes (default 1)")
    parser.add_argument("--runtime-handler", default="ascend", help="containerd handler backed by runc ('' for none)")
    parser.add_argument("--no-image", action="store_true", help="leave the node image to kind (CI passes node_image)")
    parser.add_argument("--out", help="file to write (default: stdout)")
    args = parser.parse_args(argv)
    if args.workers < 0:
        parser.error("--workers must be >= 0")
    try:
        config = kind_config(
            workers=args.workers,
            kubernetes_version=args.kubernetes,
            runtime_handler=args.runtime_handler,
            pin_image=not args.no_image,
        )
    except UserError as exc:
        parser.error(str(exc))
    text = render(config)
    if args.out:
        from dralab.util import atomic_write

        atomic_write(args.out, text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
