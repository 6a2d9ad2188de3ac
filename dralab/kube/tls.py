"""TLS session resumption for the synchronous client's shared context.

The apiserver closes a connection idle for 90 s, so a client that calls it less often than that (a
node's driver, whose calls come with its own node's pods) opens a new TLS connection on nearly every
call (README "Scale", item 23). A full handshake makes the client verify the server's chain and sign
with its key, and the server sign and verify the client's chain; a resumed one (TLS 1.3: a ticket from
the earlier connection, with a fresh key exchange) skips those certificates and signatures on both
sides. Python's ``ssl`` resumes only when it is handed the session to offer, and urllib3 never hands
one: :class:`ResumingContext` offers each new connection the session of the last connection of its
own that closed, which for such a client is the one the apiserver just dropped.

Why this is safe: a session is offered only by the context it came from, and that context is one
apiserver's CA and one client identity (:meth:`dralab.kube.config.KubeConfig.ssl_context` builds a new
one when a file of those changes, so a rotated certificate never resumes the old identity). A server
that cannot use the ticket (another server, new ticket keys after a restart, an expired ticket) answers
with a full handshake. A resumed connection carries the peer certificate the first handshake verified,
and urllib3 still matches it against the host name.
"""

from __future__ import annotations

import socket
import ssl


class SessionKeepingSocket(ssl.SSLSocket):
    """An ``SSLSocket`` that hands its session to its :class:`ResumingContext` as it closes."""

    def close(self) -> None:
        ctx = self.context
        if isinstance(ctx, ResumingContext):
            ctx.keep(self)
        super().close()


class ResumingContext(ssl.SSLContext):
    """A client context whose new connections offer the session of the last of its connections that closed."""

    sslsocket_class = SessionKeepingSocket
    last_session: ssl.SSLSession | None = None  # set by a closing connection; one attribute write, no lock

    def wrap_socket(
        self,
        sock: socket.socket,
        server_side: bool = False,
        do_handshake_on_connect: bool = True,
        suppress_ragged_eofs: bool = True,
        server_hostname: str | bytes | None = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLSocket:
        if session is None and not server_side:
            session = self.last_session
        return super().wrap_socket(sock, server_side, do_handshake_on_connect, suppress_ragged_eofs,
                                   server_hostname, session)

    def keep(self, conn: ssl.SSLSocket) -> None:
        """Remember ``conn``'s session if a server could resume it (TLS 1.3 tickets arrive after the
        handshake, so a connection that never read an answer may have none)."""
        try:
            session = conn.session
        except (ValueError, OSError):  # never connected, or the TLS object is gone
            return
        if session is not None and session.has_ticket:
            self.last_session = session

