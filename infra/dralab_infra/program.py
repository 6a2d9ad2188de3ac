"""Entry point: read and validate the stack config, then provision the chosen profile."""

from __future__ import annotations

from typing import Any

import pulumi

from dralab.errors import UserError
from dralab_infra.settings import KNOWN_KEYS, Settings, parse_settings

_OBJECT_KEYS = ("namespaces", "vendors", "chartValues", "hosts")


def read_config(config: pulumi.Config) -> dict[str, Any]:
    """The ``dralab:`` keys this program knows, objects parsed (the SSH key stays a secret, outside)."""
    raw: dict[str, Any] = {}
    for key in KNOWN_KEYS:
        if key == "sshPrivateKey":
            continue
        value = config.get_object(key) if key in _OBJECT_KEYS else config.get(key)
        if value is not None:
            raw[key] = value
    return raw


def settings_from_stack() -> Settings:
    try:
        return parse_settings(read_config(pulumi.Config("dralab")))
    except UserError as exc:
        raise pulumi.RunError(str(exc)) from None


def main() -> None:
    settings = settings_from_stack()
    try:
        if settings.profile == "local":
            from dralab_infra.local import provision

            outputs = provision(settings)
        elif settings.profile == "kind":
            from dralab_infra.kind import provision

            outputs = provision(settings)
        else:
            from dralab_infra.baremetal import provision as provision_baremetal

            key = pulumi.Config("dralab").get_secret("sshPrivateKey")
            if key is None:
                raise UserError(
                    "the baremetal profile needs an SSH key: "
                    "pulumi config set --secret dralab:sshPrivateKey -- < KEYFILE"
                )
            outputs = provision_baremetal(settings, key)
    except UserError as exc:
        raise pulumi.RunError(str(exc)) from None
    pulumi.export("profile", settings.profile)
    for name, value in outputs.items():
        pulumi.export(name, value)
