"""Jinja filters for dralab's roles: read npu-smi output, compare versions, choose and merge feature gates.

Pure functions (no I/O) so they are unit-tested directly; Ansible finds them in the
``dralab.node`` collection, so roles and playbooks call them as ``dralab.node.<name>`` from anywhere.
"""

from __future__ import annotations

import re

_KV = re.compile(r"^\s*([A-Za-z][A-Za-z0-9 _-]*?)\s*:\s*(.*?)\s*$")


def _pairs(text):
    for line in (text or "").splitlines():
        match = _KV.match(line)
        if match:
            yield match.group(1).lower(), match.group(2)


def npu_smi_ids(text):
    """NPU ids from ``npu-smi info -l`` (the ``NPU ID : N`` lines), in order, without duplicates."""
    ids = []
    for key, value in _pairs(text):
        if key == "npu id" and value.isdigit() and int(value) not in ids:
            ids.append(int(value))
    return ids


def npu_smi_device_share(text, npu_id=None):
    """Chips and their device-share status from ``npu-smi info -t device-share [-i ID]``.

    The output lists, per NPU, ``NPU ID`` and ``Chip Count``, then per chip ``Device-share Status``
    followed by ``Chip ID`` (Lab 20's capture); a status is paired with the next chip id, or with
    the previous one when the id came first. Returns ``[{npu_id, chip_id, enabled}]``.
    """
    chips, npu, status, chip = [], npu_id, None, None

    def flush():
        nonlocal status, chip
        if status is not None and chip is not None and npu is not None:
            chips.append({"npu_id": int(npu), "chip_id": int(chip), "enabled": status})
            status, chip = None, None

    for key, value in _pairs(text):
        if key == "npu id" and value.isdigit():
            status, chip = None, None
            npu = int(value)
        elif key == "device-share status":
            status = value.strip().lower() in ("true", "enable", "enabled", "1", "on")
            flush()
        elif key == "chip id" and value.isdigit():
            chip = int(value)
            flush()
    return chips


def npu_chips_to_enable(results):
    """From the registered loop of device-share queries: the chips whose device-share is off."""
    out = []
    for result in results:
        for chip in npu_smi_device_share(result.get("stdout", ""), result.get("item")):
            if not chip["enabled"]:
                out.append({"npu_id": chip["npu_id"], "chip_id": chip["chip_id"]})
    return out


def npu_driver_version(text):
    """The driver version from ``/usr/local/Ascend/driver/version.info`` (``Version=25.5.1``)."""
    for line in (text or "").splitlines():
        key, _, value = line.partition("=")
        if key.strip().lower() in ("version", "package_version") and value.strip():
            return value.strip()
    return ""


def version_tuple(text):
    """``25.5.1`` -> (25, 5, 1); non-numeric parts end the tuple (``25.5.rc1`` -> (25, 5))."""
    out = []
    for part in str(text).strip().lstrip("vV").split("."):
        match = re.match(r"\d+", part)
        if not match:
            break
        out.append(int(match.group(0)))
        if match.group(0) != part:
            break
    return tuple(out)


def version_at_least(text, minimum):
    """True when version ``text`` is ``minimum`` or newer; an unreadable version is not."""
    have = version_tuple(text)
    return bool(have) and have >= version_tuple(minimum)


def containerd_layout(version_output):
    """Config version for a new containerd config from ``containerd --version`` output.

    1.x -> 2, 2.0-2.2 -> 3, 2.3 and later -> 4; unreadable output -> 2 (what 1.7 and 2.x both read).
    """
    match = re.search(r"\sv?(\d+)\.(\d+)\.\d+", " " + (version_output or ""))
    if not match:
        return 2
    major, minor = int(match.group(1)), int(match.group(2))
    if major < 2:
        return 2
    return 4 if (major, minor) >= (2, 3) else 3


def gates_missing(current, wanted):
    """The gates of ``wanted`` that ``current`` (a featureGates mapping, maybe None) does not already set."""
    current = current or {}
    return {name: on for name, on in (wanted or {}).items() if current.get(name) is not on}


def _gates_text(gates):
    return ",".join("{}={}".format(k, "true" if v else "false") for k, v in gates.items())


def merge_gate_flag(command, wanted):
    """A component's command list with ``wanted`` merged into its ``--feature-gates`` flag.

    Gates already there keep their order and value unless ``wanted`` changes them; a missing
    flag is appended. The list is returned unchanged when nothing differs.
    """
    command = list(command or [])
    for idx, arg in enumerate(command):
        if arg.startswith("--feature-gates="):
            gates = {}
            for part in filter(None, arg.split("=", 1)[1].split(",")):
                name, _, value = part.partition("=")
                gates[name.strip()] = value.strip().lower() == "true"
            if not gates_missing(gates, wanted):
                return command
            gates.update(wanted)
            command[idx] = "--feature-gates=" + _gates_text(gates)
            return command
    if not wanted:
        return command
    return [*command, "--feature-gates=" + _gates_text(wanted)]


def kubernetes_version(text):
    """The first ``vX.Y.Z`` in ``text`` (``Kubernetes v1.36.3``, what ``kubelet --version`` prints); "" when none."""
    match = re.search(r"\bv\d+\.\d+\.\d+\b", text or "")
    return match.group(0) if match else ""


def feature_gates_for(stages, version, wanted):
    """The ``--feature-gates`` a component of ``version`` needs so that every ``wanted`` gate is on.

    ``stages`` is the role's generated ``kubelet_feature_gates_stages`` (minor -> gate -> pass,
    default or locked). The rule is dralab.versions.feature_gates_for's, and a unit test
    runs both: a gate is passed (true) only where the version has it off by default; one that is on
    by default or locked is left out; one the version does not know is an error; a name the table
    never mentions is passed as asked. A minor newer than the table's last row behaves like that row.
    """
    match = re.match(r"^v?1\.(\d+)\.\d+$", str(version or "").strip())
    if not match:
        raise ValueError(
            f"no Kubernetes version to choose feature gates for ({version!r}): "
            "set kubelet_feature_gates_kubernetes_version (e.g. v1.36.3)"
        )
    minor = int(match.group(1))
    rows = {int(k): dict(v) for k, v in stages.items()}
    if minor < min(rows):
        raise ValueError(f"Kubernetes {version} is too old for dralab: it needs v1.{min(rows)} or newer")
    row = rows[max(m for m in rows if m <= minor)]
    known = {gate for gates in rows.values() for gate in gates}
    gates = {}
    for gate in wanted or ():
        how = row.get(gate)
        if how is None and gate in known:
            raise ValueError(f"Kubernetes {version} has no feature gate {gate}: use a newer version")
        if how in (None, "pass"):
            gates[gate] = True
    return gates


class FilterModule:
    """Registers the filters; their FQCN is ``dralab.node.<name>``."""

    def filters(self):
        return {
            "npu_ids": npu_smi_ids,
            "device_share": npu_smi_device_share,
            "chips_to_enable": npu_chips_to_enable,
            "driver_version": npu_driver_version,
            "version_at_least": version_at_least,
            "gates_missing": gates_missing,
            "containerd_layout": containerd_layout,
            "merge_gate_flag": merge_gate_flag,
            "kubernetes_version": kubernetes_version,
            "feature_gates_for": feature_gates_for,
        }
