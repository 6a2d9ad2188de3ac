"""The webhook's Prometheus metrics, on a registry of its own (several servers can share a process)."""

from __future__ import annotations

import os

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class Metrics:
    """Latency, conversions, denials, errors, claim lifecycle and TLS reloads."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.latency = Histogram(
            "dralab_webhook_request_duration_seconds", "Admission request latency", ["endpoint"], registry=r,
            buckets=_BUCKETS,
        )
        self.requests = Counter("dralab_webhook_requests_total", "Admission requests", ["endpoint"], registry=r)
        self.conversions = Counter(
            "dralab_webhook_conversions_total", "Claims planned by conversion, per vendor", ["vendor"], registry=r
        )
        self.denials = Counter("dralab_webhook_denials_total", "Denied admission requests", ["endpoint"], registry=r)
        self.errors = Counter(
            "dralab_webhook_errors_total", "Requests that failed inside the webhook", ["endpoint"], registry=r
        )
        self.claims_created = Counter(
            "dralab_webhook_claims_created_total", "ResourceClaims created at admission", registry=r
        )
        self.templates_created = Counter(
            "dralab_webhook_templates_created_total", "ResourceClaimTemplates created at admission", registry=r
        )
        self.claims_rolled_back = Counter(
            "dralab_webhook_claims_rolled_back_total", "Claims deleted after a partial failure", registry=r
        )
        self.collisions = Counter(
            "dralab_webhook_name_collisions_total", "Claim names held by another pod's claim", registry=r
        )
        self.janitor_adopted = Counter(
            "dralab_janitor_claims_adopted_total", "Claims given their pod as owner", registry=r
        )
        self.janitor_reaped = Counter(
            "dralab_janitor_claims_reaped_total", "Orphaned claims deleted by the janitor", registry=r
        )
        self.janitor_pending = Gauge(
            "dralab_janitor_unowned_claims", "Managed claims without an owner pod yet", registry=r,
            multiprocess_mode="livemax",  # only the leader sets it
        )
        self.leader = Gauge(
            "dralab_webhook_leader", "1 while this process holds the Lease and runs the janitor", registry=r,
            multiprocess_mode="livesum",  # summed over a replica's workers: 0 or 1
        )
        self.tls_reloads = Counter("dralab_webhook_tls_reloads_total", "Certificate reloads", registry=r)
        # More connections than admissions means clients that do not keep them: each new one is a TLS handshake
        # on both ends (the apiserver keeps 25 idle connections per webhook; a burst opens more, then drops them)
        self.connections = Counter("dralab_webhook_connections_total",
                                   "Connections accepted (with TLS: handshakes completed)", registry=r)
        self.inflight = Gauge("dralab_webhook_inflight_requests", "Admission requests being read or answered",
                              registry=r, multiprocess_mode="livesum")
        self.refused = Counter(
            "dralab_webhook_refused_total",
            "Requests refused by a limit (body_too_large, too_many_inflight, rate_limited, deadline)",
            ["reason"], registry=r,
        )

    def render(self) -> bytes:
        """This process's metrics, or with several workers (``PROMETHEUS_MULTIPROC_DIR``) all workers' summed."""
        folder = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
        if not folder:
            return generate_latest(self.registry)
        from prometheus_client import multiprocess

        merged = CollectorRegistry()
        multiprocess.MultiProcessCollector(merged, path=folder)
        return generate_latest(merged)
