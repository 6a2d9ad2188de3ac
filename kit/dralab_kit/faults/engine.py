"""One engine runs every fault scenario, on either profile, and judges them all the same way.

A scenario is a function of a :class:`~.context.Ctx` that drives pods through one fault and returns
``(ok, figures)``: ``ok`` is its own contract (the pods came back, the specs were rewritten), the
figures are what it measured. :func:`run_scenario` then adds what every scenario must also meet: the
final leak audit (:mod:`.audit`), polled past the claim grace period. A scenario that raises is a
failed scenario, its namespaces are discarded, and the run goes on.

Scenarios are registered with the profiles they apply to (:data:`SCENARIOS`); the ``local`` profile's
``dralab bench faults`` and the ``node`` profile's ``dralab bench node`` both run
:func:`run_all` and write the same rows.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from rich.console import Console

from dralab_kit.faults.context import Ctx

console = Console(stderr=True)

Outcome = tuple[bool, dict[str, Any]]


@dataclass(frozen=True)
class Scenario:
    name: str
    run: Callable[[Ctx], Outcome]
    profiles: tuple[str, ...]  # "local", "node"

    @property
    def summary(self) -> str:
        return (self.run.__doc__ or "").strip().splitlines()[0] if self.run.__doc__ else ""


SCENARIOS: dict[str, Scenario] = {}


def scenario(*profiles: str) -> Callable[[Callable[[Ctx], Outcome]], Callable[[Ctx], Outcome]]:
    """Register a scenario function under its own name for the given profiles."""

    def add(fn: Callable[[Ctx], Outcome]) -> Callable[[Ctx], Outcome]:
        if fn.__name__ in SCENARIOS:
            raise ValueError(f"fault scenario {fn.__name__!r} is registered twice")
        SCENARIOS[fn.__name__] = Scenario(fn.__name__, fn, tuple(profiles))
        return fn

    return add


def names_for(profile: str) -> list[str]:
    """The scenarios that apply to ``profile``, in registration order."""
    _load()
    return [s.name for s in SCENARIOS.values() if profile in s.profiles]


def run_scenario(ctx: Ctx, name: str) -> dict[str, Any]:
    """One scenario and its final audit, as one row (``name, passed, leaked_claims, leaked_capacity, detail``)."""
    _load()
    started = time.monotonic()
    detail: dict[str, Any] = {}
    ok = False
    first_ns = len(ctx.namespaces)
    repairs_before = ctx.readiness_repairs
    try:
        ok, detail = SCENARIOS[name].run(ctx)
    except Exception as exc:  # a scenario that breaks is a failed scenario, and the run goes on
        detail = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        ctx.reconnect()
        ctx.discard(ctx.namespaces[first_ns:])
    final = ctx.settle()
    detail["final_audit"] = {
        "leaked_claims": final.leaked_claims[:10],
        "leaked_capacity": final.leaked_capacity[:5],
        "overcommitted_devices": final.overcommitted,
        **final.node,
    }
    detail["duration_s"] = round(time.monotonic() - started, 1)
    detail["pods_reready_after_node_notready"] = ctx.readiness_repairs - repairs_before
    row = {
        "name": name,
        "passed": bool(ok and final.clean),
        "leaked_claims": len(final.leaked_claims),
        "leaked_capacity": len(final.leaked_capacity),
        "detail": detail,
    }
    mark = "PASS" if row["passed"] else "FAIL"
    console.print(f"{mark} {name}: leaked claims {row['leaked_claims']}, leaked capacity {row['leaked_capacity']}, "
                  f"{json.dumps(detail)[:400]}", markup=False, highlight=False)
    return row


def run_all(ctx: Ctx, only: Iterable[str] | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every scenario of the target's profile in order (or ``only`` these); also the audit of the idle
    cluster before them (the baseline)."""
    names = list(only) if only else names_for(ctx.target.profile)
    unknown = [n for n in names if n not in SCENARIOS or ctx.target.profile not in SCENARIOS[n].profiles]
    if unknown:
        known = ", ".join(names_for(ctx.target.profile))
        raise ValueError(f"no {ctx.target.profile} fault scenario named {', '.join(unknown)}; known: {known}")
    idle = ctx.audit()
    baseline = {"what": "audit of the idle cluster before any scenario",
                "leaked_claims": len(idle.leaked_claims), "leaked_capacity": len(idle.leaked_capacity), **idle.node}
    return [run_scenario(ctx, name) for name in names], baseline


def _load() -> None:
    """Import the scenario modules (they register themselves)."""
    from dralab_kit.faults import scenarios  # noqa: F401
