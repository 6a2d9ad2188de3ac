"""The webhook's limits against hostile callers: transport bounds, admissions in flight, claim creation rate.

Anyone who can reach the webhook's port can send it requests (SECURITY.md), so none of these trust the
caller: bodies are bounded before they are read, connections must deliver a request within a deadline,
admissions in flight are capped, and each namespace may have only so many claims created per second.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from dralab.model.denials import Denied

# RFC 1123: a namespace is a DNS label; a pod name (or generateName prefix) a DNS subdomain. Matched whole
# (fullmatch): with match, "$" also matches before a final newline, so "kube-system\n" would pass.
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


@dataclass(frozen=True)
class ServerLimits:
    """Transport limits of one server process (the chart's memory limit assumes these defaults).

    ``max_inflight_bytes`` bounds the memory request bodies can take: each admission in flight holds its
    declared length (or ``max_body_bytes`` when it declares none) against it.
    """

    max_body_bytes: int = 4 * 1024 * 1024  # an AdmissionReview of the largest pod etcd stores (1.5 MiB), twice
    read_timeout_seconds: float = 10.0  # from a request's first byte to the complete request
    # A connection from its handshake or an answer to the next request's first byte: longer than the apiserver
    # keeps idle connections to webhooks (90 s), so it closes them first (dralab.webhook.transport)
    idle_timeout_seconds: float = 120.0
    handshake_timeout_seconds: float = 5.0  # TCP connect to finished TLS handshake
    max_inflight: int = 256  # admissions being read or answered at once; more get 503
    max_inflight_bytes: int = 96 * 1024 * 1024  # their bodies together (the chart's limit is 256 Mi)
    max_connections: int = 512  # open connections; more get 503 from uvicorn
    # After SIGTERM: keep serving this long, not ready and closing each connection after its answer, so the
    # Service drops this endpoint (and the apiserver its pooled connections) before the listener closes;
    # 0 stops at once (host processes). A second signal ends the drain early.
    shutdown_delay_seconds: float = 0.0


class Inflight:
    """Admissions in flight and the body bytes they may hold; a request over either cap is refused at once,
    never queued (a queue would only move the wait past the apiserver's timeout)."""

    def __init__(self, cap: int, byte_cap: int | None = None, on_change: Callable[[int], None] | None = None) -> None:
        self.cap = cap
        self.byte_cap = byte_cap
        self.count = 0
        self.bytes = 0
        self._on_change = on_change

    def try_enter(self, nbytes: int = 0) -> bool:
        if self.count >= self.cap or (self.byte_cap is not None and self.bytes + nbytes > self.byte_cap):
            return False
        self.count += 1
        self.bytes += nbytes
        if self._on_change:
            self._on_change(self.count)
        return True

    def leave(self, nbytes: int = 0) -> None:
        self.count -= 1
        self.bytes -= nbytes
        if self._on_change:
            self._on_change(self.count)


class NamespaceRate:
    """A token bucket per namespace for claim creation: ``burst`` at once, ``rate`` per second after.

    Bounds what forged CREATE reviews can make in a namespace; buckets that are full again are dropped,
    so a caller cycling through namespace names cannot grow memory without bound.
    """

    MAX_BUCKETS = 10_000

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = float(rate)
        self.burst = float(burst)
        self.clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # namespace -> (tokens, at)
        self._lock = threading.Lock()

    def take(self, namespace: str, n: int) -> bool:
        """Take ``n`` tokens for ``namespace``; False (and nothing taken) when there are not enough."""
        now = self.clock()
        with self._lock:
            tokens, at = self._buckets.get(namespace, (self.burst, now))
            tokens = min(self.burst, tokens + (now - at) * self.rate)
            if tokens < n:
                self._buckets[namespace] = (tokens, now)
                return False
            self._buckets[namespace] = (tokens - n, now)
            if len(self._buckets) > self.MAX_BUCKETS:
                self._forget_full(now)
            return True

    def _forget_full(self, now: float) -> None:
        for ns, (tokens, at) in list(self._buckets.items()):
            if tokens + (now - at) * self.rate >= self.burst:
                del self._buckets[ns]


def check_namespace(namespace: object) -> str:
    """The request's namespace, if it is a DNS label; :class:`Denied` naming ``request.namespace`` otherwise."""
    if not isinstance(namespace, str) or not _DNS_LABEL.fullmatch(namespace):
        shown = repr(namespace[:70]) if isinstance(namespace, str) else type(namespace).__name__
        raise Denied("request.namespace", f"{shown} is not a namespace name (a DNS label: a-z, 0-9, '-', 63 at most)")
    return namespace


def check_pod_names(name: object, generate_name: object) -> None:
    """The pod's name and generateName prefix are DNS subdomains (253 characters at most)."""
    for field, value, prefix in (("metadata.name", name, False), ("metadata.generateName", generate_name, True)):
        if value in (None, ""):
            continue
        text = value.rstrip("-.") if prefix and isinstance(value, str) else value
        if not isinstance(text, str) or len(value) > 253 or not _DNS_SUBDOMAIN.fullmatch(text):  # type: ignore[arg-type]
            shown = repr(value[:70]) if isinstance(value, str) else type(value).__name__
            raise Denied(field, f"{shown} is not a valid pod name (a DNS subdomain: a-z, 0-9, '-', '.', 253 at most)")
