"""A validating admission webhook served by the fault suite that says no (scenario ``rejected_by_later_webhook``).

Validating webhooks run after every mutating one, so each pod it refuses was already mutated by
dralab, its claims created, when it is refused: what the janitor must clean up. It serves TLS on
loopback with the cluster's own webhook certificate and registers itself for labelled pods only.
"""

from __future__ import annotations

import http.server
import json
import ssl
import threading
from typing import Any

DENY_LABEL = "bench.dralab.io/deny"
DENIER_NAME = "bench-denier"


class Denier:
    """A validating webhook served here that refuses pods labelled ``DENY_LABEL=true``.

    Validating webhooks run after every mutating one, so each refused pod was already mutated by
    dralab (and its claims created) when it is refused.
    """

    def __init__(self, handle: Any) -> None:
        from dralab.util import free_port
        from dralab_kit.cluster.pki import Pki

        self.handle = handle
        self.pki = Pki(handle.layout.pki_dir)
        self.port = free_port()
        self.calls = 0
        denier = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                review = json.loads(body)
                denier.calls += 1
                answer = {
                    "apiVersion": "admission.k8s.io/v1",
                    "kind": "AdmissionReview",
                    "response": {
                        "uid": review["request"]["uid"],
                        "allowed": False,
                        "status": {"code": 403, "message": "refused by a later admission webhook (bench)"},
                    },
                }
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                return

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(self.pki.cert("webhook")), str(self.pki.key("webhook")))
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, name="denier", daemon=True)

    def registration(self) -> dict[str, Any]:
        import base64

        return {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": DENIER_NAME},
            "webhooks": [{
                "name": "deny.bench.dralab.io",
                "clientConfig": {
                    "url": f"https://127.0.0.1:{self.port}/deny",
                    "caBundle": base64.b64encode(self.pki.ca_cert.read_bytes()).decode(),
                },
                "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                           "resources": ["pods"], "scope": "Namespaced"}],
                "objectSelector": {"matchLabels": {DENY_LABEL: "true"}},
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 10,
            }],
        }

    def __enter__(self) -> Denier:
        self.thread.start()
        path = f"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{DENIER_NAME}"
        kube = self.handle.kube()
        try:
            kube.apply(path, self.registration())
        finally:
            kube.close()
        return self

    def __exit__(self, *exc: object) -> None:
        kube = self.handle.kube()
        try:
            kube.delete(
                f"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{DENIER_NAME}", missing_ok=True
            )
        finally:
            kube.close()
        self.server.shutdown()
        self.server.server_close()
