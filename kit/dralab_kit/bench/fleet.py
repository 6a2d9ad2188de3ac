"""``dralab bench fleet``: dralab on a simulated fleet of KWOK nodes, against DRA without dralab in the same run.

Each size is a throw-away cluster ``dralab cluster up --fleet NODESx8`` (8 shareable fake GPUs per
node; the nodes' drivers and kubelet stand-ins hosted 50 nodes to a process:
:mod:`dralab_kit.cluster.fleetnode`). Three phases, each run twice, alternating the two kinds:

- *dralab*: pods in HAMi syntax (``nvidia.com/gpu``, ``gpumem``, ``gpucores``) through the webhook.
  With ``--lifecycle claim`` (the chart's default) the webhook creates each pod's claim in admission
  and the janitor releases it after the pod is gone; with ``--lifecycle template`` the webhook makes
  one ResourceClaimTemplate per pod shape and namespace, and kube-controller-manager each claim;
- *baseline* (DRA without dralab): the same pods already written as DRA pods, each naming one
  ResourceClaimTemplate (the webhook's own conversion, run here once, in its template form), as
  DRA users and Kubernetes' scheduler_perf write them. The bench creates the one template before
  the clock; kube-controller-manager's resourceclaim controller creates each pod's claim inside the
  clock and removes it once the pod is gone. So both kinds pay a claim create per pod in the clock:
  dralab in admission (claim lifecycle) or in the controller (template), the baseline in the controller.

Each node's driver reconciles as README "Scale" advises for the fleet's size
(:func:`dralab_kit.cluster.fleet.driver_reconcile_seconds`); each size's row records that, the lifecycle and the
Kubernetes version (``--kubernetes``; default :data:`dralab.versions.KUBERNETES_VERSION`).

Both kinds' creates are resent after an overload answer (429, 500, 503, 504; the webhook answers
504 "retry the pod" when the apiserver cannot create a claim within its deadline), with a
controller's backoff, and the resends are counted (``retries``): a ReplicaSet or Job making pods in
bulk does the same, so a refused create is latency, not a lost pod.

Phases: **fill** 8 pods per node at once (half a GPU each: about half the fleet's capacity),
**churn** a steady rate of replacements for minutes (the oldest pod deleted, its claim released, and
a new one created: :data:`CHURN_PODS_PER_S`), **burst** up to 1,000 smaller pods at once on the
emptied fleet. The fill and the burst run again with the kinds in the other order (:data:`ORDER`), and
their ratios are judged over both orders. Per phase and kind: pods bound per second, p50/p99 create-to-bound and
create-to-Running, CPU per pod of every component (``/proc`` of the pids the cluster's state
records), apiserver requests per pod by verb and resource (its ``apiserver_request_total``),
dralab's resident memory against claims and slices, and at the end of a size the leaks (claims
left, capacity still consumed, claims still prepared).

dralab's CPU is the webhook's process tree (servers and the janitor) plus the fleet's driver processes;
the stand-in and KWOK are the simulation and are reported apart, never in dralab's figure. The local
cluster runs no monitor: its share is not measured here.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from dralab.versions import KUBERNETES_VERSION
from dralab_kit.bench import DEFAULT_OUT
from dralab_kit.bench.common import parse_sizes, percentile, save_figure, write_result
from dralab_kit.bench.concurrency import (
    RETRY_STATUSES,
    ApiStatusError,
    Burst,
    BurstRunner,
    async_client,
    cpu_per_pod,
    retry_delay,
)
from dralab_kit.bench.cpu import CpuMeter, settle_machine
from dralab_kit.bench.phases import DRIVER_WORK, WEBHOOK_CALL_FAILURES, Scraper, counted, per_pod
from dralab_kit.bench.results import context
from dralab_kit.cluster.cli import kubernetes_option

console = Console(stderr=True)

DEVICES_PER_NODE = 8
SIZES_FULL = (50, 200, 500)
SIZES_QUICK = (10,)
FILL_PER_NODE = 8
FILL_POD = {"memory_mib": 8192, "cores": 50}  # half of an L4's cores: 2 per GPU, 8 per node = half the fleet
BURST_POD = {"memory_mib": 2048, "cores": 10}
BURST_PODS = 1000
BURST_PODS_QUICK = 200
BURST_SHARE = 0.5  # a burst asks for at most half of what the fleet's cores hold
# churn: a steady rate for minutes, as the issue asks, the same at every size: pods replaced a second
# (the oldest deleted, its claim released; a new one created, a claim allocated), and for how long.
# 3 a second is 100,000 pods a day; a rate the 500-node fleet keeps up with on 2 cores, so the
# create-to-Running p99 is the latency of a reallocation, not of a queue.
CHURN_PODS_PER_S = 3.0
CHURN_S, CHURN_S_QUICK = 180.0, 30.0
KINDS = ("dralab", "baseline")
LIFECYCLES = ("claim", "template")  # the webhook's, as in the chart's webhook.lifecycle
FIRST_KUBERNETES = "v1.35.4"  # what every row that does not name its version ran on (the default then)
PHASES = ("fill", "churn", "burst")
# The fill again, the kinds in the other order (baseline first): with the first fill (dralab first) an
# A-B-B-A crossover, so a cost or a speed-up that comes with running first (a cluster's first thousands
# of pods: etcd and the apiserver's caches growing, the Go heaps sizing up) falls on both kinds alike.
FILL_AGAIN = "fill_again"
# The burst again, dralab first: the burst runs the baseline first, so with it the bursts are an A-B-B-A
# crossover too (bench/scratch/burst_order.py measured the same kind 23 % apart between its turns).
BURST_AGAIN = "burst_again"
AGAIN = {"fill": FILL_AGAIN, "burst": BURST_AGAIN}  # a phase judged over both orders: its run in the other order
# the order the kinds take in each phase: dralab first where the baseline's turn comes second
ORDER = {"fill": KINDS, "churn": KINDS, FILL_AGAIN: KINDS[::-1], "burst": KINDS[::-1], BURST_AGAIN: KINDS}
DRALAB_COMPONENTS = ("webhook", "driver")  # the janitor runs inside the webhook's tree
SIMULATED = ("kubelet", "kwok")  # the simulated node layer: reported apart
POD_WORK = ("prepare", "unprepare", "status")  # the driver's work each pod causes; reconcile, publish: periodic
RATIO_TARGET = 0.9  # dralab ÷ baseline pods/s at the largest size, fill and burst
CHURN_P99_TARGET_S = 5.0  # churn: a replacement pod's create to Running, p99, at the largest size
CPU_GROWTH_TARGET = 1.2  # dralab CPU per pod at the largest size ÷ at the smallest
# The webhook's resident memory per claim at the largest size, above what it held at rest (fill, dralab): the
# one process of dralab that holds every claim. From the growth law (README "Scale"): 100,000 claims within
# the 4Gi the chart table gives the webhook at 5,000 nodes is 41 KiB per claim; its caches take about
# 25 KB per pod and claim (a pod 12 KB, a claim 12.5 KB). A driver holds its own node's claims only.
MEMORY_PER_CLAIM_TARGET_KIB = 40.0
LOST_CREATES_MAX = 0.01  # a kind that lost more of a phase's creates did less work: that ratio is not judged
STALL_S = 120.0  # every pod bound and none started Running for this long: the rest never will
IDLE_WINDOW_S = 20.0  # the fleet at rest, before the phases: each component's CPU per second


# ---------------------------------------------------------------- pure: pods, requests, verdicts


def hami_pod(name: str, memory_mib: int, cores: int) -> dict[str, Any]:
    """A pod in HAMi syntax asking for a share of one NVIDIA GPU (what the webhook converts)."""
    from dralab_kit.fixtures.pods import bench_pod

    return bench_pod(name, {"nvidia.com/gpu": "1", "nvidia.com/gpumem": str(memory_mib),
                            "nvidia.com/gpucores": str(cores)})


def dra_pod(name: str, namespace: str, memory_mib: int, cores: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The same pod as DRA without dralab, and the ResourceClaimTemplate it names: the webhook's
    conversion run once in its template form, with none of dralab's labels or annotations on the pod
    or the template (so no janitor and no webhook act on them). Pods of one size share one template."""
    from dralab.model.convert import convert_pod
    from dralab.model.vendors import load_vendor_table

    conv = convert_pod(hami_pod(name, memory_mib, cores), load_vendor_table(), namespace=namespace,
                       lifecycle="template")
    (template,) = conv.objects
    pod = conv.pod
    pod["metadata"] = {"name": name}
    template["metadata"] = {"name": template["metadata"]["name"], "namespace": namespace}
    return pod, template


def burst_size(nodes: int, devices: int = DEVICES_PER_NODE, quick: bool = False) -> int:
    """Pods in the burst: 1,000 (quick: 200), or fewer where half the fleet's cores would not hold them."""
    fits = int(nodes * devices * (100 // BURST_POD["cores"]) * BURST_SHARE)
    return min(BURST_PODS_QUICK if quick else BURST_PODS, fits)


def parse_requests(text: str) -> dict[str, float]:
    """``apiserver_request_total`` by ``VERB resource[/subresource]`` (watches and metrics reads left out)."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name != "apiserver_request":
            continue
        for sample in family.samples:
            if sample.name != "apiserver_request_total":
                continue
            verb, resource = sample.labels.get("verb", ""), sample.labels.get("resource", "")
            if verb in ("WATCH", "CONNECT") or not resource:
                continue
            sub = sample.labels.get("subresource", "")
            key = f"{verb} {resource}{'/' + sub if sub else ''}"
            out[key] = out.get(key, 0.0) + sample.value
    return out


def requests_per_pod(before: dict[str, float], after: dict[str, float], pods: int) -> dict[str, float]:
    """Requests per pod by verb and resource, largest first (those under 0.01 per pod dropped)."""
    if not pods:
        return {}
    diff = {k: (after.get(k, 0.0) - before.get(k, 0.0)) / pods for k in after}
    kept = {k: round(v, 3) for k, v in diff.items() if v >= 0.01}
    total = round(sum(kept.values()), 3)
    return {"total": total, **dict(sorted(kept.items(), key=lambda kv: -kv[1]))}


def _r(value: float | None, digits: int = 4) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else round(value, digits)


def summarize(burst: Burst) -> dict[str, Any]:
    """One timed batch: pods bound per second, p50/p99 create-to-bound and create-to-Running."""
    bound = len(burst.latencies)
    running_done = max(burst.running) if burst.running else math.nan
    return {
        "pods": burst.n,
        "pods_per_s": _r(bound / burst.completion_s) if bound and burst.completion_s > 0 else None,
        "running_per_s": _r(len(burst.running) / running_done) if burst.running and running_done > 0 else None,
        "bound_p50_s": _r(percentile(burst.latencies, 50)),
        "bound_p99_s": _r(percentile(burst.latencies, 99)),
        "running_p50_s": _r(percentile(burst.running, 50)),
        "running_p99_s": _r(percentile(burst.running, 99)),
        "failures": burst.failures,
        "retries": burst.retries,
        "first_refusal": burst.first_refusal,
        "not_running": burst.not_running,
        "first_error": burst.first_error,
    }


def churn_pods(quick: bool = False) -> int:
    """How many pods churn replaces: :data:`CHURN_PODS_PER_S` for :data:`CHURN_S` (the same at every size)."""
    return round(CHURN_PODS_PER_S * (CHURN_S_QUICK if quick else CHURN_S))


def dralab_cpu(cpu_ms: dict[str, float]) -> float | None:
    """dralab's CPU per pod: webhook (with the janitor) + driver; None when neither was measured."""
    parts = [cpu_ms[c] for c in DRALAB_COMPONENTS if c in cpu_ms]
    return round(sum(parts), 3) if parts else None


def phase_row(size: dict[str, Any], phase: str, kind: str) -> dict[str, Any]:
    """One size's row for a phase and kind (``{}`` where the run has none): results are read raw."""
    return ((size.get("phases") or {}).get(phase) or {}).get(kind) or {}


NOT_READY_EVENTS = "/api/v1/events?fieldSelector=reason%3DNodeNotReady%2CinvolvedObject.kind%3DNode"


def _count(event: dict[str, Any]) -> int:
    """How many times one event happened: an event repeated for the same object is one object whose
    ``count`` grows (``series.count`` in the events.k8s.io form)."""
    return int(event.get("count") or (event.get("series") or {}).get("count") or 1)


def new_occurrences(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> int:
    """How many times the events happened between two readings: each event of ``after`` less its count in
    ``before`` (by uid). An event the apiserver dropped in between (events live an hour) takes nothing
    off, as a difference of totals would."""
    seen = {(e.get("metadata") or {}).get("uid"): _count(e) for e in before}
    return sum(max(0, _count(e) - seen.get((e.get("metadata") or {}).get("uid"), 0)) for e in after)


# kube-apiserver's warning for an admission call that failed with failurePolicy: Fail (its dispatcher):
# "Failed calling webhook, failing closed NAME: failed calling webhook "NAME": failed to call webhook:
# Post "URL": REASON"; REASON is Go's error text (EOF, context deadline exceeded, connection refused ...)
FAILED_CALL = re.compile(r'Failed calling webhook, failing closed \S+: (?:.*?Post "[^"]*": )?(?P<reason>.*)$')


def webhook_call_errors(log_text: str) -> dict[str, int]:
    """The reasons of the admission calls the apiserver's log says failed (failing closed), counted: what
    ``webhook_call_failures`` (its metric, which carries no reason) were. A reason's port and addresses are
    kept as Go wrote them, cut to 160 characters."""
    reasons: dict[str, int] = {}
    for line in log_text.splitlines():
        if match := FAILED_CALL.search(line):
            reason = match["reason"].strip()[:160]
            reasons[reason] = reasons.get(reason, 0) + 1
    return dict(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])))


def log_since(path: Path, offset: int) -> str:
    """A log file's text written after ``offset`` bytes (all of it if the file is shorter: it was replaced);
    empty where there is no file."""
    try:
        with path.open("rb") as f:
            f.seek(offset if offset <= path.stat().st_size else 0)
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def log_size(path: Path) -> int:
    """Where a phase's part of a log begins (:func:`log_since`): its size now, 0 where there is none yet."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


def duplicate_claims(claims: list[dict[str, Any]]) -> int:
    """Pods that own more than one claim: kube-controller-manager made a second claim from the pod's
    template (its cache had not seen the first) and may point the pod's status at it after the
    scheduler allocated the first, so the pod never runs. dralab's webhook names each pod's claim
    itself, once: its pods cannot get a second."""
    owners: dict[str, int] = {}
    for claim in claims:
        for ref in (claim.get("metadata") or {}).get("ownerReferences") or []:
            if ref.get("kind") == "Pod" and ref.get("uid"):
                owners[ref["uid"]] = owners.get(ref["uid"], 0) + 1
    return sum(1 for n in owners.values() if n > 1)


def above_rest(per_pod: float | None, idle_ms_per_s: dict[str, float], window_s: float, pods: int,
               components: tuple[str, ...] = DRALAB_COMPONENTS) -> float | None:
    """dralab's CPU per pod less what its components burn at rest over the same window.

    The fleet's driver processes host every node: at rest they spend a fixed amount per node and
    second, so over a phase of W seconds and P pods they add idle * nodes * W / P to each pod, a
    share that grows with the fleet whatever a pod costs. Subtracting the rate measured before the
    phases leaves the work the pods caused; both figures are kept. None where the rest reading exceeds
    what the phase spent (a rest window taken while the fleet was still settling cannot be subtracted).
    """
    idle = [idle_ms_per_s[c] for c in components if c in idle_ms_per_s]
    if per_pod is None or not idle or not pods:
        return None
    left = round(per_pod - sum(idle) * window_s / pods, 3)
    return left if left >= 0 else None


def driver_work(spent: dict[str, dict[str, float]]) -> dict[str, float]:
    """The driver's CPU per pod by work (its threads' CPU time, ``dralab_driver_work_cpu_seconds``), ms:
    prepare, unprepare and status (the claim status write) are each pod's; reconcile, publish and restore
    are periodic passes that fell in the window. Empty for runs before the driver counted its work."""
    return {k.removeprefix(DRIVER_WORK): v["ms_per_pod"] for k, v in spent.items() if k.startswith(DRIVER_WORK)}


def _component_above_rest(row: dict[str, Any], component: str, idle_ms_per_s: dict[str, float]) -> float | None:
    """One component's CPU per pod in a phase row less its rest over the window (:func:`above_rest`)."""
    return above_rest((row.get("cpu_ms_per_pod") or {}).get(component), idle_ms_per_s, row.get("window_s") or 0.0,
                      row.get("created") or 0, (component,))


def pod_work_cpu(row: dict[str, Any], idle_ms_per_s: dict[str, float]) -> float | None:
    """dralab's CPU per pod counted where each part is spent: the webhook's processes (admission and the
    janitor, one set per cluster) above their rest, plus the node's driver's work for the pod (Prepare,
    Unprepare, the status write) by its own threads' CPU time.

    The fleet hosts 50 nodes' drivers per interpreter on one machine; a node's driver in a real fleet has
    its node to itself. What those processes spend besides the pods' work (gRPC's threads, the interpreter
    switching among hundreds of threads, periodic passes) is reported apart (:func:`driver_unattributed`).
    None for runs before the driver counted its work, or a webhook rest above the phase's spending."""
    work = row.get("driver_work_cpu_ms_per_pod") or {}
    webhook = _component_above_rest(row, "webhook", idle_ms_per_s)
    if not work or webhook is None:
        return None
    return round(webhook + sum(work.get(k, 0.0) for k in POD_WORK), 3)


def driver_pod_work(size: dict[str, Any], phases: list[str], kind: str) -> float | None:
    """The node driver's own CPU per pod of ``kind`` for the pod's work (:data:`POD_WORK`), ms, the mean
    over ``phases``; None where a phase has no driver work counted (runs before the driver counted it)."""
    works = [phase_row(size, p, kind).get("driver_work_cpu_ms_per_pod") for p in phases]
    if not phases or not all(works):
        return None
    return sum(sum((w or {}).get(k, 0.0) for k in POD_WORK) for w in works) / len(works)


def driver_unattributed(row: dict[str, Any], idle_ms_per_s: dict[str, float]) -> float | None:
    """The driver processes' CPU per pod above rest that no unit of driver work counted (gRPC's own threads,
    the watches, the interpreter), ms; None where not measured or the rest reading exceeds the phase's."""
    work = row.get("driver_work_cpu_ms_per_pod") or {}
    driver = _component_above_rest(row, "driver", idle_ms_per_s)
    if not work or driver is None:
        return None
    left = driver - sum(work.values())
    return round(left, 3) if left >= 0 else None


def kib_per_claim(rss_mib: dict[str, float], idle_rss_mib: dict[str, float], claims: int,
                  components: tuple[str, ...] = DRALAB_COMPONENTS) -> float | None:
    """The resident memory of ``components`` (dralab's by default) above what they held at rest, per claim
    in the cluster, in KiB; None without claims or a rest reading."""
    if not claims or not idle_rss_mib:
        return None
    grown = sum(rss_mib.get(c, 0.0) - idle_rss_mib.get(c, 0.0) for c in components)
    return round(grown * 1024 / claims, 2)


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a and b else None


def at_most(value: float | None, target: float) -> bool | None:
    """Whether a figure meets an upper target; None (not judged) where it was not measured."""
    return None if value is None else value <= target


def phase_ratio(size: dict[str, Any], phase: str) -> float | None:
    """dralab ÷ baseline pods bound per second in one phase of one size."""
    dralab, baseline = (phase_row(size, phase, kind).get("pods_per_s") for kind in KINDS)
    return _ratio(dralab, baseline)


def crossover_ratio(size: dict[str, Any], phase: str = "fill") -> float | None:
    """dralab ÷ baseline pods/s of ``phase``, over both orders where its run again (:data:`AGAIN`, the kinds
    reversed) ran: the geometric mean of the two ratios, in which a factor that favours whichever kind runs
    second in a pair cancels out. The first ratio alone where the other order did not run (runs before it)."""
    first, second = phase_ratio(size, phase), phase_ratio(size, AGAIN[phase])
    if first is None or second is None:
        return first
    return round(math.sqrt(first * second), 3)


def _by_order(size: dict[str, Any], phase: str) -> dict[str, float | None]:
    """A crossover phase's ratio in each order, keyed by the kind that ran first."""
    return {f"{ORDER[run][0]}_first": phase_ratio(size, run) for run in (phase, AGAIN[phase])}


def rest_floor(*readings: dict[str, float]) -> dict[str, float]:
    """The lower of several rest readings, per component: a window can catch a process still settling
    (the first, right after bring-up) or still reaping (the last), never one idler than it is, so the
    lowest is the closest to its rest (and the least taken out of a phase's figures)."""
    got = [r for r in readings if r]
    keys = set().union(*got) if got else set()
    return {k: min(r[k] for r in got if k in r) for k in sorted(keys)}


def subtract_rest(phases: dict[str, dict[str, Any]], idle_ms_per_s: dict[str, float]) -> None:
    """Set every phase row's figures that take out the rest (``dralab_cpu_ms_per_pod_above_rest``,
    ``dralab_work_cpu_ms_per_pod``, ``driver_unattributed_cpu_ms_per_pod``) from its own fields and
    ``idle_ms_per_s``."""
    for rows in phases.values():
        for row in rows.values():
            set_rest_figures(row, idle_ms_per_s)


def set_rest_figures(row: dict[str, Any], idle_ms_per_s: dict[str, float]) -> None:
    """One phase row's figures that take out the rest (see :func:`subtract_rest`)."""
    row["dralab_cpu_ms_per_pod_above_rest"] = above_rest(
        row.get("dralab_cpu_ms_per_pod"), idle_ms_per_s, row.get("window_s") or 0.0, row.get("created") or 0)
    row["dralab_work_cpu_ms_per_pod"] = pod_work_cpu(row, idle_ms_per_s)
    row["driver_unattributed_cpu_ms_per_pod"] = driver_unattributed(row, idle_ms_per_s)


def lost_creates(size: dict[str, Any], phase: str) -> str | None:
    """Why a phase's two kinds did not do the same work (a kind lost more than :data:`LOST_CREATES_MAX`
    of its creates), or None: pods bound per second compare only batches of the same pods."""
    reasons = []
    for kind in KINDS:
        row = phase_row(size, phase, kind)
        pods, failed = row.get("pods") or 0, row.get("failures") or 0
        if pods and failed / pods > LOST_CREATES_MAX:
            error = (row.get("first_error") or "").split(":")[0]
            reasons.append(f"{kind} lost {failed} of {pods} creates" + (f" ({error})" if error else ""))
    return "; ".join(reasons) or None


def verdict(sizes: list[dict[str, Any]]) -> dict[str, Any]:
    """The issue's targets over the sizes of one run (None where a figure is missing)."""
    if not sizes:
        return {}
    small, large = sizes[0], sizes[-1]

    # a size stopped part-way (``failed``) is compared on the phases both sizes measured
    common = [p for p in PHASES if phase_row(small, p, "dralab") and phase_row(large, p, "dralab")]

    def cpu(size: dict[str, Any], field: str = "dralab_cpu_ms_per_pod") -> float | None:
        vals = [phase_row(size, p, "dralab").get(field) for p in common]
        got = [v for v in vals if v is not None]
        return sum(got) / len(got) if got else None

    def webhook(size: dict[str, Any]) -> float | None:
        vals = [(phase_row(size, p, "dralab").get("cpu_ms_per_pod") or {}).get("webhook")
                for p in common]
        got = [v for v in vals if v is not None]
        return sum(got) / len(got) if got else None

    ratios = {p: crossover_ratio(large, p) if p in AGAIN else phase_ratio(large, p) for p in PHASES}
    not_comparable = {p: why for p in PHASES if (why := lost_creates(large, p))}
    for phase, its_again in AGAIN.items():  # the phase's ratio spans both of its runs
        if again := lost_creates(large, its_again):
            not_comparable[phase] = "; ".join(filter(None, [not_comparable.get(phase), f"again: {again}"]))
    growth = _ratio(cpu(large), cpu(small)) if large is not small else None
    work = "dralab_work_cpu_ms_per_pod"
    unmeasured = any(phase_row(sz, p, "dralab").get(work) is None for sz in (small, large) for p in common)
    work_growth = _ratio(cpu(large, work), cpu(small, work)) if large is not small and not unmeasured else None
    driver_growth = {kind: _ratio(driver_pod_work(large, common, kind), driver_pod_work(small, common, kind))
                     if large is not small else None for kind in KINDS}
    driver_vs_baseline = _ratio(driver_growth["dralab"], driver_growth["baseline"])
    rest = "dralab_cpu_ms_per_pod_above_rest"
    negative = any((phase_row(sz, p, "dralab").get(rest) or 0.0) < 0 for sz in (small, large) for p in common)
    growth_above_rest = (_ratio(cpu(large, rest), cpu(small, rest))
                         if large is not small and not negative else None)  # older runs stored negatives
    leaks = [s.get("leaks") or {} for s in sizes]
    no_leaks: bool | None = all(not (lk.get("claims") or lk.get("capacity") or lk.get("prepared")) for lk in leaks)
    if no_leaks and any(s.get("failed") for s in sizes):
        no_leaks = None  # a stopped size has no leak figure: not judged rather than passed
    judged = [r for p in ("fill", "burst") if (r := ratios[p]) is not None and p not in not_comparable]
    # one ratio below the target fails the target; both are needed to meet it
    meets_ratio = False if any(r < RATIO_TARGET for r in judged) else (True if len(judged) == 2 else None)
    churn_p99 = phase_row(large, "churn", "dralab").get("running_p99_s")
    filled = phase_row(large, "fill", "dralab")
    memory = kib_per_claim(filled.get("rss_mib") or {}, large.get("idle_rss_mib") or {}, filled.get("claims") or 0,
                           ("webhook",))
    return {
        "largest_nodes": large.get("nodes"),
        # the fill's ratio in each order (dralab first, then baseline first): ratio_by_phase.fill is their
        # geometric mean where both ran
        "fill_ratio_by_order": _by_order(large, "fill"),
        # the same for the burst (baseline first, then dralab first: ratio_by_phase.burst where both ran)
        "burst_ratio_by_order": _by_order(large, "burst"),
        "phases_compared": common,
        "stopped": {s["nodes"]: s["failed"] for s in sizes if s.get("failed")},
        "smallest_nodes": small.get("nodes"),
        "ratio_by_phase": ratios,
        # the phases whose ratio is shown but not judged, and why (a kind lost creates: less work done)
        "ratio_not_comparable": not_comparable,
        "ratio_target": RATIO_TARGET,
        "meets_ratio": meets_ratio,
        "cpu_growth": growth,
        "cpu_growth_target": CPU_GROWTH_TARGET,
        "meets_cpu_growth": at_most(growth, CPU_GROWTH_TARGET),
        # the same with each size's CPU at rest taken out (above_rest): the work pods cause, per pod
        "cpu_growth_above_rest": growth_above_rest,
        "meets_cpu_growth_above_rest": at_most(growth_above_rest, CPU_GROWTH_TARGET),
        # counted where it is spent: the webhook above rest + the driver's own CPU for each pod's Prepare,
        # Unprepare and status write (pod_work_cpu); runs since the driver counts its work
        "pod_work_cpu_growth": work_growth,
        "meets_pod_work_cpu_growth": at_most(work_growth, CPU_GROWTH_TARGET),
        # the node driver's own CPU for each pod (Prepare, Unprepare, status write), per kind's pods: the same
        # code does the same work for the baseline's pods, so its growth there is the machine's contention
        # (one 2-core machine for every size), and dralab's growth over it is what dralab's pods add
        "driver_pod_work_growth": driver_growth,
        "driver_pod_work_growth_vs_baseline": driver_vs_baseline,
        "meets_driver_pod_work_growth_vs_baseline": at_most(driver_vs_baseline, CPU_GROWTH_TARGET),
        # the webhook alone (admission and janitor): the fleet's driver process hosts every node's driver,
        # whose per-node loops grow with the fleet in one process but stay per node in a real fleet
        "webhook_cpu_growth": _ratio(webhook(large), webhook(small)) if large is not small else None,
        "no_leaks": no_leaks,
        # churn replaces pods at a steady rate on a half-full fleet: the p99 of the new pods' create to
        # Running, dralab's kind (runs before the steady rate made one round of a pod per node at once)
        "churn_p99_s": churn_p99,
        "churn_p99_target_s": CHURN_P99_TARGET_S,
        "meets_churn_p99": at_most(churn_p99, CHURN_P99_TARGET_S),
        # the webhook's memory per claim at the largest size, fill, above its rest (runs since rest RSS was read)
        "memory_kib_per_claim": memory,
        "memory_kib_per_claim_target": MEMORY_PER_CLAIM_TARGET_KIB,
        "meets_memory_per_claim": at_most(memory, MEMORY_PER_CLAIM_TARGET_KIB),
    }


# ---------------------------------------------------------------- the cluster's processes


def _tree_pids(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        current = todo.pop()
        out.append(current)
        try:
            for task in Path(f"/proc/{current}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return out


def tree_rss_mib(pid: int) -> float:
    """Resident memory of ``pid`` and its descendants (the webhook's workers), MiB."""
    total = 0
    for p in _tree_pids(pid):
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return round(total / 1024, 1)


CALL_ATTEMPTS = 5  # per list, delete or create call of the fleet's runner (Runner._ok)


class Runner(BurstRunner):
    """BurstRunner whose calls survive a dropped connection: on a loaded machine the apiserver closes kept-alive
    connections under the client now and then, and one lost DELETE must not lose a half-hour run."""

    async def _ok(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        """Send again, after the controllers' backoff, a call whose connection dropped, and a list or
        delete answered with an overload status (504 at 500 nodes on 2 cores), as a reflector relists.
        A create answered with any status is never resent here (creates count their own resends)."""
        import httpx

        for attempt in range(1, CALL_ATTEMPTS + 1):
            try:
                return await super()._ok(method, path, **kw)
            except (httpx.TransportError, ApiStatusError) as exc:
                status = exc.status if isinstance(exc, ApiStatusError) else None
                if method == "POST" and attempt > 1 and status == 409:
                    return {}  # the create resent after a dropped connection had reached the apiserver
                answered = status is not None
                if attempt == CALL_ATTEMPTS or (answered and (method == "POST" or status not in RETRY_STATUSES)):
                    raise
                await asyncio.sleep(retry_delay(attempt))
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def clear(self, ns: str, kube_wait: float = 180.0, own_claims: bool = False) -> None:
        """Delete the pods one by one first: at 500 nodes the collection delete of 4,000 pods outlived the
        apiserver's request timeout, which then closed the connection, five times running."""
        listed = await self._ok("GET", f"/api/v1/namespaces/{ns}/pods")
        await _delete_pods(self, ns, [p["metadata"]["name"] for p in listed.get("items") or []])
        await super().clear(ns, kube_wait=kube_wait, own_claims=own_claims)


class Fleet:
    """One size's cluster: the timed batches, the meters, the clean-up and the leak check."""

    def __init__(self, handle: Any, nodes: int, timeout: float) -> None:
        self.handle = handle
        self.nodes = nodes
        self.meter = CpuMeter.for_cluster(handle)
        self.scraper = Scraper.for_cluster(handle)
        self.timeout = timeout
        self.idle_ms_per_s: dict[str, float] = {}
        self.idle_rss_mib: dict[str, float] = {}

    def rss(self) -> dict[str, float]:
        return {name: round(sum(tree_rss_mib(pid) for pid in pids), 1) for name, pids in self.meter.pids.items()}

    def requests(self) -> dict[str, float]:
        kube = self.handle.kube()
        try:
            return parse_requests(kube.text("/metrics"))
        finally:
            kube.close()

    async def items(self, client: Any, path: str) -> list[dict[str, Any]]:
        resp = await client.get(path)
        resp.raise_for_status()
        return list(resp.json().get("items") or [])

    async def at_rest(self, seconds: float = IDLE_WINDOW_S) -> dict[str, float]:
        """Each component's CPU per second (ms/s) while nothing is asked of the fleet: the cost of its
        nodes existing (publishers, watches, gRPC servers' wake-ups), which a phase pays for its whole
        length whatever its pods do."""
        settle_machine()
        before, started = self.meter.read(), time.monotonic()
        await asyncio.sleep(seconds)  # the window being measured, not a wait for anything
        after, elapsed = self.meter.read(), time.monotonic() - started
        self.idle_ms_per_s = {k: round((after[k] - before.get(k, 0.0)) * 1000 / elapsed, 3) for k in after}
        self.idle_rss_mib = self.rss()
        return self.idle_ms_per_s

    async def measured(self, client: Any, pods: int, work: Any) -> dict[str, Any]:
        """Run ``work`` (a coroutine returning a Burst) between two readings of CPU, apiserver requests and
        the components' own histograms (the scrape of those outside the CPU window)."""
        spent0 = await self.scraper.snapshot()
        not_ready0 = await self.items(client, NOT_READY_EVENTS)
        apiserver_log = self.handle.layout.log_path("apiserver")
        log0 = log_size(apiserver_log)
        cpu0, req0, started = self.meter.read(), self.requests(), time.monotonic()
        burst = await work
        cpu1, req1, elapsed = self.meter.read(), self.requests(), time.monotonic() - started
        spent1 = await self.scraper.snapshot()
        not_ready1 = await self.items(client, NOT_READY_EVENTS)
        created = len(burst.admitted) or pods  # pods the apiserver accepted: a refused create costs little
        cpu = cpu_per_pod(cpu0, cpu1, created)
        row = summarize(burst)
        row["created"] = created
        row["window_s"] = round(elapsed, 2)
        claims = await self.items(client, "/apis/resource.k8s.io/v1/resourceclaims")
        rss = self.rss()
        row.update({
            "cpu_ms_per_pod": cpu,
            "dralab_cpu_ms_per_pod": dralab_cpu(cpu),
            "simulated_cpu_ms_per_pod": round(sum(cpu.get(c, 0.0) for c in SIMULATED), 3),
            "rss_mib": rss,
            "dralab_rss_mib": round(sum(rss.get(c, 0.0) for c in DRALAB_COMPONENTS), 1),
            "dralab_kib_per_claim_above_rest": kib_per_claim(rss, self.idle_rss_mib, len(claims)),
            "claims": len(claims),
            "duplicate_claims": duplicate_claims(claims),
            # kube-controller-manager found a simulated node's Lease stale and marked it NotReady (tainted):
            # the node layer starved of CPU, not dralab; any here make the phase's rates suspect
            "nodes_not_ready_events": new_occurrences(not_ready0, not_ready1),
            "slices": len(await self.items(client, "/apis/resource.k8s.io/v1/resourceslices")),
            "api_requests_per_pod": requests_per_pod(req0, req1, created),
            # the components' own histograms per pod (ms, calls): the scheduler's attempts and extension
            # points, the webhook's admissions, the apiserver's writes; whose time a kind's pods cost
            "spent_per_pod": per_pod(spent0, spent1, created),
            # the apiserver's admission calls to the webhook that failed in transport (EOF, refused, its
            # timeout): each a create refused and resent (``retries``); None where its metrics were not read
            "webhook_call_failures": counted(spent0, spent1, WEBHOOK_CALL_FAILURES),
        })
        if row["webhook_call_failures"]:  # why, from the apiserver's log of the phase (its metric has no reason)
            row["webhook_call_errors"] = webhook_call_errors(log_since(apiserver_log, log0))
        row["driver_work_cpu_ms_per_pod"] = driver_work(row["spent_per_pod"])
        set_rest_figures(row, self.idle_ms_per_s)
        return row

    def leaks(self) -> dict[str, int]:
        """What is left once every pod is gone: claims, devices with capacity that no live pod's claim
        holds (the one accounting, :func:`dralab_kit.faults.audit.capacity_leaks`), claims still prepared."""
        from dralab_kit.faults.audit import capacity_leaks

        kube = self.handle.kube()
        try:
            claims, _ = kube.list_all("/apis/resource.k8s.io/v1/resourceclaims")
            pods, _ = kube.list_all("/api/v1/pods")
            slices, _ = kube.list_all("/apis/resource.k8s.io/v1/resourceslices")
        finally:
            kube.close()
        consumed = len(capacity_leaks(claims, pods, slices))
        return {"claims": len(claims), "capacity": consumed, "prepared": self.prepared()}

    def prepared(self) -> int:
        """Claims the nodes' kubelet stand-ins hold prepared (their checkpoints: a claim leaves one once its
        driver's Unprepare answered). Files on this machine: reading them asks nothing of the cluster."""
        count = 0
        for node in self.handle.nodes:
            try:
                doc = json.loads((self.handle.node_dir(node) / "kubelet-checkpoint.json").read_text())
            except (OSError, ValueError):
                continue
            count += len(doc.get("claims") or {})
        return count


async def _create_templates(runner: BurstRunner, ns: str, templates: list[dict[str, Any]]) -> None:
    """The baseline's ResourceClaimTemplates (one per pod size), made once before the clock."""
    base = f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaimtemplates"
    names = await runner._ok("GET", base)
    have = {(t.get("metadata") or {}).get("name") for t in names.get("items") or []}
    for template in {t["metadata"]["name"]: t for t in templates}.values():
        if template["metadata"]["name"] not in have:
            await runner._ok("POST", base, json=template)


def _pods(
    kind: str, ns: str, stem: str, n: int, size: dict[str, int]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    if kind == "dralab":
        return [hami_pod(f"{stem}-{i}", size["memory_mib"], size["cores"]) for i in range(n)], []
    made = [dra_pod(f"{stem}-{i}", ns, size["memory_mib"], size["cores"]) for i in range(n)]
    return [p for p, _ in made], [t for _, t in made]


async def _batch(runner: BurstRunner, ns: str, kind: str, stem: str, n: int, size: dict[str, int]) -> Burst:
    """Create ``n`` pods at once (the baseline's template first, before the clock) and time them to Running."""
    pods, templates = _pods(kind, ns, stem, n, size)
    if templates:
        await _create_templates(runner, ns, templates)
    return await runner.run(ns, pods, wait_running=True)


async def _delete_pods(runner: BurstRunner, ns: str, names: list[str]) -> None:
    """Delete pods; their claims go with them (dralab: the janitor; the baseline: the resourceclaim controller)."""
    sem = asyncio.Semaphore(64)

    async def one(name: str) -> None:
        async with sem:
            await runner._ok("DELETE", f"/api/v1/namespaces/{ns}/pods/{name}", params={"gracePeriodSeconds": "0"})

    await asyncio.gather(*(one(n) for n in names))


async def _churn(runner: BurstRunner, ns: str, kind: str, live: list[str], n: int) -> Burst:
    """Replace ``n`` pods at :data:`CHURN_PODS_PER_S`: before each create, the oldest pod still there
    (``live`` first, then this churn's own) is deleted, releasing its claim."""
    pods, templates = _pods(kind, ns, "c", n, FILL_POD)
    if templates:
        await _create_templates(runner, ns, templates)
    victims = [*live, *(p["metadata"]["name"] for p in pods)]  # the i-th create's victim: victims[i]

    async def release(i: int) -> None:
        await _delete_pods(runner, ns, [victims[i]])

    return await runner.run(ns, pods, wait_running=True, pace_s=1.0 / CHURN_PODS_PER_S, before=release)


async def fill_and_churn(fleet: Fleet, client: Any, kind: str, quick: bool, phases: dict[str, dict[str, Any]],
                         fill_phase: str = "fill", then_churn: bool = True) -> None:
    """Fill (8 pods per node), then churn on top of it (where ``then_churn``), then clear; each phase's row
    goes to ``phases`` (the fill's under ``fill_phase``) as soon as it is measured (a later step may fail)."""
    runner = Runner(client, timeout=fleet.timeout, retry_refusals=True, stall_s=STALL_S)
    ns = await runner.namespace(f"fleet-{kind}")
    n = fleet.nodes * FILL_PER_NODE
    fill = await fleet.measured(client, n, _batch(runner, ns, kind, "f", n, FILL_POD))
    console.print(f"[{fleet.nodes} nodes] {fill_phase} {kind}: {_line(fill)}", markup=False, highlight=False)
    phases[fill_phase][kind] = fill
    if then_churn:
        replaced = churn_pods(quick)
        churn = await fleet.measured(client, replaced,
                                     _churn(runner, ns, kind, [f"f-{i}" for i in range(n)], replaced))
        console.print(f"[{fleet.nodes} nodes] churn {kind}: {_line(churn)}", markup=False, highlight=False)
        phases["churn"][kind] = churn
    fill["clear_s"] = await _timed_clear(runner, ns, fleet.timeout)


async def burst(fleet: Fleet, client: Any, kind: str, quick: bool, phase: str = "burst") -> dict[str, Any]:
    """One kind's burst on the emptied fleet (``phase``: the burst or its run again), then its namespace cleared."""
    runner = Runner(client, timeout=fleet.timeout, retry_refusals=True, stall_s=STALL_S)
    ns = await runner.namespace(f"{phase.replace('_', '-')}-{kind}")
    n = burst_size(fleet.nodes, quick=quick)
    row = await fleet.measured(client, n, _batch(runner, ns, kind, "b", n, BURST_POD))
    console.print(f"[{fleet.nodes} nodes] {phase} {kind}: {_line(row)}", markup=False, highlight=False)
    row["clear_s"] = await _timed_clear(runner, ns, fleet.timeout)
    return row


async def _timed_clear(runner: BurstRunner, ns: str, timeout: float) -> float:
    """Clear a phase's namespace (pods, then their claims, then the namespace); the seconds it took."""
    started = time.monotonic()
    await runner.clear(ns, kube_wait=timeout)
    return round(time.monotonic() - started, 2)


def _line(row: dict[str, Any]) -> str:
    return (f"{row['pods']} pods {row['pods_per_s']} bound/s running p50 {row['running_p50_s']}s "
            f"p99 {row['running_p99_s']}s dralab {row['dralab_cpu_ms_per_pod']} ms/pod "
            f"failures {row['failures']} {row['first_error'][:120]}")


async def run_size(handle: Any, nodes: int, quick: bool, timeout: float, row: dict[str, Any]) -> None:
    """Every phase of one size into ``row``, the kinds taking turns (:data:`ORDER`): fill and churn dralab
    first, the fill again baseline first (:data:`FILL_AGAIN`), the burst baseline first and the burst again
    dralab first (:data:`BURST_AGAIN`). ``row`` is filled as phases end
    and ``row["step"]`` names the one running, so the caller keeps what was measured when a phase fails or
    the run is interrupted. The fleet's rest is read before the phases and again after the leak check;
    the lower reading per component is what "above rest" takes out."""
    fleet = Fleet(handle, nodes, timeout)
    phases: dict[str, dict[str, Any]] = {p: {} for p in ORDER}
    row.update(nodes=nodes, devices_per_node=DEVICES_PER_NODE, phases=phases, step="at rest")
    async with async_client(handle) as client:
        idle = await fleet.at_rest()
        row.update(idle_cpu_ms_per_s=idle, idle_window_s=IDLE_WINDOW_S, idle_rss_mib=fleet.idle_rss_mib,
                   pids=dict(fleet.meter.pids))
        console.print(f"[{nodes} nodes] at rest: {idle} ms/s", markup=False, highlight=False)
        try:
            for kind in ORDER["fill"]:
                row["step"] = f"fill and churn, {kind}"
                await fill_and_churn(fleet, client, kind, quick, phases)
            for kind in ORDER[FILL_AGAIN]:
                row["step"] = f"fill again, {kind}"
                await fill_and_churn(fleet, client, kind, quick, phases, fill_phase=FILL_AGAIN, then_churn=False)
            for phase in ("burst", BURST_AGAIN):
                for kind in ORDER[phase]:
                    row["step"] = f"{phase.replace('_', ' ')}, {kind}"
                    phases[phase][kind] = await burst(fleet, client, kind, quick, phase)
        except Exception as exc:  # what was measured before the failure is kept, and the failure named
            row["failed"] = f"{row.pop('step')}: {type(exc).__name__}: {str(exc)[:300]}"
            return  # no leak figure: the cluster was left mid-phase
        row["step"] = "leak check"
        _wait_released(fleet, timeout)
        row["leaks"] = fleet.leaks()
        row["step"] = "at rest, after"
        before = dict(fleet.idle_ms_per_s)
        row["idle_after_cpu_ms_per_s"] = await fleet.at_rest()
        row["idle_after_rss_mib"] = fleet.idle_rss_mib
        subtract_rest(phases, rest_floor(before, row["idle_after_cpu_ms_per_s"]))
    del row["step"]


def _wait_released(fleet: Fleet, timeout: float) -> None:
    """The janitor releases dralab's last claims after their pods are gone: leaks are what stays after that."""
    import contextlib

    from dralab.util import WaitTimeout, wait_for

    with contextlib.suppress(WaitTimeout):  # what is left is reported as leaks
        wait_for(lambda: not any(fleet.leaks().values()), timeout, "the fleet's claims to be released", interval=1.0)


def wait_fleet_slices(handle: Any, nodes: int, timeout: float) -> None:
    """Wait until every node's pool is published (pods cannot be scheduled before)."""
    from dralab.kube import KubeError
    from dralab.util import wait_for

    kube = handle.kube()

    def published() -> bool:
        try:
            items = kube.list("/apis/resource.k8s.io/v1/resourceslices").get("items") or []
        except KubeError as exc:  # a loaded apiserver may cut a large list short: ask again
            if exc.status and exc.status < 500:
                raise
            return False
        return len({(s.get("spec") or {}).get("pool", {}).get("name") for s in items}) >= nodes

    try:
        wait_for(published, timeout, f"ResourceSlices of {nodes} nodes", interval=1.0)
    finally:
        kube.close()


def dralab_config(lifecycle: str, folder: Path) -> str | None:
    """The dralab config file a fleet runs with: none (the defaults) for the claim lifecycle, else one
    that sets ``webhook.lifecycle``."""
    if lifecycle == "claim":
        return None
    path = folder / "dralab-config.yaml"
    path.write_text(f"webhook:\n  lifecycle: {lifecycle}\n")
    return str(path)


SizeRun = Callable[[Any, int, bool, float, dict[str, Any]], Coroutine[Any, Any, None]]


def measure_size(nodes: int, quick: bool, keep: bool, timeout: float, lifecycle: str = "claim",
                 run: SizeRun | None = None, kubernetes: str = KUBERNETES_VERSION) -> dict[str, Any]:
    """Bring a throw-away fleet of ``nodes`` up on ``kubernetes`` (timed: the cold start), run the phases
    (``run``, by default :func:`run_size`; :mod:`dralab_kit.bench.quiet` gives its own), take it down."""
    import shutil
    import tempfile

    from dralab_kit.cluster.api import down, ensure_cluster
    from dralab_kit.cluster.fleet import driver_reconcile_seconds
    from dralab_kit.cluster.layout import Layout

    name = f"fleet{nodes}-{os.getpid() % 100000}"
    started = time.monotonic()
    failed = True
    folder = Path(tempfile.mkdtemp(prefix=f"dralab-{name}-"))  # the config outlives every restart of the size
    try:
        config = dralab_config(lifecycle, folder)
        handle = ensure_cluster(name, devices=f"fleet:{nodes}x{DEVICES_PER_NODE}", config=config,
                                kubernetes=kubernetes)
        for note in handle.state.get("notes") or []:
            console.print(f"[{nodes} nodes] {note}", markup=False, highlight=False)
        wait_fleet_slices(handle, nodes, timeout)
        up_s = round(time.monotonic() - started, 1)
        console.print(f"[{nodes} nodes] fleet up in {up_s}s", markup=False, highlight=False)
        row: dict[str, Any] = {}
        try:
            asyncio.run((run or run_size)(handle, nodes, quick, timeout, row))
        except KeyboardInterrupt:  # Ctrl-C: the phases measured so far are kept, and the command stops
            row.update(nodes=nodes, failed=f"{row.pop('step', 'bring-up')}: interrupted", interrupted=True)
        row.update(kubernetes=kubernetes, webhook_lifecycle=lifecycle,
                   driver_reconcile_s=driver_reconcile_seconds(nodes), up_s=up_s,
                   duration_s=round(time.monotonic() - started, 1))
        failed = "failed" in row
        if failed:
            console.print(f"[{nodes} nodes] stopped in {row['failed']}; the phases before it are kept",
                          markup=False, highlight=False)
        return row
    finally:
        if not keep:
            down(name, keep_logs=failed)  # a failed size keeps its components' logs to be read
            if failed:
                console.print(f"[{nodes} nodes] failed: the logs stay in {Layout.of(name).root}", markup=False)
            shutil.rmtree(folder, ignore_errors=True)


def plot(result: dict[str, Any], path: Path) -> None:
    """Pods/s (dralab and baseline per phase) and dralab's CPU per pod against nodes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = result.get("sizes") or []
    xs = [s["nodes"] for s in sizes]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for phase, color in zip(PHASES, ("tab:blue", "tab:orange", "tab:green"), strict=True):
        for kind, style in (("dralab", "-o"), ("baseline", "--s")):
            ys = [phase_row(s, phase, kind).get("pods_per_s", math.nan) for s in sizes]
            ax1.plot(xs, ys, style, color=color, label=f"{phase}, {kind}")
        ax2.plot(xs, [phase_row(s, phase, "dralab").get("dralab_cpu_ms_per_pod", math.nan) for s in sizes], "-o",
                 color=color, label=f"{phase}: webhook + driver")
        ax2.plot(xs, [(phase_row(s, phase, "dralab").get("cpu_ms_per_pod") or {}).get("webhook", math.nan)
                      for s in sizes], ":^",
                 color=color, label=f"{phase}: webhook alone")
    ax1.set_ylabel("pods bound per second")
    ax2.set_ylabel("dralab CPU ms per pod (webhook, janitor, driver)")
    for ax in (ax1, ax2):
        ax.set_xlabel("KWOK nodes (8 GPUs each)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
        ax.set_ylim(bottom=0)
    fig.suptitle(f"Fleet scale: dralab against DRA without dralab ({os.cpu_count()} CPUs)")
    fig.tight_layout()
    save_figure(fig, path)



@click.command()
@click.option("--out", default=DEFAULT_OUT, show_default=True, help="folder for fleet.json and fleet.png")
@click.option("--quick", is_flag=True, help=f"{SIZES_QUICK} nodes only, fewer churn rounds")
@click.option("--sizes", default=None, metavar="N,N,...", help=f"node counts (default {SIZES_FULL})")
@click.option("--keep", is_flag=True, help="leave each size's cluster running (for debugging)")
@click.option("--timeout", type=float, default=900.0, show_default=True, help="seconds a batch may take")
@click.option("--lifecycle", type=click.Choice(LIFECYCLES), default="claim", show_default=True,
              help="the webhook's webhook.lifecycle for the dralab kind: claim (claims made in admission) or "
                   "template (kube-controller-manager makes them, as for the baseline)")
@click.option("--add", is_flag=True,
              help="keep the sizes already in OUT/fleet.json that this run does not measure (each row says when "
                   "and on which commit it was measured); to redo one size without the others")
@kubernetes_option
def fleet(out: str, quick: bool, sizes: str | None, keep: bool, timeout: float, lifecycle: str, add: bool,
          kubernetes: str) -> None:
    """Fill, churn and burst on simulated fleets of KWOK nodes; dralab against DRA without dralab.

    Each size is a throw-away cluster (`dralab cluster up --fleet NODESx8`), never `dralab`.

    \b
    Example:
      dralab bench fleet --quick --out /tmp/results
      dralab bench fleet --sizes 50,200 --lifecycle template
      dralab bench fleet --sizes 500 --add --out bench/results
      dralab bench fleet --sizes 50 --lifecycle template --kubernetes v1.37.2 --out /tmp/k137
    """
    from dralab.vcore import ensure_built
    from dralab_kit.cluster import build

    build.require_binaries(kubernetes)
    # The nodes' drivers refuse every Prepare without vcore's library (fail closed): build it now (make
    # is quick when it is up to date) rather than find pods that never run after a size's bring-up.
    ensure_built()
    chosen = parse_sizes(sizes, "node counts") if sizes else (SIZES_QUICK if quick else SIZES_FULL)
    started = time.monotonic()
    kept = kept_sizes(_load(Path(out) / "fleet.json", "; run without --add to measure every size anew"),
                      chosen, quick, lifecycle, kubernetes) if add else []
    rows: list[dict[str, Any]] = []
    for nodes in chosen:
        row = measure_size(nodes, quick, keep, timeout, lifecycle, kubernetes=kubernetes)
        run = context(quick)  # one git lookup per size, not one per field
        row["measured"] = {k: run[k] for k in ("date", "commit", "dirty")}
        rows.append(row)
        # each size as soon as it is measured: a later one may fail
        path = _write(out, quick, sorted([*kept, *rows], key=lambda r: int(r["nodes"])), started)
        if row.get("interrupted"):
            break  # Ctrl-C stops the run after writing what the size measured
    try:
        plot(_load(path), Path(out) / "fleet.png")
    except ImportError:
        console.print("matplotlib not installed: no plot", markup=False)
    v = _load(path)["verdict"]
    click.echo(f"dralab ÷ baseline pods/s at {v.get('largest_nodes')} nodes {v.get('ratio_by_phase')}; "
               f"CPU per pod growth {v.get('cpu_growth')}; no leaks: {v.get('no_leaks')} -> {path}")


def _load(path: Path, hint: str = "") -> dict[str, Any]:
    """``fleet.json`` as a dict; ``hint`` says how to go on when it cannot be read."""
    from dralab.errors import UserError

    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read {path}: {exc}{hint}") from exc


def kept_sizes(previous: dict[str, Any], chosen: tuple[int, ...], quick: bool,
               lifecycle: str = "claim", kubernetes: str = KUBERNETES_VERSION) -> list[dict[str, Any]]:
    """The size rows of an earlier ``fleet.json`` that ``--add`` keeps: those not measured again, each stamped
    with the run it came from. A quick file and a full run never mix, nor two webhook lifecycles, nor two
    Kubernetes versions (their controllers differ: kube-controller-manager's second claim, README "Scale")."""
    from dralab.errors import UserError

    if bool(previous.get("quick")) != quick:
        raise UserError(f"--add: the existing fleet.json is a {'quick' if previous.get('quick') else 'full'} run "
                        f"and this one is {'quick' if quick else 'full'}; use the same --quick setting or drop --add")
    ctx = previous.get("context") or {}
    kept = []
    for row in previous.get("sizes") or []:
        if int(row["nodes"]) in chosen:
            continue
        if row.get("webhook_lifecycle", "claim") != lifecycle:  # rows from before the option ran the claim one
            raise UserError(f"--add: the existing fleet.json's {row['nodes']}-node size ran with webhook.lifecycle "
                            f"{row.get('webhook_lifecycle', 'claim')} and this run uses {lifecycle}; give "
                            f"--lifecycle {row.get('webhook_lifecycle', 'claim')}, or measure every size again "
                            "without --add")
        ran = row.get("kubernetes", FIRST_KUBERNETES)
        if ran != kubernetes:
            raise UserError(f"--add: the existing fleet.json's {row['nodes']}-node size ran on Kubernetes {ran} and "
                            f"this run uses {kubernetes}; give --kubernetes {ran}, or measure every size again "
                            "without --add")
        kept.append({**row, "measured": row.get("measured") or {
            "date": previous.get("measured_at"), "commit": ctx.get("commit"), "dirty": ctx.get("dirty")}})
    return kept


def _write(out: str, quick: bool, rows: list[dict[str, Any]], started: float) -> Path:
    result = {
        "quick": quick,
        "devices_per_node": DEVICES_PER_NODE,
        "pods": {"fill_per_node": FILL_PER_NODE, "fill_pod": FILL_POD, "burst_pod": BURST_POD,
                 "burst_max": BURST_PODS_QUICK if quick else BURST_PODS,
                 "churn_pods_per_s": CHURN_PODS_PER_S, "churn_s": CHURN_S_QUICK if quick else CHURN_S},
        "dralab_components": list(DRALAB_COMPONENTS),
        "simulated_components": list(SIMULATED),
        "sizes": rows,
        "verdict": verdict(rows),
        "duration_s": round(time.monotonic() - started, 1),
    }
    return write_result(out, "fleet", result)
