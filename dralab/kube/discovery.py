"""Kind-to-resource discovery: the REST path of any (apiVersion, kind), asked of the apiserver once."""

from __future__ import annotations

import threading

from dralab.kube.client import Kube
from dralab.kube.errors import KubeError
from dralab.kube.kinds import group_path
from dralab.kube.paths import segment


class Discovery:
    """(plural, namespaced) of each kind, from the apiserver's resource lists; cached per group version."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self._lock = threading.Lock()
        self._known: dict[tuple[str, str], tuple[str, bool]] = {}
        self._listed: set[str] = set()

    def resource(self, api_version: str, kind: str) -> tuple[str, bool]:
        """The plural name and scope of ``kind``; :class:`KubeError` 404 when the cluster does not serve it."""
        key = (api_version, kind)
        with self._lock:
            if key in self._known:
                return self._known[key]
        try:
            answer = self.kube.get(group_path(api_version))
        except KubeError as exc:
            if exc.status == 404:
                raise KubeError(404, "NotFound", {"message": (
                    f"the cluster does not serve {api_version} (is the API group enabled?)")}) from None
            raise
        with self._lock:
            self._listed.add(api_version)
            for res in answer.get("resources") or []:
                if "/" not in res.get("name", "/"):  # subresources (pods/status) are not kinds
                    self._known[(api_version, res["kind"])] = (res["name"], bool(res.get("namespaced")))
            found = self._known.get(key)
        if found is None:
            raise KubeError(404, "NotFound", {"message": f"the cluster serves no kind {kind} in {api_version}"})
        return found

    def path(self, api_version: str, kind: str, namespace: str | None = None, name: str | None = None) -> str:
        """The collection path of ``kind`` (in ``namespace`` when namespaced), or one object's path.

        A namespaced kind without ``namespace`` gives the all-namespaces collection (not for ``name``).
        """
        plural, namespaced = self.resource(api_version, kind)
        base = group_path(api_version)
        if namespaced and namespace:
            base += f"/namespaces/{segment(namespace)}"
        elif namespaced and name:
            raise ValueError(f"{kind} {name} is namespaced: give a namespace")
        base += f"/{plural}"
        return f"{base}/{segment(name)}" if name else base
