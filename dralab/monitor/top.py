"""``dralab top``: the allocation picture as a table (rich), redrawn whenever a watch event arrives."""

from __future__ import annotations

import json

from rich.table import Table

from dralab.model.quantity import MIB
from dralab.monitor.allocation import Allocation


def _mib(value: int) -> str:
    return f"{value // MIB}Mi"


def rows(alloc: Allocation) -> list[list[str]]:
    """One row per device: device, node, memory used/total, cores used/total, shares, sharers."""
    out = []
    for d in sorted(alloc.devices.values(), key=lambda d: (d.node, d.driver, d.name)):
        out.append([
            d.name,
            d.node,
            f"{_mib(d.memory_used)}/{_mib(d.memory_total)}",
            f"{d.cores_used}/{d.cores_total}",
            str(d.shares),
            ", ".join(d.sharers) or "-",
        ])
    return out


def table(alloc: Allocation, title: str = "device shares") -> Table:
    t = Table(title=title)
    for column in ("DEVICE", "NODE", "MEMORY USED/TOTAL", "CORES USED/TOTAL", "SHARES", "SHARERS"):
        t.add_column(column, overflow="fold")
    for row in rows(alloc):
        t.add_row(*row)
    return t


def plain(alloc: Allocation) -> str:
    """The same table as fixed-width text (for pipes and tests)."""
    header = ["DEVICE", "NODE", "MEMORY USED/TOTAL", "CORES USED/TOTAL", "SHARES", "SHARERS"]
    body = rows(alloc)
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header) - 1)]
    lines = []
    for r in [header, *body]:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1])
    return "\n".join(lines) + "\n"


def as_json(alloc: Allocation) -> str:
    """The picture as JSON: devices (used/total/shares/sharers), each share with what its driver applied
    (``applied``: the claim's status.devices data, null until the driver reports it), per-pod and
    per-namespace sums."""
    return json.dumps({
        "devices": [
            {"device": d.name, "node": d.node, "driver": d.driver, "pool": d.pool,
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
