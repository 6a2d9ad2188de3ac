"""A Dockerfile as its instructions: what the image tests read to check what the build copies and runs,
and which base images its stages start from (to check that each is pinned by digest)."""

from __future__ import annotations

import re
from collections.abc import Mapping

# ``name:tag@sha256:<64 hex>``: the digest decides what is pulled, the tag beside it says what it was
PINNED = re.compile(r"^[a-z0-9][a-z0-9._/:-]*?:[\w][\w.-]{0,127}@sha256:[0-9a-f]{64}$")
_VARIABLE = re.compile(r"\$\{(\w+)\}|\$(\w+)")


def instructions(text: str) -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` per instruction, continuation lines joined, comments dropped (pure)."""
    joined = re.sub(r"\\\n", " ", text)
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            op, _, rest = line.partition(" ")
            out.append((op.upper(), " ".join(rest.split())))
    return out


def base_images(text: str, build_args: Mapping[str, str] | None = None) -> list[str]:
    """The image each stage starts from, with ``${ARG}`` expanded (the global ARG defaults, overridden
    by ``build_args`` as ``--build-arg`` does); stages built on an earlier stage are left out (pure)."""
    values: dict[str, str] = {}
    stages: set[str] = set()
    out: list[str] = []
    seen_from = False
    for op, rest in instructions(text):
        if op == "ARG" and not seen_from:  # only the ARGs before the first FROM apply to FROM lines
            name, _, default = rest.partition("=")
            values[name] = (build_args or {}).get(name, default)
        elif op == "FROM":
            seen_from = True
            words = [w for w in rest.split() if not w.startswith("--")]
            image = _VARIABLE.sub(lambda m: values.get(m.group(1) or m.group(2), ""), words[0])
            if image.lower() not in stages:
                out.append(image)
            if len(words) >= 3 and words[1].upper() == "AS":
                stages.add(words[2].lower())
    return out


def unpinned(text: str) -> list[str]:
    """The base images not written as ``name:tag@sha256:digest`` (pure; empty when all are pinned)."""
    return [image for image in base_images(text) if not PINNED.match(image)]
