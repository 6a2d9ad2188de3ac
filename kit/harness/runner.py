"""Running a lab: steps in order, try / catch / finally, skips that say why, cleanup at the end.

The runner is independent of pytest (the plugin drives it one step per test item), so the same
semantics hold for ``dralab lab run``, ``pytest`` and unit tests with an in-memory cluster:

- a step's ``try`` operations run in order; the first that fails fails the step;
- then the step's ``catch`` collectors and the lab's ``catch`` collectors run (diagnostics);
- the step's ``finally`` operations always run;
- after a failed step every later step is skipped, naming the step that failed;
- a step (or operation) that needs a capability the profile lacks is skipped, saying which;
- a step passes only when every one of its operations ran and passed: when some were skipped for
  a missing capability it is *partial*, naming them; a proved row likewise holds only for what ran;
- ``finish`` runs the lab's ``cleanup``, deletes what the lab applied and its namespace.
"""

from __future__ import annotations

import calendar
import dataclasses
import os
import secrets
import socket
import string
import time
import traceback
from collections.abc import Callable
from typing import Any

from dralab.errors import UserError
from dralab.kube import KubeError
from dralab.util import WaitTimeout, get_logger, wait_for
from harness.environment import Environment, describe
from harness.ops import Context, StepFailed
from harness.registry import handler_for
from harness.resources import Ref
from harness.results import (
    ERROR,
    FAILED,
    NOT_RUN,
    PARTIAL,
    PASSED,
    SKIPPED,
    LabResult,
    OpOutcome,
    ProofRow,
    StepResult,
    describe_skipped,
)
from harness.schema import Lab, Operation, Step
from harness.subst import substitute

LAB_LABEL = "dralab.io/lab"
RUN_LABEL = "dralab.io/run"
OWNER_ANNOTATION = "dralab.io/owner"
STALE_AFTER_SECONDS = 24 * 3600
log = get_logger("dralab.harness")

Say = Callable[[str], None]


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _first_line(text: str | None) -> str:
    return (text or "").strip().splitlines()[0] if (text or "").strip() else ""


def owner() -> str:
    """Who runs this lab: ``<host>:<pid>`` (a namespace whose owner is gone is a leftover)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def is_stale(namespace: dict[str, Any], now: float | None = None) -> bool:
    """A namespace left by a run that is over: its process is gone (same host) or it is over a day old.

    Runs in progress elsewhere (another terminal, another xdist worker) keep their namespaces.
    """
    meta = namespace.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return False
    host, _, pid = str((meta.get("annotations") or {}).get(OWNER_ANNOTATION, "")).partition(":")
    if host == socket.gethostname() and pid.isdigit():
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False
    created = meta.get("creationTimestamp")
    if not created:
        return True
    age = (now or time.time()) - calendar.timegm(time.strptime(created, "%Y-%m-%dT%H:%M:%SZ"))
    return age > STALE_AFTER_SECONDS


def namespace_name(prefix: str) -> str:
    """An ephemeral namespace: the lab's prefix and five random characters."""
    alphabet = string.ascii_lowercase + string.digits
    return f"{prefix}-{''.join(secrets.choice(alphabet) for _ in range(5))}"


class LabRunner:
    """One replay of one lab on one environment."""

    def __init__(
        self,
        lab: Lab,
        env: Environment,
        run_id: str,
        *,
        extra_vars: dict[str, Any] | None = None,
        keep_namespace: bool = False,
        namespace_timeout: float = 120.0,
        say: Say | None = None,
    ) -> None:
        self.lab = lab
        self.env = env
        self.run_id = run_id
        self.keep_namespace = keep_namespace
        self.namespace_timeout = namespace_timeout
        self.say = say or (lambda _msg: None)
        self.result = LabResult(
            lab=lab.name,
            title=lab.title,
            profile=env.profile.name,
            run_id=run_id,
            source=lab.source,
            environment=describe(env),
        )
        variables = {**env.profile.vars, **lab.variables_for(env.profile.name), **(extra_vars or {})}
        self.ctx = Context(env=env, lab=lab, namespace="", vars=variables)
        self._declared = set(variables)
        self._failed: StepResult | None = None
        self._started = False
        self._finished = False
        self._t0 = time.monotonic()
        self.gate = self._gate()

    # lab-level gating ----------------------------------------------------------------------
    def _gate(self) -> str | None:
        profile = self.env.profile
        if self.lab.profiles and profile.name not in self.lab.profiles:
            return f"lab {self.lab.name} runs on profiles {', '.join(self.lab.profiles)}, not on {profile.name}"
        vendors = [str(v) for v in self.lab.prerequisites.get("vendors") or []]
        if profile.vendors and vendors and not set(vendors) <= set(profile.vendors):
            return (
                f"lab {self.lab.name} needs {', '.join(vendors)} devices; profile {profile.name} has "
                f"{', '.join(profile.vendors)}"
            )
        inventory = self.lab.inventory
        if profile.source != "local" and profile.inventory and inventory and inventory != profile.inventory:
            return (
                f"lab {self.lab.name} needs the {inventory} device inventory; profile {profile.name} "
                f"deploys {profile.inventory}"
            )
        needed = [str(c) for c in self.lab.prerequisites.get("capabilities") or []]
        missing = [c for c in needed if c not in self.env.capabilities]
        if missing:
            return f"profile {profile.name} lacks {', '.join(missing)}, which lab {self.lab.name} needs"
        return None

    def _missing(self, requires: tuple[str, ...]) -> list[str]:
        return [c for c in requires if c not in self.env.capabilities]

    # start ---------------------------------------------------------------------------------
    def start(self) -> None:
        """Remove leftovers of earlier runs of this lab and create a fresh namespace."""
        if self._started or self.gate:
            return
        self._started = True
        self.result.started = _now()
        client = self.env.client
        found = client.list(Ref("v1", "Namespace", label_selector=f"{LAB_LABEL}={self.lab.name}"))
        stale = [ns for ns in found if is_stale(ns)]
        for ns in stale:
            name = ns["metadata"]["name"]
            self.say(f"deleting namespace {name} left by an earlier run")
            client.delete(Ref("v1", "Namespace", name=name))
        for ns in stale:
            self._wait_gone(Ref("v1", "Namespace", name=ns["metadata"]["name"]))
        namespace = namespace_name(self.lab.namespace_prefix)
        labels = {**self.lab.namespace_labels, LAB_LABEL: self.lab.name, RUN_LABEL: self.run_id[:63]}
        client.apply(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {
                    "name": namespace,
                    "labels": labels,
                    "annotations": {**self.lab.namespace_annotations, OWNER_ANNOTATION: owner()},
                },
            }
        )
        self.ctx.namespace = namespace
        self.result.namespace = namespace
        self.ctx.vars.update(
            namespace=namespace,
            lab=self.lab.name,
            profile=self.env.profile.name,
            run_id=self.run_id,
            cluster=self.env.cluster_name or "",
        )
        self._declared |= {"namespace", "lab", "profile", "run_id", "cluster"}
        self._wait_default_service_account(namespace)
        self.say(f"namespace {namespace}")

    def _wait_default_service_account(self, namespace: str) -> None:
        """Pods are refused until the namespace's default ServiceAccount exists; wait for it briefly."""
        ref = Ref("v1", "ServiceAccount", name="default", namespace=namespace)
        try:
            wait_for(lambda: self.env.client.get(ref) is not None, 20.0, "the default ServiceAccount")
        except WaitTimeout:
            log.warning("no default ServiceAccount", extra={"fields": {"namespace": namespace}})

    def _wait_gone(self, ref: Ref) -> bool:
        try:
            wait_for(lambda: self.env.client.get(ref) is None, self.namespace_timeout, ref.describe() + " gone")
        except WaitTimeout:
            log.warning("not deleted in time", extra={"fields": {"object": ref.describe()}})
            return False
        return True

    # steps ---------------------------------------------------------------------------------
    def skip_reason(self, step: Step) -> str | None:
        """Why ``step`` will not run, or None."""
        if self.gate:
            return self.gate
        if self._failed is not None:
            return f"step '{self._failed.id}' failed earlier"
        missing = self._missing(step.requires)
        if missing:
            return f"profile {self.env.profile.name} lacks {', '.join(missing)}, which this step needs"
        return None

    def _run_op(self, op: Operation) -> OpOutcome:
        missing = self._missing(op.requires)
        if missing:
            return OpOutcome(
                kind=op.kind,
                where=op.where,
                status=SKIPPED,
                summary=f"needs {', '.join(missing)}, which profile {self.env.profile.name} lacks here",
                evidence=op.evidence,
                missing=missing,
            )
        started = time.monotonic()
        if op.mark:
            self.ctx.marks[op.mark] = started
        body = substitute(op.body, self.ctx.vars)
        handler = handler_for(op.kind)
        outcome = handler(self.ctx, body, op)
        outcome.seconds = round(time.monotonic() - started, 3)
        if op.measure:
            since = self.ctx.marks.get(op.measure.since)
            if since is None:
                raise UserError(f"{op.where}: measure since {op.measure.since!r}, but no operation marked it")
            value = round(time.monotonic() - since, 3)
            self.ctx.metrics[op.measure.name] = value
            self.ctx.vars[op.measure.name] = value
            outcome.summary += f"; {op.measure.name} = {value:.3f}s"
        return outcome

    def _collect(self, ops: tuple[Operation, ...]) -> list[OpOutcome]:
        out = []
        for op in ops:
            try:
                out.append(self._run_op(op))
            except Exception as exc:  # a collector must never hide the failure it documents
                out.append(OpOutcome(kind=op.kind, where=op.where, status=ERROR, error=f"{type(exc).__name__}: {exc}"))
        return out

    def run_step(self, step: Step) -> StepResult:
        """Run one step (or record why it is skipped) and return its result."""
        result = StepResult(id=step.id, title=step.title, proves=list(step.proves), started=_now())
        self.result.steps.append(result)
        reason = self.skip_reason(step)
        if reason:
            result.status, result.reason = SKIPPED, reason
            if not self.gate and self._failed is None:
                result.missing = self._missing(step.requires)
            return result
        if not self._started:
            self.start()
        started = time.monotonic()
        self.say(f"step {step.id}: {step.title}")
        try:
            for op in step.ops:
                current = OpOutcome(kind=op.kind, where=op.where, status=FAILED)
                try:
                    current = self._run_op(op)
                finally:
                    result.ops.append(current)
            skipped = result.skipped_ops()
            if len(skipped) == len(result.ops):
                result.status = SKIPPED
                result.missing = sorted({c for o in skipped for c in o.missing})
                result.reason = "no operation can run here: " + "; ".join(sorted({o.summary for o in result.ops}))
            elif skipped:
                result.status = PARTIAL
                result.reason = f"not on profile {self.env.profile.name}: {describe_skipped(skipped)}"
        except StepFailed as exc:
            self._fail(result, FAILED, str(exc))
        except (UserError, KubeError) as exc:
            self._fail(result, ERROR, str(exc))
        except Exception as exc:  # an unexpected harness or client error still fails only this lab
            self._fail(result, ERROR, f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=6)}")
        if result.status in (FAILED, ERROR):
            result.diagnostics = self._collect((*step.catch, *self.lab.catch))
        for op in step.finally_:
            outcome = self._collect((op,))[0]
            result.finally_.append(outcome)
            if outcome.status == ERROR and result.status in (PASSED, PARTIAL):
                self._fail(result, FAILED, f"finally {op.where}: {outcome.error}")
        result.seconds = round(time.monotonic() - started, 3)
        return result

    def _fail(self, result: StepResult, status: str, reason: str) -> None:
        result.status, result.reason = status, reason
        if result.ops and result.ops[-1].status == FAILED:
            result.ops[-1].error = _first_line(reason)
        self._failed = result

    # finish --------------------------------------------------------------------------------
    def finish(self) -> LabResult:
        """Run the lab's cleanup, delete what it created, and assemble the result (idempotent)."""
        if self._finished:
            return self.result
        self._finished = True
        if self._started:
            self.result.cleanup = self._collect(tuple(lenient_cleanup(op) for op in self.lab.cleanup))
            self._delete_applied()
        self.result.finished = _now()
        self.result.seconds = round(time.monotonic() - self._t0, 3)
        self.result.metrics = dict(self.ctx.metrics)
        self.result.captured = {k: v for k, v in self.ctx.vars.items() if k not in self._declared}
        self.result.proved = self._proof_rows()
        return self.result

    def _delete_applied(self) -> None:
        client = self.env.client
        for ref in reversed(self.ctx.applied):
            try:
                if client.get(ref) is not None:
                    client.delete(ref)
            except (KubeError, UserError) as exc:
                self.result.cleanup.append(
                    OpOutcome(kind="delete", where="cleanup", status=ERROR, error=f"{ref.describe()}: {exc}")
                )
        if self.keep_namespace or not self.ctx.namespace:
            return
        ns = Ref("v1", "Namespace", name=self.ctx.namespace)
        try:
            client.delete(ns)
            gone = self._wait_gone(ns)
            self.result.cleanup.append(
                OpOutcome(
                    kind="delete",
                    where="cleanup",
                    status=PASSED if gone else ERROR,
                    summary=f"namespace {self.ctx.namespace} deleted" if gone else "",
                    error=None if gone else f"namespace {self.ctx.namespace} still terminating",
                )
            )
        except (KubeError, UserError) as exc:
            self.result.cleanup.append(OpOutcome(kind="delete", where="cleanup", status=ERROR, error=str(exc)))

    def _proof_rows(self) -> list[ProofRow]:
        by_id = {s.id: s for s in self.result.steps}
        rows = []
        for proof in self.lab.proved:
            steps = [by_id[s.id] for s in self.lab.steps if proof.id in s.proves and s.id in by_id]
            status, note = proof_status(steps, self.env.profile.name)
            live = [
                {"step": s.id, "label": o.evidence, "summary": o.summary, "excerpt": o.excerpt}
                for s in steps
                for o in s.evidence()
            ]
            rows.append(
                ProofRow(
                    id=proof.id,
                    claim=proof.claim,
                    lab_evidence=proof.evidence,
                    status=status,
                    steps=[s.id for s in steps],
                    live=live,
                    note=note,
                )
            )
        return rows


def lenient_cleanup(op: Operation) -> Operation:
    """The lab's ``cleanup`` runs whatever happened: a delete of what is gone is fine there unless it says not."""
    if op.kind == "delete" and "missingOk" not in op.body:
        return dataclasses.replace(op, body={**op.body, "missingOk": True})
    return op


def proof_status(steps: list[StepResult], profile: str) -> tuple[str, str]:
    """A proved row's status and note from the steps that support it.

    passed only when every supporting operation ran and passed; partial ("not on this profile:
    ...") when some were skipped for a missing capability; skipped when none of them ran.
    """
    if not steps:
        return NOT_RUN, "no step that supports this row ran"
    statuses = [s.status for s in steps]
    if any(s in (FAILED, ERROR) for s in statuses):
        failed = [s.id for s in steps if s.status in (FAILED, ERROR)]
        return FAILED, f"step {', '.join(failed)} failed"
    if all(s == PASSED for s in statuses):
        return PASSED, ""
    if all(s == SKIPPED for s in statuses):
        reasons = sorted({(s.reason or "").strip().splitlines()[0] for s in steps if s.reason})
        return SKIPPED, "nothing that supports it ran: " + "; ".join(reasons)
    missed = []
    for step in steps:
        if step.status == SKIPPED:
            first = (step.reason or "").strip().splitlines()[0] if step.reason else "skipped"
            missed.append(f"step {step.id} ({first})")
        else:
            missed += [describe_skipped([o]) for o in step.skipped_ops()]
    return PARTIAL, f"not on this profile ({profile}): " + "; ".join(missed)
