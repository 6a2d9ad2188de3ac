"""``dralab bench fuzz``: the fuzz campaign (:mod:`dralab_kit.fuzz`) at full size, its counts in ``fuzz.json``.

The campaign and its contracts live in ``dralab_kit.fuzz``; this command only sizes the run, adds the
well-formed baseline and writes the cases run, the broken contracts by kind and their first examples.
"""

from __future__ import annotations

import click

from dralab_kit.bench import DEFAULT_OUT
from dralab_kit.bench.common import write_result
from dralab_kit.fuzz.admission import baseline_checks, fuzz_admission
from dralab_kit.fuzz.driver import fuzz_driver

FULL_CASES = 10_000
QUICK_CASES = 300


@click.command()
@click.option("--out", default=DEFAULT_OUT, show_default=True, help="folder for fuzz.json")
@click.option("--quick", is_flag=True, help=f"{QUICK_CASES} cases per endpoint instead of {FULL_CASES}")
@click.option("--cases", type=int, default=None, help="cases per endpoint (overrides --quick)")
@click.option("--seed", type=int, default=None, help="reproducible generation (hypothesis derandomized)")
def fuzz(out: str, quick: bool, cases: int | None, seed: int | None) -> None:
    """Fuzz the admission endpoints and the driver's gRPC with malformed and hostile input.

    \b
    Example:
      dralab bench fuzz --quick --out /tmp/results
    """
    n = cases or (QUICK_CASES if quick else FULL_CASES)
    admission = fuzz_admission(n, seed)
    driver = fuzz_driver(n - n * 2 // 5, seed, typed=True)
    driver_untyped = fuzz_driver(n * 2 // 5, seed, typed=False)
    targets = {f"admission_{k}": v for k, v in admission.items() if k != "seconds"}
    targets["driver_typed_claims"] = driver
    targets["driver_untyped_claims"] = driver_untyped
    result = {
        "cases_per_endpoint": n,
        "targets": targets,
        "passed": all(t["passed"] for t in targets.values()),
        "seconds": {"admission": admission["seconds"], "driver": driver["seconds"] + driver_untyped["seconds"]},
        "baseline": {"what": "well-formed Lab 20 pod and claim through the same paths",
                     **baseline_checks()},
    }
    path = write_result(out, "fuzz", result)
    for name, t in targets.items():
        click.echo(f"{name:28s} {t['cases']:6d} cases  problems: {t['problems'] or 'none'}")
    click.echo(f"-> {path}")

