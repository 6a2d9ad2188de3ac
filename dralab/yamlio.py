"""Strict YAML loading: every YAML file dralab reads that it did not write itself goes through here.

Why: PyYAML's ``safe_load`` keeps the *last* value of a key written twice in one mapping and says
nothing. In a lab, a config or a profile that silently drops a setting (two ``evidence:`` lines,
two ``maxClaimsPerPod:``) means dralab runs with something other than what the file seems to say,
so a repeated key is refused, naming the file, the line and the key.

:class:`StrictLoader` is a :class:`yaml.SafeLoader` whose mapping construction checks the keys
written in each mapping before building it; the line reported is the repeated key node's
``start_mark`` (1-based). Merge keys (``<<: *anchor``) keep working: keys brought in by a merge
may be overridden by keys written in the mapping itself, as YAML's merge rules say; only keys
written twice in the same mapping are refused. Everything else is ``yaml.safe_load``'s behaviour.
"""

from __future__ import annotations

from collections.abc import Hashable
from pathlib import Path
from typing import Any

import yaml

from dralab.errors import UserError

MERGE_TAG = "tag:yaml.org,2002:merge"


class DuplicateKeyError(UserError):
    """A key written twice in one YAML mapping (a :class:`UserError`: it passes ``except yaml.YAMLError``)."""

    def __init__(self, source: str, line: int, key: Any, first_line: int) -> None:
        self.source, self.line, self.key, self.first_line = source, line, key, first_line
        super().__init__(
            f"{source}:{line}: duplicate key {key!r} in one mapping (first at line {first_line}): "
            "remove or rename one of them"
        )


class StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a key repeated in one mapping (:class:`DuplicateKeyError`)."""

    source = "<yaml>"  # set per load by :func:`loader_for`, for the message

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == MERGE_TAG:
                    continue  # merged keys are not written here: they may be overridden
                key = self.construct_object(key_node, deep=True)
                if not isinstance(key, Hashable):
                    continue  # the base constructor refuses an unhashable key with its own message
                line = key_node.start_mark.line + 1
                if key in seen:
                    raise DuplicateKeyError(self.source, line, key, seen[key])
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


def loader_for(source: str) -> type[StrictLoader]:
    """A :class:`StrictLoader` class whose messages name ``source`` (a file path or a description)."""
    return type("StrictLoader", (StrictLoader,), {"source": source})


def load(text: str, source: str) -> Any:
    """The one YAML document in ``text``, strictly; ``source`` names it in errors (the path, usually)."""
    return yaml.load(text, Loader=loader_for(source))


def load_all(text: str, source: str) -> list[Any]:
    """Every YAML document in ``text``, strictly (empty documents come back as None)."""
    return list(yaml.load_all(text, Loader=loader_for(source)))


def load_file(path: str | Path) -> Any:
    """The YAML document in the file at ``path``, strictly, named by ``path`` as given."""
    return load(Path(path).read_text(), str(path))
