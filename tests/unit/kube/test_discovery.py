"""Kind to REST path, asked of the apiserver once per group version."""

from __future__ import annotations

import pytest

from dralab.kube import Discovery, Kube, KubeError

CORE = {"resources": [{"name": "pods", "kind": "Pod", "namespaced": True},
                      {"name": "pods/status", "kind": "Pod", "namespaced": True},
                      {"name": "nodes", "kind": "Node", "namespaced": False}]}


def test_paths_from_discovery_cached_per_group_version(apiserver) -> None:
    apiserver.script.on("GET", "/api/v1", (200, CORE))
    with Kube.from_kubeconfig(apiserver.kubeconfig) as kube:
        found = Discovery(kube)
        assert found.path("v1", "Pod", "ns", "p") == "/api/v1/namespaces/ns/pods/p"
        assert found.path("v1", "Pod") == "/api/v1/pods"
        assert found.path("v1", "Node", name="n1") == "/api/v1/nodes/n1"
        with pytest.raises(ValueError, match="namespaced"):
            found.path("v1", "Pod", name="p")
        with pytest.raises(KubeError, match="serves no kind Widget in v1"):
            found.resource("v1", "Widget")
        with pytest.raises(KubeError, match=r"does not serve example.com/v1 \(is the API group enabled"):
            found.resource("example.com/v1", "Thing")
    assert [s.path for s in apiserver.script.requests("GET")] == ["/api/v1", "/api/v1", "/apis/example.com/v1"]
