#!/usr/bin/python
"""Ansible module: set keys of containerd's CRI plugin config in place, for config version 2, 3 or 4.

containerd 1.7 (``version = 2``) names the CRI plugin ``plugins."io.containerd.grpc.v1.cri"``;
containerd 2.x (``version = 3``/``4``) names the runtime part ``plugins.'io.containerd.cri.v1.runtime'``.
The module edits only the lines of the keys it sets, so every other setting, comment and the
file's layout stay as they were; it needs only the Python standard library on the host.
"""

from __future__ import annotations

import json
import os
import re
import tempfile

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: containerd_cri_config
author: dralab
version_added: "1.0.0"
short_description: Set keys of the containerd CRI plugin config (versions 2, 3, 4), keeping everything else
options:
  path: {description: config file, type: path, required: true}
  settings:
    description: >-
      list of {table, key, value, versions}; table is relative to the CRI plugin table
      ("" for the table itself, e.g. containerd.runtimes.ascend); versions limits a setting to
      config versions (default all).
    type: list
    elements: dict
    required: true
  default_version: {description: config version to write when the file is missing or empty, type: int, default: 2}
"""

PLUGIN_TABLES = {
    2: ("plugins", "io.containerd.grpc.v1.cri"),
    3: ("plugins", "io.containerd.cri.v1.runtime"),
    4: ("plugins", "io.containerd.cri.v1.runtime"),
}
_HEADER = re.compile(r"^\s*\[(?!\[)(.*)\]\s*(#.*)?$")
_BARE = re.compile(r"^[A-Za-z0-9_-]+$")
_VERSION = re.compile(r"^\s*version\s*=\s*(\d+)\s*(#.*)?$")


class ConfigError(Exception):
    """The file cannot be edited safely; the message says why and what to do."""


# --- a small TOML subset: table headers, and values that are booleans, integers, strings or arrays ---


def split_key(text):
    """Split a dotted TOML key (``plugins."io.containerd.grpc.v1.cri".containerd``) into its parts."""
    parts, buf, quote, i = [], "", None, 0
    text = text.strip()
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\" and quote == '"' and i + 1 < len(text):
                buf += text[i + 1]
                i += 2
                continue
            if ch == quote:
                quote = None
            else:
                buf += ch
        elif ch in "\"'":
            quote = ch
        elif ch == ".":
            parts.append(buf.strip())
            buf = ""
        elif not ch.isspace():
            buf += ch
        i += 1
    if quote:
        raise ConfigError(f"unterminated quote in key {text!r}")
    parts.append(buf.strip())
    return tuple(parts)


def render_key(parts, quote='"'):
    return ".".join(p if _BARE.match(p) else quote + p + quote for p in parts)


def parse_value(text):
    """Parse one TOML value of the supported subset; ValueError when it is something else."""
    value, rest = _parse(text.strip(), 0)
    tail = text.strip()[rest:].strip()
    if tail and not tail.startswith("#"):
        raise ValueError(f"trailing text {tail!r}")
    return value


def _skip(text, i):
    while i < len(text):
        if text[i].isspace() or text[i] == ",":
            i += 1
        elif text[i] == "#":
            while i < len(text) and text[i] != "\n":
                i += 1
        else:
            break
    return i


def _parse(text, i):
    if text.startswith("true", i):
        return True, i + 4
    if text.startswith("false", i):
        return False, i + 5
    if i < len(text) and text[i] in "\"'":
        quote, j, out = text[i], i + 1, ""
        while j < len(text) and text[j] != quote:
            if quote == '"' and text[j] == "\\":
                out += {"n": "\n", "t": "\t"}.get(text[j + 1], text[j + 1])
                j += 2
                continue
            out += text[j]
            j += 1
        if j >= len(text):
            raise ValueError("unterminated string")
        return out, j + 1
    if i < len(text) and text[i] == "[":
        items, j = [], _skip(text, i + 1)
        while j < len(text) and text[j] != "]":
            item, j = _parse(text, j)
            items.append(item)
            j = _skip(text, j)
        if j >= len(text):
            raise ValueError("unterminated array")
        return items, j + 1
    match = re.compile(r"[+-]?\d+").match(text, i)
    if match:
        return int(match.group(0)), match.end()
    raise ValueError(f"unsupported value at {text[i : i + 20]!r}")


def render_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(render_value(v) for v in value) + "]"
    raise ConfigError(f"cannot write a value of type {type(value).__name__}")


def _value_extent(lines, start, first):
    """Index after the last line of a value that begins on ``lines[start]`` (arrays may span lines)."""
    depth, quote, i, text = 0, None, start, first
    while True:
        j = 0
        while j < len(text):
            ch = text[j]
            if quote:
                if ch == "\\" and quote == '"':
                    j += 1
                elif ch == quote:
                    quote = None
            elif ch in "\"'":
                quote = ch
            elif ch == "#":
                break
            elif ch == "[":
                depth += 1
            elif ch == "]":
                depth -= 1
            j += 1
        if depth <= 0 or i + 1 >= len(lines):
            return i + 1
        i += 1
        text = lines[i]


# --- the document ---


def config_version(lines):
    """The top-level ``version`` (None when absent); only lines before the first table count."""
    for line in lines:
        if _HEADER.match(line):
            break
        match = _VERSION.match(line)
        if match:
            return int(match.group(1))
    return None


def _tables(lines):
    """[(key parts, header line index)] in file order."""
    out = []
    for idx, line in enumerate(lines):
        match = _HEADER.match(line)
        if match:
            out.append((split_key(match.group(1)), idx))
    return out


def _span(lines, parts):
    tables = _tables(lines)
    for n, (key, idx) in enumerate(tables):
        if key == parts:
            end = tables[n + 1][1] if n + 1 < len(tables) else len(lines)
            return idx, end
    return None


def set_key(lines, parts, key, value, quote='"'):
    """Set ``key = value`` in table ``parts``; returns True when ``lines`` changed."""
    span = _span(lines, parts)
    rendered = render_value(value)
    if span is None:
        if lines and lines[-1].strip():
            lines.append("")
        lines.append(f"[{render_key(parts, quote)}]")
        lines.append(f"  {key} = {rendered}")
        return True
    head, end = span
    key_re = re.compile(r"^(\s*)(%s|\"%s\"|'%s')\s*=\s*(.*)$" % ((re.escape(key),) * 3))
    indent, last_content = None, head
    i = head + 1
    while i < end:
        line = lines[i]
        match = key_re.match(line)
        if match:
            stop = _value_extent(lines, i, match.group(3))
            old = "\n".join([match.group(3), *lines[i + 1 : stop]])
            try:
                same = parse_value(old) == value and type(parse_value(old)) is type(value)
            except ValueError:
                same = False
            if same:
                return False
            lines[i:stop] = [f"{match.group(1)}{key} = {rendered}"]
            return True
        if line.strip() and not line.strip().startswith("#"):
            last_content = i
            if indent is None:
                indent = line[: len(line) - len(line.lstrip())]
            i = _value_extent(lines, i, line.split("=", 1)[-1]) if "=" in line else i + 1
            last_content = i - 1
            continue
        i += 1
    if indent is None:
        header = lines[head]
        indent = header[: len(header) - len(header.lstrip())] + "  "
    lines.insert(last_content + 1, f"{indent}{key} = {rendered}")
    return True


def _lookup(doc, parts):
    for part in parts:
        if not isinstance(doc, dict) or part not in doc:
            return None
        doc = doc[part]
    return doc


def apply(text, settings, default_version):
    """Return (new text, version, changed keys) for ``settings`` applied to ``text``."""
    lines = text.splitlines()
    version = config_version(lines)
    if version is None:
        if any(line.strip() and not line.strip().startswith("#") for line in lines):
            raise ConfigError(
                "the containerd config has no 'version' key (a version 1 config): "
                "migrate it with 'containerd config migrate' or set version = 2"
            )
        version = int(default_version)
        lines = [f"version = {version}", "", *lines]
    if version not in PLUGIN_TABLES:
        raise ConfigError(f"containerd config version {version} is not supported (2, 3 or 4)")
    quote = '"' if version == 2 else "'"
    changed = []
    for setting in settings:
        versions = setting.get("versions")
        if versions and version not in [int(v) for v in versions]:
            continue
        rel = split_key(setting["table"]) if setting.get("table") else ()
        parts = PLUGIN_TABLES[version] + rel
        if set_key(lines, parts, setting["key"], setting["value"], quote):
            changed.append(render_key(parts) + "." + setting["key"])
    new = "\n".join(lines) + "\n"
    _verify(new, settings, version)
    return new, version, changed


def _verify(text, settings, version):
    """Where the host has tomllib (Python >= 3.11), check that the result parses and holds the values."""
    try:
        import tomllib
    except ImportError:
        return
    try:
        doc = tomllib.loads(text)
    except Exception as exc:
        raise ConfigError(f"editing would leave invalid TOML ({exc}); set the keys by hand") from None
    for setting in settings:
        versions = setting.get("versions")
        if versions and version not in [int(v) for v in versions]:
            continue
        rel = split_key(setting["table"]) if setting.get("table") else ()
        got = _lookup(doc, PLUGIN_TABLES[version] + rel + (setting["key"],))
        if got != setting["value"]:
            raise ConfigError(
                "after editing, {} is {!r}, not {!r} (is it also set by a dotted key or inline table?)".format(
                    setting["key"], got, setting["value"]
                )
            )


def main():
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "settings": {"type": "list", "elements": "dict", "required": True},
            "default_version": {"type": "int", "default": 2},
        },
        supports_check_mode=True,
    )
    path = module.params["path"]
    before = ""
    if os.path.exists(path):
        with open(path) as fh:
            before = fh.read()
    try:
        after, version, changed = apply(before, module.params["settings"], module.params["default_version"])
    except ConfigError as exc:
        module.fail_json(msg=f"{path}: {exc}")
    if after == before or not changed:
        module.exit_json(changed=False, version=version, keys=[])
    diff = {"before": before, "after": after, "before_header": path, "after_header": path}
    if not module.check_mode:
        directory = os.path.dirname(path) or "."
        if not os.path.isdir(directory):
            os.makedirs(directory, 0o755)
        fd, tmp = tempfile.mkstemp(prefix=".config.toml.", dir=directory)
        with os.fdopen(fd, "w") as fh:
            fh.write(after)
            fh.flush()
            os.fsync(fh.fileno())
        if os.path.exists(path):
            module.atomic_move(tmp, path)
        else:
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
    module.exit_json(changed=True, version=version, keys=changed, diff=diff)


if __name__ == "__main__":
    main()
