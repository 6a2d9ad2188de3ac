"""``dralab bench taints``: from a device turning unhealthy to the next pod allocated another device.

On a throw-away cluster of a Kubernetes version with device taints on (default v1.37.2, where
DRADeviceTaints is GA), one KWOK node with two fake L4s. Each repeat: one pod is scheduled with no
fault (the baseline: create to allocated, and which device a healthy node hands out first); then the
fault hook (:func:`dralab_kit.cluster.api.device_health`) marks that device unhealthy, and from that
instant a probe pod that fits either device is created every ``--interval`` seconds until one is
allocated the other device. Timed from the fault: the taint seen in the ResourceSlice, and the
first probe allocated elsewhere; counted: probes still allocated the sick device after the fault.
Then the device recovers (timed until its taint is gone) and the namespace is cleared.

The first repeat is the cold one (the first fault after the cluster came up) and is reported
apart; p50 and max are over the rest. The driver reads device health every ``--health-seconds``
(5 s by default), so most of the time is that polling period: the figures say what a user waits
with the shipped default.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import click

from dralab_kit.bench import DEFAULT_OUT
from dralab_kit.bench.common import percentile, write_result

NODE = "taint-node"
DEVICES = ("gpu-0", "gpu-1")
TAINT_KEY = "dralab.io/unhealthy"
KUBERNETES = "v1.37.2"  # DRADeviceTaints GA: the driver's default (auto) publishes taints
REPEATS_FULL = 6
REPEATS_QUICK = 2
INTERVAL_S = 0.5  # a probe pod every this long after the fault
POLL_S = 0.05  # how often the slices and claims are read while waiting (the figures' resolution)
LIMIT_S = 60.0


# ---------------------------------------------------------------- pure


def inventory_doc(node: str = NODE) -> dict[str, Any]:
    """One fake NVIDIA host with two L4s (dralab/model inventory format): a pod fits either."""
    return {"nodes": [{"name": node, "devices": [
        {"vendor": "nvidia", "name": name, "uuid": f"GPU-TAINT-{i:04d}", "productName": "NVIDIA L4", "model": "L4",
         "memory": "23034Mi", "cores": 100, "physicalID": i, "index": i}
        for i, name in enumerate(DEVICES)]}]}


def probe_pod(name: str) -> dict[str, Any]:
    """A sharing pod that fits either L4 (one type: the plain request of :func:`~dralab_kit.bench.prefer.typed_pod`)."""
    from dralab_kit.bench.prefer import typed_pod

    return typed_pod(name, ("l4",), memory_mib=512, cores=2)


def tainted(slices: list[dict[str, Any]], device: str) -> bool:
    """Whether ``device`` is published with the unhealthy taint in any of ``slices``."""
    for item in slices:
        for dev in (item.get("spec") or {}).get("devices") or []:
            if dev.get("name") == device and any(t.get("key") == TAINT_KEY for t in dev.get("taints") or []):
                return True
    return False


def allocated(claims: list[dict[str, Any]]) -> dict[str, str]:
    """Pod name -> the device its claim was allocated (claims the webhook made carry their pod's name)."""
    from dralab.model.convert import ANN_POD_NAME

    out = {}
    for claim in claims:
        pod = ((claim.get("metadata") or {}).get("annotations") or {}).get(ANN_POD_NAME)
        results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
        if pod and results:
            out[pod] = results[0].get("device", "")
    return out


def stats(values: Sequence[float | None]) -> dict[str, Any]:
    """p50 and max (nearest rank) of the values present, and how many there were."""
    got = [v for v in values if v is not None]
    if not got:
        return {"p50": None, "max": None, "n": 0}
    return {"p50": round(percentile(got, 50), 3), "max": round(max(got), 3), "n": len(got)}


def summarize(repeats: list[dict[str, Any]]) -> dict[str, Any]:
    """The cold (first) repeat apart; p50 and max of each time over the warm ones (and over all)."""
    keys = ("fault_to_taint_s", "fault_to_avoided_s", "recovery_to_untainted_s", "baseline_allocated_s")
    warm = repeats[1:]
    out: dict[str, Any] = {"cold": {k: repeats[0].get(k) for k in keys} if repeats else {}}
    out["warm"] = {k: stats([r.get(k) for r in warm]) for k in keys}
    out["all"] = {k: stats([r.get(k) for r in repeats]) for k in keys}
    out["sick_allocations_after_fault"] = sum(r.get("sick_after_fault", 0) for r in repeats)
    out["sick_allocations_after_taint"] = sum(r.get("sick_after_taint", 0) for r in repeats)
    out["avoided"] = sum(1 for r in repeats if r.get("fault_to_avoided_s") is not None)
    out["repeats"] = len(repeats)
    return out


# ---------------------------------------------------------------- one repeat


class Probe:
    """Creates probe pods in one namespace and reads what the cluster made of them."""

    def __init__(self, api: Any, namespace: str) -> None:
        self.api = api
        self.ns = namespace
        self.created: dict[str, float] = {}  # pod -> monotonic time its create was issued
        self.seen: dict[str, tuple[float, str]] = {}  # pod -> (first seen allocated, device)

    def create(self) -> str:
        from dralab.kube.paths import pods_path

        name = f"probe-{len(self.created)}-{uuid.uuid4().hex[:4]}"
        self.created[name] = time.monotonic()
        self.api.create(pods_path(self.ns), probe_pod(name))
        return name

    def poll(self) -> None:
        """Note each probe pod the first time its claim is seen allocated (when, and to which device)."""
        from dralab.kube.paths import claims_path

        now = time.monotonic()
        for pod, device in allocated(self.api.list(claims_path(self.ns)).get("items") or []).items():
            self.seen.setdefault(pod, (now, device))

    def landed(self, name: str) -> bool:
        """A :func:`_wait` condition: poll, then whether probe ``name`` is allocated."""
        self.poll()
        return name in self.seen


def _slices(api: Any) -> list[dict[str, Any]]:
    from dralab.kube.paths import SLICES_PATH

    return api.list(SLICES_PATH, field_selector=f"spec.nodeName={NODE}").get("items") or []


def _wait(what: str, condition: Callable[[], object], limit: float = LIMIT_S) -> float:
    """Seconds until ``condition()`` holds, polled every :data:`POLL_S`."""
    from dralab.util import wait_for

    t0 = time.monotonic()
    wait_for(condition, limit, what, interval=POLL_S, max_interval=POLL_S)
    return time.monotonic() - t0


def one_repeat(handle: Any, api: Any, interval: float) -> dict[str, Any]:
    """Baseline pod, fault, probes until one lands elsewhere, recovery, clean-up (see the module doc)."""
    from dralab.kube.paths import claims_path, namespace_path, pods_path
    from dralab_kit.cluster.api import device_health

    ns = f"taints-{uuid.uuid4().hex[:6]}"
    api.create(namespace_path(), {"metadata": {"name": ns}})
    probe = Probe(api, ns)
    row: dict[str, Any] = {"namespace": ns}
    try:
        first = probe.create()
        row["baseline_allocated_s"] = round(_wait("the baseline pod's allocation", lambda: probe.landed(first)), 3)
        sick = probe.seen[first][1]  # the device a healthy node hands out first: the one made sick
        row["sick_device"] = sick
        fault = time.monotonic()
        device_health(handle.name, NODE, sick, healthy=False, reason="bench")
        taint_at: float | None = None
        avoided_at: float | None = None
        next_probe = fault
        while time.monotonic() - fault < LIMIT_S:
            now = time.monotonic()
            if now >= next_probe:
                probe.create()
                next_probe += interval
            if taint_at is None and tainted(_slices(api), sick):
                taint_at = time.monotonic()
            probe.poll()
            # avoided: a probe allocated another device once the taint is out (before, it may be chance)
            elsewhere = [t for p, (t, dev) in probe.seen.items()
                         if dev != sick and probe.created[p] >= fault and taint_at is not None and t >= taint_at]
            if elsewhere:
                avoided_at = min(elsewhere)
                break
            time.sleep(POLL_S)  # the polling period (the figures' resolution), not a synchronization
        after = {p: s for p, s in probe.seen.items() if probe.created[p] >= fault}
        row.update({
            "fault_to_taint_s": round(taint_at - fault, 3) if taint_at is not None else None,
            "fault_to_avoided_s": round(avoided_at - fault, 3) if avoided_at is not None else None,
            "probes": len(after),
            "sick_after_fault": sum(1 for _, dev in after.values() if dev == sick),
            "sick_after_taint": sum(1 for p, (_, dev) in after.items()
                                    if dev == sick and taint_at is not None and probe.created[p] >= taint_at),
        })
        device_health(handle.name, NODE, sick, healthy=True)
        cleared = _wait("the taint to be cleared", lambda: not tainted(_slices(api), sick))
        row["recovery_to_untainted_s"] = round(cleared, 3)
    finally:
        device_health(handle.name, NODE, DEVICES[0], healthy=True)
        device_health(handle.name, NODE, DEVICES[1], healthy=True)
        api.delete(pods_path(ns), propagation=None, params={"gracePeriodSeconds": "0"})
        _wait("the probe pods' claims to be gone", lambda: not api.list(claims_path(ns)).get("items"), 120)
        api.delete(namespace_path(ns), missing_ok=True)
    return row


def _say(i: int, row: dict[str, Any]) -> None:
    click.echo(f"repeat {i}{' (cold)' if i == 0 else ''}: baseline {row.get('baseline_allocated_s')}s, "
               f"fault->taint {row.get('fault_to_taint_s')}s, fault->avoided {row.get('fault_to_avoided_s')}s, "
               f"probes {row.get('probes')} ({row.get('sick_after_fault')} on {row.get('sick_device')}), "
               f"recovery {row.get('recovery_to_untainted_s')}s", err=True)


@click.command()
@click.option("--out", default=DEFAULT_OUT, show_default=True, help="folder for taints.json")
@click.option("--quick", is_flag=True, help=f"{REPEATS_QUICK} repeats (the cold one and one more)")
@click.option("--repeats", type=click.IntRange(min=2), default=None,
              help=f"faults in a row, the first cold (default {REPEATS_FULL}, quick {REPEATS_QUICK})")
@click.option("--interval", type=click.FloatRange(min=0.05), default=INTERVAL_S, show_default=True,
              help="seconds between probe pods after the fault")
@click.option("--kubernetes", default=KUBERNETES, show_default=True,
              help="control-plane version; needs device taints on (1.36 and later)")
@click.option("--keep", is_flag=True, help="leave the benchmark's cluster running (for debugging)")
def taints(out: str, quick: bool, repeats: int | None, interval: float, kubernetes: str, keep: bool) -> None:
    """Time from a device marked unhealthy to its taint, and to the next pod allocated another device.

    Runs on a throw-away cluster of its own (one KWOK node with two fake L4s), never on `dralab`.

    \b
    Example:
      dralab bench taints --quick --out /tmp/results
    """
    from dralab.driver.health import AUTO, taints_decision
    from dralab.driver.runner import RunOptions
    from dralab.versions import check_supported
    from dralab_kit.bench.concurrency import own_cluster
    from dralab_kit.cluster import build

    version = check_supported(kubernetes)
    decision = taints_decision(os.environ.get("DRALAB_DEVICE_TAINTS", AUTO), version)
    if not decision.enabled:  # the driver would never publish a taint: nothing to time
        raise click.BadParameter(f"{decision.why}. Use --kubernetes {KUBERNETES}, or on 1.35 set "
                                 "DRALAB_FEATURE_GATES=DRADeviceTaints=true and DRALAB_DEVICE_TAINTS=on",
                                 param_hint="--kubernetes")
    build.require_binaries(version)
    count = repeats or (REPEATS_QUICK if quick else REPEATS_FULL)
    started = time.monotonic()
    load_before = [round(x, 2) for x in os.getloadavg()]
    rows: list[dict[str, Any]] = []
    with own_cluster("taints", keep=keep, inventory=inventory_doc(), kubernetes=version) as handle, \
            handle.kube() as api:
        for i in range(count):
            rows.append(one_repeat(handle, api, interval))
            _say(i, rows[-1])
    summary = summarize(rows)
    result = {
        "kubernetes": version, "quick": quick, "interval_s": interval, "poll_s": POLL_S,
        "driver_health_seconds": RunOptions.health_seconds,
        "repeats": rows, "summary": summary,
        "baseline": {"what": "one pod on the healthy node, create to allocated, before each fault (the scheduling "
                             "share of fault_to_avoided)", **summary["warm"]["baseline_allocated_s"]},
        "load_average": {"before": load_before, "after": [round(x, 2) for x in os.getloadavg()]},
        "duration_s": round(time.monotonic() - started, 1),
    }
    path = write_result(out, "taints", result)
    warm = summary["warm"]
    click.echo(f"cold: {summary['cold']}; warm p50/max: taint {warm['fault_to_taint_s']}, avoided "
               f"{warm['fault_to_avoided_s']}; {summary['sick_allocations_after_fault']} probes on the sick device "
               f"after the fault -> {path}")
