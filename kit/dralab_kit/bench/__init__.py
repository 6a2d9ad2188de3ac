"""``dralab bench``: benchmarks that write JSON results with a baseline measured in the same run.

Each module here defines one click command; results go to ``bench/results/`` by default.
"""

from __future__ import annotations

import importlib

import click

# benchmark name -> "module:attribute"
BENCHMARKS: dict[str, str] = {
    "admission": "dralab_kit.bench.admission:admission",
    "cluster": "dralab_kit.bench.cluster:cluster",
    "driver": "dralab_kit.bench.driver:driver",
    "vcore": "dralab_kit.bench.vcore:vcore",
    "lab": "dralab_kit.bench.lab:lab",
    "concurrency": "dralab_kit.bench.concurrency:concurrency",
    "prefer": "dralab_kit.bench.prefer:prefer",
    "taints": "dralab_kit.bench.taints:taints",
    "fleet": "dralab_kit.bench.fleet:fleet",
    "fleet-quiet": "dralab_kit.bench.quiet:fleet_quiet",
    "caches": "dralab_kit.bench.caches:caches",
    "faults": "dralab_kit.bench.faults:faults",
    "fuzz": "dralab_kit.bench.fuzz:fuzz",
    "pains": "dralab_kit.bench.pains:pains",
    "node": "dralab_kit.bench.node:node",
    "setup": "dralab_kit.bench.setup:setup",
    "install": "dralab_kit.bench.install:install",
    "report": "dralab_kit.bench.report:report",
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


@click.group(cls=_LazyBench, short_help="Run benchmarks that write JSON results.")
def bench() -> None:
    """Run a benchmark; each writes <name>.json under --out (default bench/results).

    Every result records its context (commit, date, cores, load average at start and end,
    kernel, Python and Go versions, quick or full); `dralab bench report` renders bench/REPORT.md
    from the committed results and `--check` says whether it is up to date.

    \b
    Example:
      dralab bench admission --quick --out /tmp/results
    """
    from dralab_kit.bench.common import stop_on_terminate
    from dralab_kit.bench.results import mark_start

    stop_on_terminate()  # a SIGTERM takes the benchmark's throw-away clusters down, as Ctrl-C does
    mark_start()
