"""``dralab top``: the allocation picture as a table (rich), redrawn whenever a watch event arrives.

Each row says whether its node's driver enforces the shares (``ENFORCEMENT``, from the slices'
``dralab.io/enforcement`` label); a node running with ``enforcement: none`` is shown in capitals and
named again in a warning under the table, because its tenants' quotas hold only on paper there.
"""

from __future__ import annotations

import json

from rich.table import Table

from dralab.model.quantity import MIB
from dralab.monitor.allocation import ENFORCEMENT_NONE, ENFORCEMENT_UNKNOWN, Allocation

HEADER = ["DEVICE", "NODE", "ENFORCEMENT", "MEMORY USED/TOTAL", "CORES USED/TOTAL", "SHARES", "SHARERS"]


def _mib(value: int) -> str:
    return f"{value // MIB}Mi"


def enforcement_text(alloc: Allocation, node: str, driver: str) -> str:
    """The mode of a node's driver as shown: ``NONE`` shouts, the others are as published."""
    mode = alloc.enforcement.get((node, driver), ENFORCEMENT_UNKNOWN)
    return "NONE" if mode == ENFORCEMENT_NONE else mode


def warnings(alloc: Allocation) -> list[str]:
    """One line per node and driver that prepares claims without the enforcement library."""
    return [f"WARNING: node {node} ({driver}) runs with enforcement: none: its claims' memory and core "
            "quotas are NOT enforced inside the containers" for node, driver in alloc.unenforced()]


def rows(alloc: Allocation) -> list[list[str]]:
    """One row per device: device, node, enforcement, memory used/total, cores used/total, shares, sharers."""
    out = []
    for d in sorted(alloc.devices.values(), key=lambda d: (d.node, d.driver, d.name)):
        out.append([
            d.name,
            d.node,
            enforcement_text(alloc, d.node, d.driver),
            f"{_mib(d.memory_used)}/{_mib(d.memory_total)}",
            f"{d.cores_used}/{d.cores_total}",
            str(d.shares),
            ", ".join(d.sharers) or "-",
        ])
    return out


def table(alloc: Allocation, title: str = "device shares") -> Table:
    warned = warnings(alloc)
    t = Table(title=title, caption="\n".join(warned) or None, caption_style="bold red")
    for column in HEADER:
        t.add_column(column, overflow="fold")
    for row in rows(alloc):
        t.add_row(*row, style="bold red" if row[2] == "NONE" else None)
    return t


def plain(alloc: Allocation) -> str:
    """The same table as fixed-width text (for pipes and tests), the warnings under it."""
    body = rows(alloc)
    widths = [max(len(r[i]) for r in [HEADER, *body]) for i in range(len(HEADER) - 1)]
    lines = []
    for r in [HEADER, *body]:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1])
    return "\n".join([*lines, *warnings(alloc)]) + "\n"


def as_json(alloc: Allocation) -> str:
    """The picture as JSON: each node's enforcement mode, devices (used/total/shares/sharers), each share
    with what its driver applied (``applied``: the claim's status.devices data, null until the driver
    reports it), per-pod and per-namespace sums."""
    return json.dumps({
        "nodes": [{"node": node, "driver": driver, "enforcement": mode}
                  for (node, driver), mode in sorted(alloc.enforcement.items())],
        "devices": [
            {"device": d.name, "node": d.node, "driver": d.driver, "pool": d.pool,
             "enforcement": alloc.enforcement.get((d.node, d.driver), ENFORCEMENT_UNKNOWN),
             "memoryUsed": d.memory_used, "memoryTotal": d.memory_total, "coresUsed": d.cores_used,
             "coresTotal": d.cores_total, "shares": d.shares, "sharers": d.sharers}
            for d in sorted(alloc.devices.values(), key=lambda d: (d.node, d.driver, d.name))
        ],
        "shares": [
            {"namespace": sh.namespace, "claim": sh.claim, "driver": sh.device[0], "pool": sh.device[1],
             "device": sh.device[2], "shareID": sh.share_id, "memory": sh.memory, "cores": sh.cores,
             "pods": sh.pods, "applied": sh.applied}
            for sh in sorted(alloc.shares, key=lambda sh: (sh.device, sh.namespace, sh.claim))
        ],
        "pods": [{"namespace": ns, "pod": pod, "memory": mem, "cores": cores}
                 for (ns, pod), (mem, cores) in sorted(alloc.per_pod().items())],
        "namespaces": [{"namespace": ns, "memory": mem, "cores": cores}
                       for ns, (mem, cores) in sorted(alloc.per_namespace().items())],
    }, indent=2)
