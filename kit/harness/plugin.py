"""pytest plugin of the harness: cluster profiles, fixtures, and labs as ordered test items.

Loaded only where asked: by the repository's root ``conftest.py`` (``pytest_plugins``), by
``dralab lab run`` (``-p harness.plugin``), or by ``-p harness.plugin`` elsewhere; installing dralab
does not load it into other pytest runs (no ``pytest11`` entry point).

- Options carry the prefix ``--dralab-`` (``--dralab-profile``, ``--dralab-kubernetes``, ...); the
  plain names (``--profile``, ...) stay as aliases while no other plugin defines them.
- ``--dralab-profile`` picks the cluster profile (``local`` by default), ``--dralab-kubeconfig`` an
  existing cluster.
- A ``lab.yaml`` (or a suite file ``labs.yaml`` with ``kind: LabSuite``) collects into one item per
  step, in order, marked ``e2e``; under pytest-xdist all steps of a lab go to one worker
  (``pytest_xdist_make_scheduler``), every other test is spread as ``--dist load`` does.
- After a failed step the remaining steps of that lab are skipped with the reason.
- A step some of whose operations were skipped for a missing capability passes as *partial*: its
  item carries the skipped operations as user properties (JUnit properties), and the terminal
  summary lists them, so a green run never hides what did not run.
- Each lab writes its result into ``<reports-dir>/<run-id>/labs/``; the controlling process renders
  ``report.md``, ``report.html`` and ``junit.xml`` there at the end and prints the path.
- Fixtures for Python tests: ``dralab_profile``, ``dralab_env`` (the cluster, brought up or reused;
  shared by workers through the cluster's file lock) and ``lab_namespace`` (ephemeral namespace).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest

if TYPE_CHECKING:  # for the annotations only: the plugin imports the rest of the harness when it is used
    from harness.runner import LabRunner
    from harness.schema import Lab, Step

RUN_ID_KEY = "dralab_run_id"


# Every option is ``--dralab-<name>``, a name no other plugin takes, and ``--<name>`` is kept as an
# alias while no other plugin takes it (pytest-profiling defines ``--profile``). Read them by dest.
OPTIONS: dict[str, dict[str, Any]] = {
    "profile": {"default": "local", "help": "cluster profile: local, kind, ascend-310p, nvidia, or a file"},
    "kubeconfig": {"default": None, "help": "use an existing cluster instead of bringing one up"},
    "kubernetes": {
        "default": None, "metavar": "VERSION",
        "help": "local profiles: the Kubernetes version of the cluster (default: the profile's, else v1.35.4)",
    },
    "reports-dir": {"default": None, "help": "where lab reports go (default: <rootdir>/reports)"},
    "run-id": {"default": None, "help": "name of the report folder of this run (default: time stamp)"},
    "keep-namespace": {"action": "store_true", "help": "keep each lab's namespace for inspection"},
    "lab-var": {"action": "append", "default": [], "metavar": "NAME=VALUE",
                "help": "override a lab variable (repeatable)"},
}  # fmt: skip


def _dest(name: str) -> str:
    return "dralab_" + name.replace("-", "_")


def _taken(parser: pytest.Parser) -> set[str]:
    """Option names other plugins have registered so far."""
    groups = [*parser._groups, parser._anonymous]
    return {n for group in groups for opt in group.options for n in opt.names() if not opt.dest.startswith("dralab_")}


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    group = parser.getgroup("dralab", "dralab lab harness")
    taken = _taken(parser)
    for name, attrs in OPTIONS.items():
        alias = f"--{name}"
        names = [f"--dralab-{name}"] + ([] if alias in taken else [alias])
        group.addoption(*names, dest=_dest(name), **attrs)
    pluginmanager.register(_AliasGuard(parser), "harness.plugin.aliases")


class _AliasGuard:
    """Drops an alias (``--profile``) that a plugin registered after this one also defines, before argparse clashes."""

    def __init__(self, parser: pytest.Parser) -> None:
        self.parser = parser

    def pytest_plugin_registered(self) -> None:
        taken = _taken(self.parser)
        for group in [*self.parser._groups, self.parser._anonymous]:
            for opt in group.options:
                if opt.dest.startswith("dralab_") and any(n in taken for n in opt._long_opts):
                    opt._long_opts = [n for n in opt._long_opts if n not in taken]


def pytest_configure(config: pytest.Config) -> None:
    for line in (
        "e2e: end-to-end lab replay on a cluster profile",
        "hardware: needs a real accelerator (Ascend 310P or NVIDIA)",
        # test modules with a cluster of their own pin themselves to one worker with it; declared
        # here too so --strict-markers accepts them when pytest-xdist is not loaded (-p no:xdist)
        "xdist_group(name): tests of one group run on one xdist worker",
    ):
        config.addinivalue_line("markers", line)
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and workerinput.get(RUN_ID_KEY):
        run_id = workerinput[RUN_ID_KEY]
    else:
        from harness.report import new_run_id

        run_id = config.getoption("dralab_run_id") or new_run_id("labs")
    config._dralab_run_id = run_id  # type: ignore[attr-defined]
    config._dralab_envs = {}  # type: ignore[attr-defined]


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist: every worker writes into the controller's run folder."""
    node.workerinput[RUN_ID_KEY] = node.config._dralab_run_id


def lab_scope(nodeid: str) -> str | None:
    """The lab a step item belongs to (``<file>::<lab>``), or None for any other test."""
    path, _, rest = nodeid.partition("::")
    is_lab_file = path.endswith(("/lab.yaml", "/labs.yaml")) or path in ("lab.yaml", "labs.yaml")
    return nodeid.rsplit("::", 1)[0] if is_lab_file and rest.count("::") == 1 else None


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """pytest-xdist: send all steps of a lab to one worker, in order; spread everything else as ``load`` does.

    Grouping by nodeid here (on the controller) needs nothing from the workers, so it holds with
    ``-n 2`` alone, without ``--dist loadgroup``.
    """
    if config.getvalue("dist") not in ("load", "loadgroup"):
        return None
    from xdist.scheduler import LoadGroupScheduling

    class LabScheduling(LoadGroupScheduling):  # type: ignore[misc]  # xdist ships no types: its base is Any
        def _split_scope(self, nodeid: str) -> str:
            return lab_scope(nodeid) or super()._split_scope(nodeid)

    return LabScheduling(config, log)


def run_id(config: pytest.Config) -> str:
    return config._dralab_run_id  # type: ignore[attr-defined]


def reports_dir(config: pytest.Config) -> Path:
    value = config.getoption("dralab_reports_dir") or os.environ.get("DRALAB_REPORTS")
    return Path(value).expanduser().resolve() if value else config.rootpath / "reports"


def run_dir(config: pytest.Config) -> Path:
    return reports_dir(config) / run_id(config)


def _say(config: pytest.Config) -> Callable[[str], None]:
    for plugin in config.pluginmanager.get_plugins():
        say = getattr(plugin, "dralab_say", None)
        if callable(say):
            return say
    from dralab.util import get_logger

    log = get_logger("dralab.harness")
    return lambda msg: log.info(msg)


def environment(config: pytest.Config, inventory: str | None) -> Any:
    """The profile's cluster for ``inventory``, opened once per session and reused by every lab."""
    from harness.environment import open_environment
    from harness.profile import load_profile, with_kubernetes

    profile_ref = str(config.getoption("dralab_profile"))
    kubeconfig = config.getoption("dralab_kubeconfig")
    envs: dict[tuple[str, str | None, str | None], Any] = config._dralab_envs  # type: ignore[attr-defined]
    key = (profile_ref, inventory, kubeconfig)
    if key not in envs:
        profile = with_kubernetes(load_profile(profile_ref), config.getoption("dralab_kubernetes"))
        envs[key] = open_environment(profile, inventory=inventory, kubeconfig=kubeconfig, progress=_say(config))
    return envs[key]


def _lab_vars(config: pytest.Config) -> dict[str, str]:
    from dralab.errors import UserError

    out = {}
    for item in config.getoption("dralab_lab_var") or []:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise UserError(f"--dralab-lab-var {item!r}: write NAME=VALUE")
        out[name] = value
    return out


# collection ----------------------------------------------------------------------------------
def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.name == "lab.yaml":
        return LabFile.from_parent(parent, path=file_path)
    if file_path.name == "labs.yaml":
        import yaml

        from dralab import yamlio
        from harness.loader import is_suite

        try:
            data = yamlio.load(file_path.read_text(), str(file_path))
        except yaml.YAMLError:
            return None
        if is_suite(data):
            return LabSuiteFile.from_parent(parent, path=file_path)
    return None


class LabFile(pytest.File):
    """A ``lab.yaml``: one lab."""

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        from harness.schema import load_lab

        lab = load_lab(self.path)
        yield LabCollector.from_parent(self, name=lab.name, lab=lab)


class LabSuiteFile(pytest.File):
    """A suite file listing labs (``kind: LabSuite``)."""

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        from harness.loader import load_suite
        from harness.schema import load_lab

        for path in load_suite(self.path):
            lab = load_lab(path)
            yield LabCollector.from_parent(self, name=lab.name, lab=lab)


class LabCollector(pytest.Collector):
    """One lab: sets up the environment and namespace before its first step, cleans up after its last."""

    def __init__(self, *, lab: Lab, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.lab = lab
        self.runner: LabRunner | None = None
        self.setup_error: str | None = None
        self.profile_skip: str | None = None

    def collect(self) -> Iterator[pytest.Item]:
        for index, step in enumerate(self.lab.steps, 1):
            yield LabStep.from_parent(self, name=f"{index:02d}-{step.id}", step=step)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.lab.path, None, self.lab.name

    def setup(self) -> None:
        from dralab.errors import UserError
        from harness.runner import LabRunner

        config = self.config
        from harness.profile import load_profile

        try:
            name = load_profile(str(config.getoption("dralab_profile"))).name
            if self.lab.profiles and name not in self.lab.profiles:
                # decided before any cluster is brought up: a lab for other profiles costs no bring-up
                self.profile_skip = (
                    f"lab {self.lab.name} runs on profiles {', '.join(self.lab.profiles)}, not on {name}"
                )
                return
            env = environment(config, self.lab.inventory)
            self.runner = LabRunner(
                self.lab,
                env,
                run_id(config),
                extra_vars=_lab_vars(config),
                keep_namespace=bool(config.getoption("dralab_keep_namespace")),
                say=_say(config),
            )
            self.runner.start()
        except UserError as exc:
            self.setup_error = str(exc)
        except Exception as exc:  # bring-up failures become the first step's failure, not a crash
            self.setup_error = f"{type(exc).__name__}: {exc}"

    def teardown(self) -> None:
        from harness.report import write_lab_result
        from harness.results import LabResult

        if self.runner is not None:
            result = self.runner.finish()
        else:
            profile = str(self.config.getoption("dralab_profile"))
            result = LabResult(lab=self.lab.name, title=self.lab.title, profile=profile,
                               run_id=run_id(self.config), source=self.lab.source)  # fmt: skip
        if self.setup_error:
            result.error = self.setup_error
            if not result.steps:
                from harness.results import ERROR, SKIPPED, StepResult

                for i, step in enumerate(self.lab.steps):
                    status, reason = (ERROR, self.setup_error) if i == 0 else (SKIPPED, "the lab could not start")
                    result.steps.append(StepResult(id=step.id, title=step.title, status=status, reason=reason))
        write_lab_result(run_dir(self.config), result)


class LabStepFailed(Exception):
    """A lab step failed; its result carries the reason and the diagnostics."""

    def __init__(self, result: Any) -> None:
        super().__init__(result.reason)
        self.result = result


class LabStep(pytest.Item):
    """One step of a lab."""

    def __init__(self, *, step: Step, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.step = step
        self.add_marker(pytest.mark.e2e)  # one worker per lab: pytest_xdist_make_scheduler groups by lab
        # "hardware" only when nothing in the step can run without it (a local alternative keeps it in)
        if "hardware" in step.requires or all("hardware" in op.requires for op in step.ops):
            self.add_marker(pytest.mark.hardware)

    @property
    def collector(self) -> LabCollector:
        """The lab this step belongs to: its parent, as :meth:`LabCollector.collect` made it."""
        return cast(LabCollector, self.parent)

    def runtest(self) -> None:
        from harness.results import (
            ERROR,
            FAILED,
            PARTIAL,
            PARTIAL_PROPERTY,
            SKIPPED,
            SKIPPED_OP_PROPERTY,
            describe_skipped,
        )

        collector = self.collector
        if collector.profile_skip:
            pytest.skip(collector.profile_skip)
        if collector.setup_error:
            if self.step is collector.lab.steps[0]:
                raise LabStepFailed(_Reason(f"the lab could not start: {collector.setup_error}"))
            pytest.skip(f"the lab could not start: {collector.setup_error.splitlines()[0]}")
        assert collector.runner is not None  # setup() made it, else set setup_error or profile_skip (above)
        result = collector.runner.run_step(self.step)
        self.user_properties.append(("step", self.step.id))
        for outcome in result.ops:
            if outcome.evidence and outcome.status != SKIPPED:
                self.user_properties.append((f"evidence:{outcome.evidence}", outcome.summary))
        if result.status == PARTIAL:
            self.user_properties.append((PARTIAL_PROPERTY, result.reason or ""))
            for outcome in result.skipped_ops():
                self.user_properties.append((SKIPPED_OP_PROPERTY, describe_skipped([outcome])))
        if result.status == SKIPPED:
            pytest.skip(result.reason or "skipped")
        if result.status in (FAILED, ERROR):
            raise LabStepFailed(result)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, LabStepFailed):
            return _failure_text(self.collector.lab.name, self.step, excinfo.value.result)
        return str(super().repr_failure(excinfo, style))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.collector.lab.path, None, f"{self.collector.lab.name}: {self.step.title}"


class _Reason:
    def __init__(self, reason: str) -> None:
        self.reason = reason
        self.ops: list[Any] = []
        self.diagnostics: list[Any] = []


def _failure_text(lab: str, step: Any, result: Any) -> str:
    lines = [f"lab {lab}, step {step.id} ({step.title}) failed:", "", str(result.reason), ""]
    for outcome in result.ops:
        mark = {"passed": "ok", "failed": "FAILED", "skipped": "skip", "error": "ERROR"}.get(outcome.status, "?")
        lines.append(f"  [{mark}] {outcome.where}: {outcome.summary or outcome.error or ''}")
    for diag in result.diagnostics:
        lines += ["", f"--- {diag.kind}: {diag.summary or diag.error}"]
        if diag.kind != "describe":  # object dumps are long: they are in the report
            text = (diag.text or diag.error or "").strip().splitlines()
            lines += [f"    {t}" for t in text[-15:]]
    if result.diagnostics:
        lines += ["", "(full diagnostics, object dumps included, are in the lab report)"]
    return "\n".join(lines)


# reports -------------------------------------------------------------------------------------
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    envs = getattr(config, "_dralab_envs", {})
    for env in envs.values():
        env.close()
    envs.clear()
    if hasattr(config, "workerinput"):
        return
    folder = run_dir(config)
    if not (folder / "labs").is_dir():
        return
    from harness.report import write_run_reports

    write_run_reports(folder, run_id(config))
    config._dralab_report = folder  # type: ignore[attr-defined]


def skipped_summary(results: list[Any]) -> list[str]:
    """Lines naming every partial or capability-skipped step and the operations that did not run."""
    from harness.results import PARTIAL, SKIPPED, describe_skipped

    lines = []
    for res in results:
        for step in res.steps:
            if step.status == PARTIAL:
                lines.append(f"{res.lab} [{res.profile}] {step.id}: partial, not run: "
                             f"{describe_skipped(step.skipped_ops())}")  # fmt: skip
            elif step.status == SKIPPED and step.missing:
                lines.append(f"{res.lab} [{res.profile}] {step.id}: skipped: {step.reason.splitlines()[0]}")
    return lines


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    folder = getattr(config, "_dralab_report", None)
    if folder is not None:
        from harness.report import read_lab_results

        lines = skipped_summary(read_lab_results(folder))
        if lines:
            terminalreporter.write_sep("-", "dralab: operations not run on this profile")
            for line in lines:
                terminalreporter.write_line(line)
        terminalreporter.write_sep("-", "dralab lab report")
        terminalreporter.write_line(f"report: {folder / 'report.md'}")
        terminalreporter.write_line(f"html:   {folder / 'report.html'}")
        terminalreporter.write_line(f"junit:  {folder / 'junit.xml'}")


# fixtures for Python tests -------------------------------------------------------------------
@pytest.fixture(scope="session")
def dralab_profile(pytestconfig: pytest.Config) -> Any:
    """The cluster profile chosen with --dralab-profile."""
    from harness.profile import load_profile

    return load_profile(str(pytestconfig.getoption("dralab_profile")))


@pytest.fixture(scope="session")
def dralab_env(pytestconfig: pytest.Config) -> Any:
    """The profile's cluster with dralab deployed (the local cluster is brought up or reused)."""
    return environment(pytestconfig, None)


@pytest.fixture
def lab_namespace(dralab_env: Any) -> Iterator[str]:
    """An ephemeral namespace, deleted after the test."""
    from harness.resources import Ref
    from harness.runner import namespace_name

    name = namespace_name("test")
    dralab_env.client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    try:
        yield name
    finally:
        dralab_env.client.delete(Ref("v1", "Namespace", name=name))
