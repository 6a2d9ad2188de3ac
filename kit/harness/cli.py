"""``dralab lab``: list the shipped labs and replay one on a cluster profile.

``dralab lab run`` runs the harness through pytest in this process (the same items, skips and
reports as ``pytest``), shows each step as it finishes, prints where the report is, and exits
non-zero when a step failed.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import click

from dralab.errors import UserError
from harness.results import PARTIAL_PROPERTY, SKIPPED_OP_PROPERTY

EXIT_FAILED = 1


class Progress:
    """A pytest plugin that prints the replay step by step; the harness sends its messages to ``dralab_say``."""

    def __init__(self, console: Any, verbose: bool = False) -> None:
        self.console = console
        self.verbose = verbose
        self.counts = {"passed": 0, "partial": 0, "failed": 0, "skipped": 0}
        self.total = 0
        self._status: Any = None
        self.started = time.monotonic()

    def dralab_say(self, message: str) -> None:
        self.console.print(f"  [dim]· {message}[/dim]", highlight=False, soft_wrap=True)

    def pytest_collection_finish(self, session: Any) -> None:
        self.total = len(session.items)

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        if self._status is None and self.console.is_terminal:
            self._status = self.console.status(f"running {nodeid.rsplit('::', 1)[-1]}")
            self._status.start()

    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def pytest_runtest_logreport(self, report: Any) -> None:
        if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
            name = report.nodeid.rsplit("::", 1)[-1]
            seconds = getattr(report, "duration", 0.0)
            props = dict(getattr(report, "user_properties", ()) or ())
            if report.outcome == "passed" and PARTIAL_PROPERTY in props:
                self.counts["partial"] += 1
                skipped = [v for k, v in report.user_properties if k == SKIPPED_OP_PROPERTY]
                self.console.print(
                    f"  [yellow]◐[/yellow] {name} [dim]({seconds:.2f}s) partial, not run here: "
                    f"{'; '.join(skipped)}[/dim]",
                    highlight=False,
                    soft_wrap=True,
                )
            elif report.outcome == "passed":
                self.counts["passed"] += 1
                self.console.print(
                    f"  [green]✓[/green] {name} [dim]({seconds:.2f}s)[/dim]", highlight=False, soft_wrap=True
                )
            elif report.outcome == "skipped":
                self.counts["skipped"] += 1
                reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
                reason = reason.removeprefix("Skipped: ")
                self.console.print(
                    f"  [yellow]↷[/yellow] {name} [dim]skipped: {reason}[/dim]", highlight=False, soft_wrap=True
                )
            else:
                self.counts["failed"] += 1
                self.console.print(
                    f"  [red]✗ {name}[/red] [dim]({seconds:.2f}s)[/dim]", highlight=False, soft_wrap=True
                )
                text = report.longreprtext.strip().splitlines()
                shown = text if self.verbose else text[:30]
                for line in shown:
                    self.console.print(f"      {line}", highlight=False, markup=False, soft_wrap=True)
                if len(text) > len(shown):
                    self.console.print("      ... (the report has the rest)", style="dim")


def _pytest_args(lab_yaml: Path, run_dir: Path, options: dict[str, Any]) -> list[str]:
    ini = run_dir / "pytest.ini"
    ini.parent.mkdir(parents=True, exist_ok=True)
    ini.write_text("[pytest]\n")
    args = [
        str(lab_yaml),
        "-p", "harness.plugin", "-p", "no:cacheprovider",
        "-c", str(ini), "--rootdir", str(lab_yaml.parent), "--confcutdir", str(lab_yaml.parent),
        "--dralab-profile", options["profile"],
        "--dralab-reports-dir", str(run_dir.parent), "--dralab-run-id", run_dir.name,
    ]  # fmt: skip
    if options.get("kubeconfig"):
        args += ["--dralab-kubeconfig", str(options["kubeconfig"])]
    if options.get("kubernetes"):
        args += ["--dralab-kubernetes", str(options["kubernetes"])]
    if options.get("keep_namespace"):
        args.append("--dralab-keep-namespace")
    for var in options.get("var") or ():
        args += ["--dralab-lab-var", var]
    if options.get("steps"):
        args += ["-k", options["steps"]]
    if not options.get("verbose"):
        args += ["-p", "no:terminal"]
    return args


@click.group(short_help="List and replay labs on a cluster profile.")
def lab() -> None:
    """List and replay labs on a cluster profile.

    \b
    Example:
      dralab lab list
      dralab lab run lab20-ascend-hami-dra
    """


@lab.command("list")
def list_cmd() -> None:
    """List the shipped labs.

    \b
    Example:
      dralab lab list
    """
    from rich.console import Console
    from rich.table import Table

    from harness.loader import list_labs

    table = Table("lab", "title", "profiles", "steps", box=None, header_style="bold")
    for item in list_labs():
        table.add_row(item.name, item.title, ", ".join(item.profiles) or "any", str(len(item.steps)))
    Console().print(table)


@lab.command("run")
@click.argument("lab_ref", metavar="LAB|PATH")
@click.option("--profile", default="local", show_default=True, help="Cluster profile name or profile YAML file.")
@click.option("--kubeconfig", type=click.Path(dir_okay=False), help="Use this existing cluster.")
@click.option("--kubernetes", metavar="VERSION", default=None,
              help="Local profiles: the cluster's Kubernetes version (v1.35.4, v1.36.3, v1.37.2; default v1.35.4).")
@click.option("--reports-dir", type=click.Path(file_okay=False), default="reports", show_default=True,
              help="Reports go to <dir>/<run-id>/, and <dir>/latest points there.")  # fmt: skip
@click.option("--keep-namespace", is_flag=True, help="Keep the lab's namespace for inspection.")
@click.option("--var", multiple=True, metavar="NAME=VALUE", help="Override a lab variable (repeatable).")
@click.option("--steps", metavar="EXPR", help="Only the steps matching this pytest -k expression.")
@click.option("-v", "--verbose", is_flag=True, help="Show pytest's own output too.")
def run_cmd(lab_ref: str, **options: Any) -> None:
    """Replay a lab (a shipped lab's name or a lab folder) and write its report.

    \b
    Example:
      dralab lab run lab20-ascend-hami-dra
      dralab lab run lab20-ascend-hami-dra --kubernetes v1.37.2
      dralab lab run kit/labs/nvidia-gpu-share --profile kind --kubeconfig ~/.kube/config
    """
    import pytest
    from rich.console import Console

    from harness.loader import resolve_lab
    from harness.profile import load_profile, with_kubernetes
    from harness.report import new_run_id
    from harness.schema import load_lab

    lab_yaml = resolve_lab(lab_ref)
    loaded = load_lab(lab_yaml)  # a broken lab is a one-line error before anything starts
    profile = with_kubernetes(load_profile(options["profile"]), options.get("kubernetes"))
    console = Console()
    run_dir = Path(options["reports_dir"]).expanduser().resolve() / new_run_id(loaded.name)
    console.print(f"[bold]{loaded.title}[/bold] ({loaded.name}) on profile [bold]{profile.name}[/bold]: "
                  f"{len(loaded.steps)} steps", highlight=False, soft_wrap=True)  # fmt: skip
    progress = Progress(console, verbose=options["verbose"])
    started = time.monotonic()
    # Only the harness plugin is needed; other installed pytest plugins cost seconds of imports.
    previous = os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    try:
        code = int(pytest.main(_pytest_args(lab_yaml, run_dir, options), plugins=[progress]))
    finally:
        if previous is None:
            os.environ.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
        else:
            os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = previous
    seconds = time.monotonic() - started
    c = progress.counts
    colour = "green" if code == 0 else "red"
    console.print(f"[{colour}]{c['passed']} passed, {c['partial']} partial, {c['failed']} failed, "
                  f"{c['skipped']} skipped[/{colour}] "
                  f"in {seconds:.1f}s", highlight=False, soft_wrap=True)  # fmt: skip
    report = run_dir / "report.md"
    if report.is_file():
        console.print(f"report: {report}\nhtml:   {run_dir / 'report.html'}\njunit:  {run_dir / 'junit.xml'}",
                      highlight=False, markup=False, soft_wrap=True)  # fmt: skip
    elif code != 0:
        raise UserError(f"the lab did not run (pytest exit code {code}); rerun with --verbose to see why")
    if code != 0:
        sys.exit(EXIT_FAILED if code == 1 else code)
