"""Run dralab's Pulumi program under pulumi.runtime.set_mocks (no CLI, no cloud, no cluster)."""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import pytest
from pulumi.runtime import mocks as pulumi_mocks

INFRA = Path(__file__).resolve().parents[3] / "infra"
if str(INFRA) not in sys.path:
    sys.path.insert(0, str(INFRA))


SECRET_SIG = "4dabf18193072939515e22adb298388d"  # how the Pulumi wire format marks a secret value


def unwrap(value: Any) -> tuple[Any, bool]:
    """(plain value, whether any part was secret)."""
    if isinstance(value, dict):
        if SECRET_SIG in value and "value" in value:
            plain, _ = unwrap(value["value"])
            return plain, True
        pairs = {k: unwrap(v) for k, v in value.items()}
        return {k: p for k, (p, _) in pairs.items()}, any(s for _, s in pairs.values())
    if isinstance(value, list):
        pairs = [unwrap(v) for v in value]
        return [p for p, _ in pairs], any(s for _, s in pairs)
    return value, False


@dataclass
class Created:
    typ: str
    name: str
    inputs: dict[str, Any]
    secret_inputs: set[str] = field(default_factory=set)
    parent: str = ""  # the parent's URN as the engine gets it ("" for the stack itself)
    aliased_to_root: bool = False  # carries an alias to its place without a parent (before components)


@dataclass
class Recorder(pulumi.runtime.Mocks):
    """Records every resource; Commands answer with a plausible stdout."""

    resources: list[Created] = field(default_factory=list)
    registrations: dict[str, Any] = field(default_factory=dict)  # name -> RegisterResourceRequest

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        plain, secret = {}, set()
        for key, value in args.inputs.items():
            plain[key], is_secret = unwrap(value)
            if is_secret:
                secret.add(key)
        request = self.registrations.get(args.name)
        parent = request.parent if request is not None else ""
        to_root = request is not None and any(a.spec.noParent for a in request.aliases)
        self.resources.append(Created(args.typ, args.name, plain, secret, parent, to_root))
        outputs = dict(plain)
        if args.typ.startswith("command:"):
            outputs["stdout"] = f"stdout-of-{args.name}"
            if args.name == "join-command":
                outputs["stdout"] = (
                    "kubeadm join 192.0.2.1:6443 --token abc.def --discovery-token-ca-cert-hash sha256:00\n"
                )
        if args.typ == "pulumi-python:dynamic:Resource" and "revision" in outputs:
            outputs["image"] = "dralab.local/dralab:0.1.0-test"  # what NodeImages answers once imported
        return f"{args.name}-id", outputs

    def call(self, args: pulumi.runtime.MockCallArgs):
        return {}

    def of_type(self, typ: str) -> list[Created]:
        return [r for r in self.resources if r.typ == typ]

    def named(self, name: str) -> Created:
        found = [r for r in self.resources if r.name == name]
        assert len(found) == 1, f"{name}: {[r.name for r in self.resources]}"
        return found[0]


def run_program(config: dict[str, Any], secrets: dict[str, str] | None = None) -> Recorder:
    """Run infra/dralab_infra's program with ``dralab:`` config ``config``; returns what it created."""
    recorder = Recorder()
    # Pulumi's mocks need a current event loop; an earlier asyncio test in the same worker may have
    # closed and unset it.
    asyncio.set_event_loop(asyncio.new_event_loop())
    pulumi.runtime.set_mocks(recorder, project="dralab", stack="test", preview=False)
    values = {f"dralab:{k}": v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}
    values.update({f"dralab:{k}": v for k, v in (secrets or {}).items()})
    pulumi.runtime.set_all_config(values, secret_keys=[f"dralab:{k}" for k in secrets or {}])

    from dralab_infra.program import main

    @pulumi.runtime.test
    def program():
        main()

    # The mocks hand new_resource no parent or aliases: keep each request for the recorder.
    register = pulumi_mocks.MockMonitor.RegisterResource

    def keep(monitor, request):
        recorder.registrations[request.name] = request
        return register(monitor, request)

    pulumi_mocks.MockMonitor.RegisterResource = keep
    try:
        program()
    finally:
        pulumi_mocks.MockMonitor.RegisterResource = register
    return recorder


@pytest.fixture
def kubeconfig(tmp_path: Path) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text("apiVersion: v1\nkind: Config\nclusters: []\n")
    return str(path)
