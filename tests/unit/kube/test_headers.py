"""Extra request headers (``Kube(headers=...)``): how a test acts as another identity (impersonation)."""

from __future__ import annotations

from dralab.kube import Kube, load_config

NS = {"kind": "Namespace", "metadata": {"name": "default"}}
AS = {"Impersonate-User": "system:serviceaccount:ns:webhook"}


def test_extra_headers_go_with_every_call_and_with_clones(apiserver) -> None:
    apiserver.script.on("GET", "/api/v1/namespaces/default", (200, NS))
    apiserver.script.on("DELETE", "/api/v1/namespaces/default", (200, NS))
    with Kube(load_config(apiserver.kubeconfig), headers=AS) as kube:
        kube.get("/api/v1/namespaces/default")
        kube.delete("/api/v1/namespaces/default")
        with kube.clone() as other:
            other.get("/api/v1/namespaces/default")
    with Kube(load_config(apiserver.kubeconfig)) as plain:
        plain.get("/api/v1/namespaces/default")
    seen = apiserver.script.requests()
    assert [s.headers.get("Impersonate-User") for s in seen] == [AS["Impersonate-User"]] * 3 + [None]
    assert all(s.headers["Accept"] == "application/json" for s in seen)  # the client's own headers still win
