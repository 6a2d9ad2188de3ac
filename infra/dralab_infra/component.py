"""The base of the per-profile ComponentResources: one component per profile owns its resources.

``pulumi stack`` shows each profile as one node with its resources below it, and the profile's
outputs are the component's outputs. Resources created before the components existed sat at the
stack's root: every child carries an alias to that place, so an existing stack adopts them in
place (no replacement, which on baremetal would mean resetting a cluster).
"""

from __future__ import annotations

from typing import Any, ClassVar

import pulumi

from dralab_infra.settings import Settings

# Where the profile's resources were before they had a component as parent.
FORMER_PLACE = (pulumi.Alias(parent=pulumi.ROOT_STACK_RESOURCE),)


class Profile(pulumi.ComponentResource):
    """One profile's resources under one component (``dralab:profiles:<Profile>``)."""

    TYPE: ClassVar[str] = "dralab:profiles:Profile"
    outputs: dict[str, Any]

    def __init__(self, name: str, settings: Settings, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        self.settings = settings
        self.outputs = {}

    def child_args(self, **options: Any) -> dict[str, Any]:
        """Resource options of a child (as keywords, for helpers that add their own)."""
        return {"parent": self, "aliases": list(FORMER_PLACE), **options}

    def child(self, **options: Any) -> pulumi.ResourceOptions:
        """ResourceOptions of a child: this component as parent, the alias to its former place."""
        return pulumi.ResourceOptions(**self.child_args(**options))

    def finish(self, outputs: dict[str, Any]) -> None:
        """Record and register the profile's outputs (the program exports them)."""
        self.outputs = outputs
        self.register_outputs(outputs)
