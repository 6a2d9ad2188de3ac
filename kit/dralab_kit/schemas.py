"""The JSON Schemas of the kit's file formats, which ``dralab schema`` finds through its entry points.

``profile`` and ``lab`` come from the harness's models (``harness.profile``, ``harness.lab_model``);
``infra`` is the ``dralab:`` stack config of the Pulumi program in infra/, built here because that
program is not an installed package.
"""

from __future__ import annotations

import sys
from typing import Any


def infra_settings_schema() -> dict[str, Any]:
    """The ``dralab:`` stack config of infra/ (its program is not an installed package)."""
    from dralab_kit.pulumi.runner import default_infra_dir

    infra = str(default_infra_dir())
    if infra not in sys.path:
        sys.path.insert(0, infra)
    from dralab_infra.settings import settings_schema

    return settings_schema()
