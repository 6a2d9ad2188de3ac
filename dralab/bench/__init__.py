"""``dralab bench``: benchmarks that write JSON results with a baseline measured in the same run.

Each module here defines one click command; results go to ``bench/results/`` by default.
"""

from __future__ import annotations

import importlib

import click

# benchmark name -> "module:attribute"
BENCHMARKS: dict[str, str] = {
    "admission": "dralab.bench.admission:admission",
    "cluster": "dralab.bench.cluster:cluster",
    "driver": "dralab.bench.driver:driver",
    "vcore": "dralab.bench.vcore:vcore",
    "lab": "dralab.bench.lab:lab",
    "concurrency": "dralab.bench.concurrency:concurrency",
    "prefer": "dralab.bench.prefer:prefer",
    "taints": "dralab.bench.taints:taints",
    "fleet": "dralab.bench.fleet:fleet",
    "faults": "dralab.bench.faults:faults",
    "fuzz": "dralab.bench.fuzz:fuzz",
    "pains": "dralab.bench.pains:pains",
    "node": "dralab.bench.node:node",
    "setup": "dralab.bench.setup:setup",
    "install": "dralab.bench.install:install",
    "report": "dralab.bench.report:report",
}

DEFAULT_OUT = "bench/results"


class _LazyBench(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(BENCHMARKS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        ref = BENCHMARKS.get(name)
        if ref is None:
            return None
        module, _, attr = ref.partition(":")
        try:
            return getattr(importlib.import_module(module), attr)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
            return None


@click.group(cls=_LazyBench)
def bench() -> None:
    """Run a benchmark; each writes <name>.json under --out (default bench/results).

    Every result records its context (commit, date, cores, load average at start and end,
    kernel, Python and Go versions, quick or full); `dralab bench report` renders bench/REPORT.md
    from the committed results and `--check` says whether it is up to date.

    \b
    Example:
      dralab bench admission --quick --out /tmp/results
    """
    from dralab.bench.results import mark_start

    mark_start()
