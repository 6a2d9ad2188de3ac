"""Talking to a cluster: the small client protocol the runner needs, and its HTTP implementation.

The runner only needs get/list/apply/delete on unstructured objects, so the client is a thin
REST layer (httpx) with kind-to-resource discovery; the kubeconfig is read with the
``kubernetes`` package so every credential kind it supports works. Unit tests use the
in-memory :class:`harness.testing.FakeCluster` with the same protocol.
"""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from dralab.errors import UserError
from harness.resources import CLUSTER_SCOPED, Ref

FIELD_MANAGER = "dralab-lab"


class ClusterError(Exception):
    """The API server refused a request; ``status`` is the HTTP status, ``message`` its reason."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message


class ClusterClient(Protocol):
    """What the runner asks of a cluster."""

    def get(self, ref: Ref) -> dict[str, Any] | None: ...

    def list(self, ref: Ref) -> list[dict[str, Any]]: ...

    def apply(self, obj: Mapping[str, Any]) -> dict[str, Any]: ...

    def delete(self, ref: Ref, grace_period_seconds: int | None = None) -> bool: ...

    def namespaced(self, api_version: str, kind: str) -> bool: ...


def _ssl_context(cfg: Any) -> ssl.SSLContext | bool:
    if not cfg.verify_ssl:
        return False
    ctx = ssl.create_default_context(cafile=cfg.ssl_ca_cert) if cfg.ssl_ca_cert else ssl.create_default_context()
    if cfg.cert_file and cfg.key_file:
        ctx.load_cert_chain(cfg.cert_file, cfg.key_file)
    return ctx


class KubeClient:
    """REST client for one cluster, built from a kubeconfig file."""

    def __init__(self, kubeconfig: str | Path, context: str | None = None, timeout: float = 30.0) -> None:
        import httpx
        from kubernetes import config as kconfig
        from kubernetes.client import Configuration

        path = Path(kubeconfig).expanduser()
        if not path.is_file():
            raise UserError(f"kubeconfig {path} not found: pass --kubeconfig FILE or bring the cluster up first")
        cfg = Configuration()
        try:
            kconfig.load_kube_config(config_file=str(path), context=context, client_configuration=cfg)
        except Exception as exc:  # the kubernetes package raises several unrelated types here
            raise UserError(f"kubeconfig {path} could not be loaded ({exc})") from None
        headers = {"Accept": "application/json"}
        auth = None
        if cfg.api_key or cfg.refresh_api_key_hook:
            from dralab.driver.kube import BearerAuth

            # Looked up per request, never copied once: exec plugins and OIDC refresh through the
            # loader's hook, so a rotated or expired token is replaced before the next call.
            def token() -> str | None:
                return cfg.get_api_key_with_prefix("authorization", alias="BearerToken")

            auth = BearerAuth(token)
        self.server = cfg.host
        self.kubeconfig = path
        self._http = httpx.Client(
            base_url=cfg.host, verify=_ssl_context(cfg), headers=headers, timeout=timeout, auth=auth
        )
        self._resources: dict[tuple[str, str], tuple[str, bool]] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        self._http.close()

    # discovery -----------------------------------------------------------------------------
    def _resource(self, api_version: str, kind: str) -> tuple[str, bool]:
        key = (api_version, kind)
        with self._lock:
            if key in self._resources:
                return self._resources[key]
        base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        resp = self._http.get(base)
        if resp.status_code == 404:
            raise ClusterError(404, f"the cluster does not serve {api_version} (is the API group enabled?)")
        self._raise(resp)
        found = None
        with self._lock:
            for res in resp.json().get("resources", []):
                if "/" in res["name"]:
                    continue
                self._resources[(api_version, res["kind"])] = (res["name"], bool(res["namespaced"]))
                if res["kind"] == kind:
                    found = (res["name"], bool(res["namespaced"]))
        if found is None:
            raise ClusterError(404, f"the cluster serves no kind {kind} in {api_version}")
        return found

    def namespaced(self, api_version: str, kind: str) -> bool:
        try:
            return self._resource(api_version, kind)[1]
        except ClusterError:
            return kind not in CLUSTER_SCOPED

    def _path(self, api_version: str, kind: str, namespace: str | None, name: str | None = None) -> str:
        plural, namespaced = self._resource(api_version, kind)
        base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        if namespaced:
            if not namespace:
                raise UserError(f"{kind} {name or ''} is namespaced: give a namespace")
            base += f"/namespaces/{namespace}"
        base += f"/{plural}"
        return f"{base}/{name}" if name else base

    @staticmethod
    def _raise(resp: Any) -> None:
        if resp.status_code < 400:
            return
        try:
            message = resp.json().get("message") or resp.text
        except ValueError:
            message = resp.text
        raise ClusterError(resp.status_code, str(message).strip())

    # operations ----------------------------------------------------------------------------
    def get(self, ref: Ref) -> dict[str, Any] | None:
        resp = self._http.get(self._path(ref.api_version, ref.kind, ref.namespace, ref.name))
        if resp.status_code == 404:
            return None
        self._raise(resp)
        return resp.json()

    def list(self, ref: Ref) -> list[dict[str, Any]]:
        params = {}
        if ref.label_selector:
            params["labelSelector"] = ref.label_selector
        if ref.field_selector:
            params["fieldSelector"] = ref.field_selector
        plural, namespaced = self._resource(ref.api_version, ref.kind)
        base = "/api/v1" if ref.api_version == "v1" else f"/apis/{ref.api_version}"
        path = f"{base}/namespaces/{ref.namespace}/{plural}" if namespaced and ref.namespace else f"{base}/{plural}"
        resp = self._http.get(path, params=params)
        self._raise(resp)
        body = resp.json()
        items = body.get("items") or []
        for item in items:  # list items carry no apiVersion/kind
            item.setdefault("apiVersion", ref.api_version)
            item.setdefault("kind", ref.kind)
        return items

    def apply(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Create the object, or server-side apply it when it exists (like ``kubectl apply``)."""
        meta = obj.get("metadata") or {}
        api_version, kind, name = str(obj["apiVersion"]), str(obj["kind"]), meta.get("name")
        namespace = meta.get("namespace")
        if name is None:
            resp = self._http.post(self._path(api_version, kind, namespace), json=dict(obj))
            self._raise(resp)
            return resp.json()
        path = self._path(api_version, kind, namespace, name)
        existing = self._http.get(path)
        if existing.status_code == 404:
            resp = self._http.post(self._path(api_version, kind, namespace), json=dict(obj))
        else:
            self._raise(existing)
            resp = self._http.patch(
                path,
                params={"fieldManager": FIELD_MANAGER, "force": "true"},
                content=json.dumps(obj),
                headers={"Content-Type": "application/apply-patch+yaml"},
            )
        self._raise(resp)
        return resp.json()

    def delete(self, ref: Ref, grace_period_seconds: int | None = None) -> bool:
        body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
        if grace_period_seconds is not None:
            body["gracePeriodSeconds"] = grace_period_seconds
        resp = self._http.request("DELETE", self._path(ref.api_version, ref.kind, ref.namespace, ref.name), json=body)
        if resp.status_code == 404:
            return False
        self._raise(resp)
        return True
