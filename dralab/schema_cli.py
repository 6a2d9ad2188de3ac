"""``dralab schema``: the JSON Schema of a dralab file format, for editors and checks in CI.

Each schema comes from the typed (pydantic) model that also validates the files, so the two never
disagree. The product's formats are in ``SCHEMAS``; the lab kit adds its own (profile, lab, infra)
through the ``dralab.schemas`` entry points (:mod:`dralab.plugins`).
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from dralab import plugins

# format -> "module:function" returning its JSON Schema
SCHEMAS: dict[str, str] = {
    "config": "dralab.config:config_schema",
}


def schemas() -> dict[str, str]:
    """Every installed format: the kit's entry points, then the product's (a product name always wins)."""
    return {**plugins.entry_refs(plugins.SCHEMAS_GROUP), **SCHEMAS}


def schema_of(kind: str) -> dict[str, Any]:
    """The JSON Schema of format ``kind`` (a key of ``schemas()``)."""
    module, _, attr = schemas()[kind].partition(":")
    build: Callable[[], dict[str, Any]] = getattr(importlib.import_module(module), attr)
    return build()


@click.command()
# the installed formats, looked up when this module is imported: only when `dralab schema` runs
@click.argument("kind", type=click.Choice(sorted(schemas())))
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Write to this file, not stdout.")
def schema(kind: str, out: Path | None) -> None:
    """Print the JSON Schema of a file format (profile, lab and infra come with the lab kit).

    \b
    Example:
      dralab schema profile > profile.schema.json
    """
    text = json.dumps(schema_of(kind), indent=2, sort_keys=True) + "\n"
    if out is None:
        click.echo(text, nl=False)
    else:
        out.write_text(text)
