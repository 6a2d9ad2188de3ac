"""``dralab bench faults``: the ``local`` profile's fault scenarios on a throw-away cluster, and their figures.

The scenarios, their engine and the leak audit are :mod:`dralab_kit.faults` (the reliability suite
runs the same ones and asserts each passes); this command runs them all at full size on a cluster
of its own (one KWOK node, 8 fake 310P3, never the developer's ``dralab``) and records what each
measured in ``faults.json``.
"""

from __future__ import annotations

import time

import click

from dralab_kit.bench import DEFAULT_OUT
from dralab_kit.bench.common import write_result
from dralab_kit.bench.concurrency import own_cluster
from dralab_kit.faults.context import Ctx
from dralab_kit.faults.engine import names_for, run_all


def grace_for(quick: bool) -> int:
    """The janitor's grace period on the benchmark's cluster: the shipped default, or 10 s for quick runs."""
    from dralab.config import default_config

    return 10 if quick else int(default_config().webhook.claim_grace_period_seconds)


@click.command()
@click.option("--out", default=DEFAULT_OUT, show_default=True, help="folder for faults.json")
@click.option("--quick", is_flag=True, help="smaller workloads and a 10 s claim grace period")
@click.option("--scenario", "only", multiple=True, type=click.Choice(names_for("local")), help="run only these")
def faults(out: str, quick: bool, only: tuple[str, ...]) -> None:
    """Fault scenarios (webhook/driver/apiserver outages, churn, reboots), each ending in a leak audit.

    Runs on a throw-away cluster of its own (one KWOK node, 8 fake 310P3), never on `dralab`.

    \b
    Example:
      dralab bench faults --quick --out /tmp/results
    """
    from dralab_kit.cluster import build

    build.require_binaries()
    grace = grace_for(quick)
    started = time.monotonic()
    with own_cluster("faults", config={"webhook": {"claimGracePeriodSeconds": grace}}) as handle:
        ctx = Ctx(handle, quick, grace)
        try:
            rows, baseline = run_all(ctx, only)
        finally:
            ctx.close()
    result = {
        "scenarios": rows,
        "passed": sum(r["passed"] for r in rows),
        "failed": sum(not r["passed"] for r in rows),
        "claim_grace_period_s": grace,
        "baseline": baseline,
        "duration_s": round(time.monotonic() - started, 1),
        "quick": quick,
    }
    path = write_result(out, "faults", result)
    click.echo(f"{result['passed']}/{len(rows)} scenarios passed -> {path}")
