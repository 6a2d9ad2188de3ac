"""What other distributions add to ``dralab``: entry points, looked up by name and loaded only when used.

The kit (``dralab-kit``, in ``kit/`` of a checkout) adds its subcommands to the ``dralab.commands``
group and its file formats to ``dralab.schemas``; the product names no module of the kit, so
``pip install dralab`` works, and answers, without it.
"""

from __future__ import annotations

from importlib import metadata

from dralab.extras import KIT, install_line

# the distribution that brings the lab kit, and the line that installs it
KIT_DISTRIBUTION = KIT
KIT_INSTALL = install_line(KIT, None)

COMMANDS_GROUP = "dralab.commands"
SCHEMAS_GROUP = "dralab.schemas"


def entry_refs(group: str) -> dict[str, str]:
    """``name -> "module:attribute"`` of the installed entry points of ``group`` (none loaded)."""
    return {ep.name: ep.value for ep in metadata.entry_points(group=group)}
