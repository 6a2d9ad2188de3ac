"""The runner's view of a cluster: get/list/apply/delete by :class:`~harness.resources.Ref`.

Labs name objects by (apiVersion, kind, name, namespace), not by URL, so the runner needs one
translation on top of :mod:`dralab.kube`: discovery turns a kind into its REST path (CRDs
included), and ``apply`` behaves like ``kubectl apply`` (create, else server-side apply). The
transport, credentials (token rotation included) and the one error type, :class:`KubeError`,
are dralab.kube's. Unit tests use :class:`harness.testing.FakeCluster` with the same protocol.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from dralab.errors import UserError
from dralab.kube import Discovery, Kube, KubeError
from harness.resources import CLUSTER_SCOPED, Ref

FIELD_MANAGER = "dralab-lab"


class ClusterClient(Protocol):
    """What the runner asks of a cluster; refusals raise :class:`dralab.kube.KubeError`."""

    def get(self, ref: Ref) -> dict[str, Any] | None: ...

    def list(self, ref: Ref) -> list[dict[str, Any]]: ...

    def apply(self, obj: Mapping[str, Any]) -> dict[str, Any]: ...

    def delete(self, ref: Ref, grace_period_seconds: int | None = None) -> bool: ...

    def namespaced(self, api_version: str, kind: str) -> bool: ...


class KubeCluster:
    """:class:`ClusterClient` over a :class:`dralab.kube.Kube` and its :class:`dralab.kube.Discovery`."""

    def __init__(self, kube: Kube, kubeconfig: Path | None = None) -> None:
        self.kube = kube
        self.discovery = Discovery(kube)
        self.kubeconfig = kubeconfig

    @classmethod
    def from_kubeconfig(cls, kubeconfig: str | Path, context: str | None = None, timeout: float = 30.0) -> KubeCluster:
        """A client for ``context`` of ``kubeconfig`` (UserError naming the file when it is missing or bad)."""
        path = Path(kubeconfig).expanduser()
        return cls(Kube.from_kubeconfig(path, context=context, timeout=timeout, user_agent="dralab-lab"), path)

    @property
    def server(self) -> str:
        return self.kube.host

    def close(self) -> None:
        self.kube.close()

    def namespaced(self, api_version: str, kind: str) -> bool:
        """Whether ``kind`` lives in a namespace; a kind discovery cannot find is guessed by name."""
        try:
            return self.discovery.resource(api_version, kind)[1]
        except KubeError:
            return kind not in CLUSTER_SCOPED

    def _path(
        self, api_version: str, kind: str, namespace: str | None, name: str | None = None, *, listing: bool = False
    ) -> str:
        """The REST path; only a list may leave a namespaced kind's namespace out (all namespaces)."""
        if not namespace and not listing and self.discovery.resource(api_version, kind)[1]:
            raise UserError(f"{kind} {name or ''} is namespaced: give a namespace")
        return self.discovery.path(api_version, kind, namespace, name)

    def get(self, ref: Ref) -> dict[str, Any] | None:
        """The object, or None when it does not exist."""
        return self.kube.get(self._path(ref.api_version, ref.kind, ref.namespace, ref.name), missing_ok=True)

    def list(self, ref: Ref) -> list[dict[str, Any]]:
        """Matching objects (of every namespace when ``ref`` has none), each with its apiVersion and kind."""
        answer = self.kube.list(
            self._path(ref.api_version, ref.kind, ref.namespace, listing=True),
            label_selector=ref.label_selector,
            field_selector=ref.field_selector,
        )
        items = answer.get("items") or []
        for item in items:  # list items carry no apiVersion/kind
            item.setdefault("apiVersion", ref.api_version)
            item.setdefault("kind", ref.kind)
        return items

    def apply(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Create the object, or server-side apply it when it exists (like ``kubectl apply``)."""
        meta = obj.get("metadata") or {}
        api_version, kind, name = str(obj["apiVersion"]), str(obj["kind"]), meta.get("name")
        namespace = meta.get("namespace")
        collection = self._path(api_version, kind, namespace)
        if name is None:  # generateName: always a new object
            return self.kube.create(collection, dict(obj)) or {}
        path = self._path(api_version, kind, namespace, name)
        if self.kube.get(path, missing_ok=True) is None:
            return self.kube.create(collection, dict(obj)) or {}
        return self.kube.apply(path, dict(obj), manager=FIELD_MANAGER, force=True)

    def delete(self, ref: Ref, grace_period_seconds: int | None = None) -> bool:
        """Delete in the background; False when the object was not there."""
        path = self._path(ref.api_version, ref.kind, ref.namespace, ref.name)
        return self.kube.delete(path, grace_period_seconds=grace_period_seconds, missing_ok=True)
