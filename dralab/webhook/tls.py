"""The server's TLS context, reloaded in place when the certificate files change.

cert-manager renews serving certificates by rewriting the mounted files; loading the new chain
into the same ``SSLContext`` makes every later handshake use it without a restart or dropped
connections. A half-written pair fails to load and is retried on the next check.
"""

from __future__ import annotations

import hashlib
import ssl
from pathlib import Path

import anyio

from dralab.errors import UserError
from dralab.util import get_logger
from dralab.webhook.metrics import Metrics

log = get_logger("dralab.webhook.tls")


class ReloadingTLS:
    """A server ``SSLContext`` (TLS 1.2 or newer) bound to a certificate and key file."""

    def __init__(self, cert: str | Path, key: str | Path, metrics: Metrics | None = None) -> None:
        self.cert = Path(cert)
        self.key = Path(key)
        self.metrics = metrics
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        self._fingerprint = ""
        try:
            self._load()
        except (OSError, ssl.SSLError) as exc:
            raise UserError(f"cannot load TLS certificate {self.cert} / key {self.key}: {exc}") from None

    def _digest(self) -> str:
        return hashlib.sha256(self.cert.read_bytes() + b"\0" + self.key.read_bytes()).hexdigest()

    def _load(self) -> None:
        fingerprint = self._digest()
        self.context.load_cert_chain(str(self.cert), str(self.key))
        self._fingerprint = fingerprint

    def check(self) -> bool:
        """Reload when the files changed; True when a new pair was loaded."""
        try:
            if self._digest() == self._fingerprint:
                return False
            self._load()
        except (OSError, ssl.SSLError) as exc:
            log.warning("certificate reload failed; keeping the current one", extra={"fields": {"error": str(exc)}})
            return False
        if self.metrics is not None:
            self.metrics.tls_reloads.inc()
        log.info("serving certificate reloaded", extra={"fields": {"cert": str(self.cert)}})
        return True

    async def watch(self, interval: float = 1.0) -> None:
        """Check the files every ``interval`` seconds, forever (run it as a task)."""
        while True:
            await anyio.sleep(interval)
            await anyio.to_thread.run_sync(self.check)
