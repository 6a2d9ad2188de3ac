"""Entry point: read and validate the stack config, then build the chosen profile's component."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pulumi
from pulumi.runtime.config import is_config_secret

from dralab.errors import UserError
from dralab_infra.settings import KNOWN_KEYS, Settings, parse_settings

if TYPE_CHECKING:
    from dralab_infra.component import Profile

_OBJECT_KEYS = ("namespaces", "vendors", "chartValues", "hosts")
# Keys whose Pulumi.yaml default is an empty placeholder meaning "not set" (their real default
# depends on the profile or the backend): an empty value is dropped, so a run under the CLI (which
# applies Pulumi.yaml's defaults) and one under mocks (which does not) see the same settings.
PLACEHOLDER_KEYS = ("backend", "vendors", "kubeconfig", "hosts", "chartValues")
SSH_KEY = "sshPrivateKey"


def without_placeholders(raw: dict[str, Any]) -> dict[str, Any]:
    """``raw`` without the empty placeholders Pulumi.yaml declares as defaults."""
    return {k: v for k, v in raw.items() if not (k in PLACEHOLDER_KEYS and v in ("", [], {}))}


def read_config(config: pulumi.Config) -> dict[str, Any]:
    """The ``dralab:`` keys this program knows, objects parsed (the SSH key stays a secret, outside)."""
    raw: dict[str, Any] = {}
    for key in KNOWN_KEYS:
        if key == SSH_KEY:
            continue
        value = config.get_object(key) if key in _OBJECT_KEYS else config.get(key)
        if value is not None:
            raw[key] = value
    return without_placeholders(raw)


def settings_from_stack() -> Settings:
    try:
        return parse_settings(read_config(pulumi.Config("dralab")))
    except UserError as exc:
        raise pulumi.RunError(str(exc)) from None


def ssh_private_key() -> pulumi.Output[str]:
    """The baremetal SSH key, which must be stored encrypted (Pulumi.yaml cannot demand that of an
    optional key: a declared secret would be required on every profile)."""
    key = pulumi.Config("dralab").get_secret(SSH_KEY)
    if key is None:
        raise UserError(
            "the baremetal profile needs an SSH key: pulumi config set --secret dralab:sshPrivateKey -- < KEYFILE"
        )
    if not is_config_secret(f"dralab:{SSH_KEY}"):
        raise UserError(
            "dralab:sshPrivateKey is stored in plain text: set it again with --secret "
            "(pulumi config set --secret dralab:sshPrivateKey -- < KEYFILE)"
        )
    return key


def build(settings: Settings) -> Profile:
    """The chosen profile's ComponentResource (``dralab:profiles:<Profile>``, named ``dralab-<profile>``)."""
    name = f"dralab-{settings.profile}"
    if settings.profile == "local":
        from dralab_infra.local import LocalProfile

        return LocalProfile(name, settings)
    if settings.profile == "node":
        from dralab_infra.node import NodeProfile

        return NodeProfile(name, settings)
    if settings.profile == "kind":
        from dralab_infra.kind import KindProfile

        return KindProfile(name, settings)
    from dralab_infra.baremetal import BaremetalProfile

    return BaremetalProfile(name, settings, ssh_private_key())


def main() -> None:
    settings = settings_from_stack()
    try:
        profile = build(settings)
    except UserError as exc:
        raise pulumi.RunError(str(exc)) from None
    pulumi.export("profile", settings.profile)
    for name, value in profile.outputs.items():
        pulumi.export(name, value)
