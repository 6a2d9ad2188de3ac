"""The server's TLS context, reloaded in place when the certificate files change.

cert-manager renews serving certificates by rewriting the mounted files. A new pair is loaded into a
fresh ``SSLContext`` and swapped in only when it loads, so a half-written pair (new certificate, old
key) is never served; it is retried on the next check while the old pair keeps serving. The server
listens with :attr:`ReloadingTLS.listener`, the first context, whose server-name callback runs early in
every handshake (with or without SNI) and moves the handshake onto the current ``context``.

With ``client_ca`` the server also requires a client certificate signed by that CA: the apiserver
presents one when its admission configuration names a kubeconfig with a client certificate for the
webhook (SECURITY.md, "Authenticating the apiserver").
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

    def __init__(
        self, cert: str | Path, key: str | Path, metrics: Metrics | None = None, client_ca: str | Path | None = None
    ) -> None:
        self.cert = Path(cert)
        self.key = Path(key)
        self.client_ca = Path(client_ca) if client_ca else None
        self.metrics = metrics
        self._fingerprint = ""
        try:
            self.context = self._load()
        except (OSError, ssl.SSLError) as exc:
            raise UserError(f"cannot load TLS certificate {self.cert} / key {self.key}: {exc}") from None
        self.listener = self.context
        self.listener.sni_callback = self._select

    def _select(self, connection: ssl.SSLObject, server_name: str | None, listener: ssl.SSLContext) -> None:
        """Serve this handshake from the current context (certificate, key and client CA as last loaded)."""
        current = self.context
        if current is not listener:
            connection.context = current

    def _digest(self) -> str:
        parts = [self.cert.read_bytes(), self.key.read_bytes()]
        if self.client_ca is not None:
            parts.append(self.client_ca.read_bytes())
        return hashlib.sha256(b"\0".join(parts)).hexdigest()

    def _load(self) -> ssl.SSLContext:
        """A new context with the current files (raises when they do not form a pair)."""
        fingerprint = self._digest()
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(str(self.cert), str(self.key))
        if self.client_ca is not None:
            context.load_verify_locations(cafile=str(self.client_ca))
            context.verify_mode = ssl.CERT_REQUIRED
        self._fingerprint = fingerprint
        return context

    def check(self) -> bool:
        """Reload when the files changed; True when a new pair was loaded."""
        try:
            if self._digest() == self._fingerprint:
                return False
            self.context = self._load()  # one assignment: handshakes see the old or the new pair, whole
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
