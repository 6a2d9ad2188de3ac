"""``dralab schema``: the JSON Schema of a dralab file format, for editors and checks in CI.

Each schema comes from the typed (pydantic) model that also validates the files, so the two never
disagree. A format joins by an entry in ``SCHEMAS``.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

# format -> "module:function" returning its JSON Schema
SCHEMAS: dict[str, str] = {
    "profile": "harness.profile:profile_schema",
    "infra": "dralab.schema_cli:infra_settings_schema",
    "config": "dralab.config:config_schema",
    "lab": "harness.lab_model:lab_schema",
}


def infra_settings_schema() -> dict[str, Any]:
    """The ``dralab:`` stack config of infra/ (its program is not an installed package)."""
    import sys

    from dralab.pulumi.runner import default_infra_dir

    infra = str(default_infra_dir())
    if infra not in sys.path:
        sys.path.insert(0, infra)
    from dralab_infra.settings import settings_schema

    return settings_schema()


def schema_of(kind: str) -> dict[str, Any]:
    """The JSON Schema of format ``kind`` (a key of ``SCHEMAS``)."""
    module, _, attr = SCHEMAS[kind].partition(":")
    build: Callable[[], dict[str, Any]] = getattr(importlib.import_module(module), attr)
    return build()


@click.command()
@click.argument("kind", type=click.Choice(sorted(SCHEMAS)))
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Write to this file, not stdout.")
def schema(kind: str, out: Path | None) -> None:
    """Print the JSON Schema of a file format.

    \b
    Example:
      dralab schema profile > profile.schema.json
    """
    text = json.dumps(schema_of(kind), indent=2, sort_keys=True) + "\n"
    if out is None:
        click.echo(text, nl=False)
    else:
        out.write_text(text)
