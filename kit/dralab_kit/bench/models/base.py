"""What every result file shares: the run's context, and the model each benchmark's result extends.

Every field has a default and unknown keys are kept (``extra="allow"``): a result written by an
older or newer benchmark still loads, and the report says what it lacks instead of failing.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

# a figure as the benchmark wrote it: an int stays an int, so the report prints it as written
Num = int | float


class Model(BaseModel):
    """Open model: fields the report reads are typed, anything else in the file is kept as is."""

    model_config = ConfigDict(extra="allow")


class LoadAverage(Model):
    """The 1, 5 and 15 minute load averages when the run started and ended."""

    start: list[Num] | None = None
    end: list[Num] | None = None


class Context(Model):
    """When, where and how a result was measured (see :func:`dralab_kit.bench.results.context`)."""

    commit: str | None = None
    dirty: bool | None = None
    date: str | None = None
    cores: int | None = None
    load_average: LoadAverage | None = None
    kernel: str | None = None
    python: str | None = None
    go: str | None = None
    run: str | None = None
    command: str | None = None


class Machine(Model):
    """The machine fields results carried before ``context`` existed."""

    cpus: int | None = None
    python: str | None = None


class LegacyLoad(Model):
    """The load average of results written before ``context`` existed."""

    before: list[Num] | None = None
    after: list[Num] | None = None


class BenchResult(Model):
    """Fields every result file has (or had): its name, when it was measured and its context."""

    benchmark: str | None = None
    measured_at: str | None = None
    context: Context | None = None
    machine: Machine | None = None
    quick: bool | None = None
    load_average: LegacyLoad | None = None

    def run_context(self) -> Context:
        """The run's context, rebuilt from the older fields for results written before contexts existed."""
        ctx = self.context
        if ctx is None or not (ctx.model_fields_set or ctx.model_extra):
            machine, load = self.machine or Machine(), self.load_average or LegacyLoad()
            ctx = Context(date=self.measured_at, cores=machine.cpus, python=machine.python,
                          load_average=LoadAverage(start=load.before, end=load.after))
        if ctx.run is None or ctx.run == "unknown":
            run = "quick" if self.quick else ("full" if self.quick is False else "unknown")
            ctx = ctx.model_copy(update={"run": run})
        return ctx


class Latency(Model):
    """Seconds from a pod's apply to Running over ``n`` pods."""

    n: int | None = None
    p50: Num | None = None
    p99: Num | None = None
    min: Num | None = None
    max: Num | None = None
