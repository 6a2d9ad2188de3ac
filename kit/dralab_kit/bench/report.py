"""``dralab bench report``: render bench/REPORT.md from the committed JSON results, and check it.

The report is a pure function of the result files in ``bench/results/``: every figure in it comes
from one of them, every verdict says met or NOT met (or why it was not judged), and every section
says when, where (commit, cores, load average) and how (quick or full run) it was measured. A
benchmark with no result file is reported as not measured. ``--check`` renders without writing
and fails when REPORT.md differs, so a hand edit or a result committed without its report shows.

Each benchmark's result is read through its model (:mod:`dralab_kit.bench.models`) and rendered by
its section module (:mod:`dralab_kit.bench.sections`); this module only puts them in order.
"""

from __future__ import annotations

import difflib
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from dralab.util import atomic_write
from dralab_kit.bench import DEFAULT_OUT
from dralab_kit.bench.models import BenchResult, parse
from dralab_kit.bench.results import VERSION_MARK, load_results, load_versioned, versioned_folders
from dralab_kit.bench.sections import (
    admission,
    caches,
    cluster,
    concurrency,
    driver,
    faults,
    fleet,
    fuzz,
    install,
    janitor,
    lab,
    node,
    pains,
    prefer,
    quiet,
    setup,
    taints,
    vcore,
)
from dralab_kit.bench.sections.format import context_line, load_text, table

DEFAULT_REPORT = "bench/REPORT.md"


@dataclass(frozen=True)
class Section:
    """How one result file is reported: its title, its section, its verdict rows and the plot it links."""

    title: str
    render: Callable[..., list[str]]
    verdicts: Callable[[Any], list[list[str]]] | None = None
    plot: str | None = None  # a PNG beside the result files, linked when it is there


# the sections in report order (the verdict rows follow it too); results of other benchmarks follow,
# listed with their context
SECTIONS: dict[str, Section] = {
    "setup": Section(setup.TITLE, setup.section),
    "admission": Section(admission.TITLE, admission.section, admission.verdicts),
    "driver": Section(driver.TITLE, driver.section, driver.verdicts),
    "vcore": Section(vcore.TITLE, vcore.section, vcore.verdicts),
    "cluster": Section(cluster.TITLE, cluster.section, cluster.verdicts),
    "lab": Section(lab.TITLE, lab.section, lab.verdicts),
    "concurrency": Section(concurrency.TITLE, concurrency.section, concurrency.verdicts, "concurrency.png"),
    "prefer": Section(prefer.TITLE, prefer.section),
    "taints": Section(taints.TITLE, taints.section),
    "fleet": Section(fleet.TITLE, fleet.section, fleet.verdicts, "fleet.png"),
    "fleet-quiet": Section(quiet.TITLE, quiet.section, quiet.verdicts),
    "faults": Section(faults.TITLE, faults.section, faults.verdicts),
    "fuzz": Section(fuzz.TITLE, fuzz.section, fuzz.verdicts),
    "pains": Section(pains.TITLE, pains.section),
    "pains-node": Section(pains.TITLE_NODE, pains.section),
    "node": Section(node.TITLE, node.section),
    "install": Section(install.TITLE, install.section),
    "janitor": Section(janitor.TITLE, janitor.section),
    "caches": Section(caches.TITLE, caches.section),
}
ORDER = tuple(SECTIONS)


def split_key(key: str) -> tuple[str, str | None]:
    """(benchmark, Kubernetes version) of a result's key: ``fleet@v1.37.2`` is the fleet benchmark run on
    v1.37.2 (a ``kubernetes-v1.37.2`` sub-folder); a plain name ran on the default version."""
    name, _, version = key.partition(VERSION_MARK)
    return name, version or None


def parse_all(results: Mapping[str, Mapping[str, Any] | BenchResult]) -> dict[str, BenchResult]:
    """Each result through its benchmark's model (results already parsed are kept)."""
    return {key: res if isinstance(res, BenchResult) else parse(split_key(key)[0], dict(res))
            for key, res in results.items()}


def versions_of(name: str, results: Mapping[str, BenchResult]) -> list[str]:
    """The keys of ``name``'s results: the default version's first, then each other version's."""
    return [name] * (name in results) + sorted(k for k in results if split_key(k)[0] == name and k != name)


def verdicts(results: Mapping[str, BenchResult]) -> list[list[str]]:
    """Rows ``[benchmark, check, figure, target, verdict]`` for every judged target in the results; a
    result of another Kubernetes version names it in the benchmark column."""
    rows: list[list[str]] = []
    for name, sec in SECTIONS.items():
        if sec.verdicts is None:
            continue
        for key in versions_of(name, results):
            version = split_key(key)[1]
            rows += [[f"{row[0]}, Kubernetes {version}" if version else row[0], *row[1:]]
                     for row in sec.verdicts(results[key])]
    return rows


def _where(name: str, res: BenchResult | None) -> list[Any]:
    """A row of the "Where and when" table."""
    if res is None:
        return [name, "not measured", "", "", "", "", "", ""]
    ctx = res.run_context()
    return [name, ctx.run, ctx.date, (ctx.commit or "-")[:10], ctx.cores, load_text(ctx), ctx.kernel or "-",
            f"Python {ctx.python or '?'}, {ctx.go or 'no Go'}"]


def render(results: Mapping[str, Mapping[str, Any] | BenchResult], plots: Mapping[str, str] | None = None) -> str:
    """The whole report from the result files (pure: the same files always give the same text).

    ``plots`` maps a benchmark to the link of its plot, for the sections that show one.
    """
    parsed = parse_all(results)
    lines = [
        "# dralab benchmark report",
        "",
        "Rendered by `dralab bench report` from the JSON results in `bench/results/`; do not edit by hand.",
        "`dralab bench report --check` fails when this file differs from what those results render.",
        "Each section says when and where its figures were measured; this machine is shared, so read them",
        "with the load average and the run type (a quick run is the reduced `--quick` size).",
        "",
        "## Verdicts",
        "",
    ]
    rows = verdicts(parsed)
    if rows:
        lines += table(["benchmark", "target", "figure", "target value", "verdict"], rows)
    else:
        lines += ["No benchmark result yet.", ""]
    lines += ["## Where and when", ""]
    others = sorted(k for k in parsed if split_key(k)[0] not in ORDER)
    keys = [k for name in ORDER for k in (versions_of(name, parsed) or [name])]
    lines += table(["result", "run", "measured", "commit", "cores", "load avg start → end", "kernel", "toolchain"],
                   [_where(key, parsed.get(key)) for key in [*keys, *others]])
    for name, sec in SECTIONS.items():
        if name not in parsed:
            lines += [f"## {sec.title}", "",
                      f"Not measured: run `dralab bench {name}` and commit `bench/results/{name}.json`.", ""]
        for key in versions_of(name, parsed):
            version = split_key(key)[1]
            res = parsed[key]
            lines += [f"## {sec.title}" + (f", on Kubernetes {version}" if version else ""), ""]
            if version:
                lines += [f"The same benchmark on Kubernetes {version}, from "
                          f"`bench/results/kubernetes-{version}/{name}.json`: its figures and verdicts stand "
                          "apart from the default version's.", ""]
            lines += [context_line(res), ""]
            lines += sec.render(res, (plots or {}).get(key)) if sec.plot else sec.render(res)
    if others:
        lines += ["## Other results", ""]
        for name in others:
            lines += [
                f"### {name}",
                "",
                context_line(parsed[name]),
                "",
                f"Figures in `bench/results/{name}.json` (no section renders them yet).",
                "",
            ]
    return "\n".join(lines).rstrip() + "\n"


def render_files(results_dir: Path, out: Path) -> str:
    """The report text for ``out`` from the results in ``results_dir`` (plots linked relative to ``out``)."""
    folders = {"": results_dir} | {VERSION_MARK + version: sub
                                   for version, sub in versioned_folders(results_dir).items()}
    plots = {name + mark: Path(os.path.relpath(folder / sec.plot, out.parent)).as_posix()
             for mark, folder in folders.items()
             for name, sec in SECTIONS.items() if sec.plot and (folder / sec.plot).is_file()}
    return render(all_results(results_dir), plots)


def all_results(results_dir: Path) -> dict[str, dict[str, Any]]:
    """The default version's results and every other version's, by key (:func:`split_key`)."""
    return load_results(results_dir) | load_versioned(results_dir)


@click.command()
@click.option("--results", "results_dir", default=DEFAULT_OUT, show_default=True, help="folder of JSON results")
@click.option("--out", default=DEFAULT_REPORT, show_default=True, help="the report file to write (or check)")
@click.option(
    "--check", is_flag=True, help="write nothing; exit 1 when the report differs from what the results render"
)
@click.option("--quick", is_flag=True, hidden=True, help="accepted for symmetry with the other benchmarks")
def report(results_dir: str, out: str, check: bool, quick: bool) -> None:
    """Render the benchmark report (Markdown) from the JSON results, or check that it is current.

    \b
    Example:
      dralab bench report
      dralab bench report --check
    """
    folder, target = Path(results_dir), Path(out)
    text = render_files(folder, target)
    if check:
        current = target.read_text() if target.is_file() else ""
        if current == text:
            click.echo(f"{target} is current with the {len(all_results(folder))} result file(s) in {folder}")
            return
        diff = list(difflib.unified_diff(current.splitlines(), text.splitlines(), str(target), "rendered", lineterm=""))
        click.echo("\n".join(diff[:60]) + ("\n..." if len(diff) > 60 else ""), err=True)
        click.echo(f"{target} differs from what {folder} renders: run `dralab bench report` and commit both", err=True)
        sys.exit(1)
    atomic_write(target, text)
    click.echo(f"wrote {target} from {len(all_results(folder))} result file(s) in {folder}")
