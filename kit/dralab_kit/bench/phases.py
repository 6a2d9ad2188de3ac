"""Where a pod's time goes, from the components' own Prometheus metrics (the concurrency benchmark's breakdown).

The benchmark's timestamps say *when* a pod was admitted, bound and Running; the components' histograms
say *what* they spent on it: the webhook's admission, the apiserver's writes (pod create, claim create,
claim status, binding, pod status), the scheduler's attempt and its extension points (PreBind is where the
DRA plugin writes the claim's allocation). A snapshot before and after a burst, divided by the pods of the
burst, gives per-pod means that can be compared between DRA pods and plain pods of the same run.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

Key = tuple[str, ...]
Snapshot = dict[Key, tuple[float, float]]  # key -> (sum seconds, count)

# apiserver requests worth naming: (verb, resource, subresource)
API_CALLS = {
    ("POST", "pods", ""): "apiserver: create pod",
    ("POST", "resourceclaims", ""): "apiserver: create claim",
    ("PUT", "resourceclaims", "status"): "apiserver: claim status (allocation)",
    ("PATCH", "resourceclaims", "status"): "apiserver: claim status (allocation)",
    ("POST", "pods", "binding"): "apiserver: bind pod",
    ("PATCH", "pods", "status"): "apiserver: pod status (KWOK or stand-in, scheduler)",
    ("PUT", "pods", "status"): "apiserver: pod status (KWOK or stand-in, scheduler)",
    ("PATCH", "resourceclaims", ""): "apiserver: patch claim (janitor owner)",
    ("PUT", "resourceclaims", ""): "apiserver: update claim (scheduler's finalizer)",
    ("PATCH", "pods", ""): "apiserver: patch pod",
}
DRIVER_WORK = "driver CPU: "  # + prepare, status, reconcile...: dralab_driver_work_cpu_seconds by work
SCHEDULER = {
    "scheduler_scheduling_attempt_duration_seconds": "scheduler: scheduling attempt",
    "scheduler_pod_scheduling_sli_duration_seconds": "scheduler: queue to bound (SLI)",
}
# counters: only their count per pod (``calls_per_pod``) is kept
COUNTERS = {"dralab_webhook_connections": "webhook: connections accepted (TLS handshakes)",
            "dralab_driver_apiserver_handshakes": "driver: apiserver connections opened (TLS handshakes)",
            "dralab_driver_apiserver_resumed_handshakes": "driver: apiserver connections that resumed a TLS session"}
# The apiserver's admission calls to a webhook that failed in transport (an EOF, a refused connection, its
# timeout), each one a create refused (failurePolicy: Fail): apiserver_admission_webhook_rejection_count with
# error_type "calling_webhook_error". A webhook's own refusal (allowed: false) is "no_error" and not counted
# here. The apiserver makes the series at the first failure, so wherever its metrics were read the count is
# kept, at 0 until then.
WEBHOOK_CALL_FAILURES = "apiserver: webhook calls failed (EOF, refused, timed out)"
REJECTIONS = "apiserver_admission_webhook_rejection_count"
COUNTED = frozenset({*COUNTERS.values(), WEBHOOK_CALL_FAILURES})  # kept as calls per pod only, 0 included


def parse(text: str, wanted: set[str]) -> list[tuple[str, dict[str, str], float]]:
    """``(sample name, labels, value)`` of the ``_sum``/``_count`` samples of the histograms in ``wanted``
    and the ``_total`` of its counters."""
    out = []
    for family in text_string_to_metric_families(text):
        if family.name not in wanted:
            continue
        for sample in family.samples:
            if sample.name.endswith(("_sum", "_count", "_total")):
                out.append((sample.name, dict(sample.labels), float(sample.value)))
    return out


def fold(samples: list[tuple[str, dict[str, str], float]]) -> Snapshot:
    """Histogram samples -> phase name -> (sum, count), merging the label sets one phase covers."""
    snap: dict[Key, list[float]] = {}
    for name, labels, value in samples:
        base, _, part = name.rpartition("_")
        key: Key | None = None
        if base == REJECTIONS and part == "total":  # the parser names a counter's samples ``_total``
            key = (WEBHOOK_CALL_FAILURES,) if labels.get("error_type") == "calling_webhook_error" else None
        elif base == "apiserver_request_duration_seconds":
            snap.setdefault((WEBHOOK_CALL_FAILURES,), [0.0, 0.0])  # the apiserver's metrics were read
            phase = API_CALLS.get((labels.get("verb", ""), labels.get("resource", ""), labels.get("subresource", "")))
            key = (phase,) if phase else None
        elif base == "scheduler_framework_extension_point_duration_seconds":
            key = (f"scheduler: {labels.get('extension_point')}",)
        elif base in SCHEDULER:
            key = (SCHEDULER[base],)
        elif base == "dralab_webhook_request_duration_seconds" and labels.get("endpoint") == "mutate":
            key = ("webhook: mutate (incl. claim create)",)
        elif base == "dralab_webhook_request_duration_seconds" and labels.get("endpoint") == "validate":
            key = ("webhook: validate",)
        elif base == "dralab_driver_work_cpu_seconds":  # thread CPU, not wall time: what the driver computed
            key = (f"{DRIVER_WORK}{labels.get('work')}",)
        elif base in COUNTERS and part == "total":
            key = (COUNTERS[base],)
        if key is None:
            continue
        slot = snap.setdefault(key, [0.0, 0.0])
        slot[0 if part == "sum" else 1] += value
    return {k: (v[0], v[1]) for k, v in snap.items()}


def per_pod(before: Snapshot, after: Snapshot, pods: int) -> dict[str, dict[str, float]]:
    """Per phase: mean milliseconds spent per pod of the burst and calls per pod (deltas / ``pods``).

    A histogram no call reached is left out; a counter scraped at both ends is kept even at 0, so a
    phase with no new connection reads 0 and one whose process was not scraped reads as not counted."""
    out: dict[str, dict[str, float]] = {}
    if pods <= 0:
        return out
    for key, (total, count) in after.items():
        s0, c0 = before.get(key, (0.0, 0.0))
        calls = count - c0
        if key[0] in COUNTED:
            if calls >= 0:  # a counter read at both ends that did not move counted none: 0, not "not counted"
                out[key[0]] = {"calls_per_pod": round(calls / pods, 3)}
            continue
        if calls <= 0:
            continue
        out[key[0]] = {"ms_per_pod": round((total - s0) * 1000 / pods, 3), "calls_per_pod": round(calls / pods, 3),
                       "ms_per_call": round((total - s0) * 1000 / calls, 3)}
    return dict(sorted(out.items()))


def counted(before: Snapshot, after: Snapshot, counter: str) -> int | None:
    """How many times ``counter`` (a label of :data:`COUNTED`) went up between two snapshots: None where
    either did not read it, or where it fell (its process restarted: the difference means nothing)."""
    if (counter,) not in before or (counter,) not in after:
        return None
    moved = after[(counter,)][1] - before[(counter,)][1]
    return int(moved) if moved >= 0 else None


def difference(dra: dict[str, dict[str, float]], plain: dict[str, dict[str, float]]) -> dict[str, float]:
    """What a DRA pod spends beyond a plain pod, per phase (ms per pod; phases plain pods lack count whole)."""
    out = {}
    for phase in sorted(set(dra) | set(plain)):
        extra = dra.get(phase, {}).get("ms_per_pod", 0.0) - plain.get(phase, {}).get("ms_per_pod", 0.0)
        out[phase] = round(extra, 3)
    return out


@dataclass
class Scraper:
    """Reads the apiserver's, the scheduler's, the webhook's and the drivers' /metrics of one local cluster
    (a fleet's drivers: one endpoint per shard of nodes)."""

    urls: list[str]
    ctx: ssl.SSLContext

    @classmethod
    def for_cluster(cls, handle: Any) -> Scraper:
        from dralab_kit.cluster.pki import Pki

        pki = Pki(handle.layout.pki_dir)
        # Scraping only: the scheduler's serving certificate is self-signed in its cert dir.
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.load_cert_chain(str(pki.cert("admin")), str(pki.key("admin")))
        ports = handle.ports
        urls = [f"https://127.0.0.1:{ports['apiserver']}/metrics", f"https://127.0.0.1:{ports['scheduler']}/metrics"]
        if ports.get("webhook"):
            urls.append(f"https://127.0.0.1:{ports['webhook']}/metrics")
        urls += [f"http://127.0.0.1:{port}/metrics" for port in (ports.get("driver") or {}).values()]
        return cls(urls, ctx)

    async def snapshot(self, client: httpx.AsyncClient | None = None) -> Snapshot:
        wanted = {"apiserver_request_duration_seconds", "scheduler_framework_extension_point_duration_seconds",
                  *SCHEDULER, "dralab_webhook_request_duration_seconds", "dralab_driver_work_cpu_seconds", *COUNTERS,
                  REJECTIONS}
        samples = []
        async with httpx.AsyncClient(verify=self.ctx, timeout=30.0) as http:
            for url in self.urls:
                try:
                    resp = await http.get(url)
                except httpx.HTTPError:
                    continue  # a component that does not answer has no phases in this burst
                if resp.status_code == 200:
                    samples += parse(resp.text, wanted)
        return fold(samples)
