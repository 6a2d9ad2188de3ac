"""The asyncio client: same credentials, same errors, as the synchronous one."""

from __future__ import annotations

import json

import anyio
import pytest

from dralab.kube import AsyncKube, KubeError, load_kubeconfig


def test_async_calls_share_the_loader_and_the_error(apiserver) -> None:
    conflict = {"kind": "Status", "reason": "AlreadyExists", "message": "exists", "code": 409}
    apiserver.script.on("POST", "/api/v1/namespaces/ns/pods", (201, {"metadata": {"name": "p"}}), (409, conflict))
    apiserver.script.on("GET", "/api/v1/namespaces/ns/pods/p", (404, {"reason": "NotFound", "message": "gone"}))
    apiserver.script.on("DELETE", "/api/v1/namespaces/ns/pods/p", (200, {}))

    async def go() -> None:
        kube = AsyncKube(load_kubeconfig(apiserver.kubeconfig))
        try:
            made = await kube.create("/api/v1/namespaces/ns/pods", {"metadata": {"name": "p"}}, dry_run=True)
            assert made["metadata"]["name"] == "p"
            assert await kube.create("/api/v1/namespaces/ns/pods", {}, exist_ok=True) is None
            assert await kube.get("/api/v1/namespaces/ns/pods/p", missing_ok=True) is None
            with pytest.raises(KubeError) as err:
                await kube.get("/api/v1/namespaces/ns/pods/p")
            assert (err.value.status, err.value.reason, err.value.message) == (404, "NotFound", "gone")
            assert await kube.delete("/api/v1/namespaces/ns/pods/p", uid="u") is True
        finally:
            await kube.close()

    anyio.run(go)
    post = apiserver.script.requests("POST")[0]
    assert post.client_cn == "dralab-admin" and post.query == {"dryRun": "All"}
    assert json.loads(apiserver.script.requests("DELETE")[0].body)["preconditions"] == {"uid": "u"}


def test_async_client_loads_a_kubeconfig_path_lazily(apiserver) -> None:
    apiserver.script.on("GET", "/version", (200, {"gitVersion": "v1"}))

    async def go() -> dict:
        kube = AsyncKube(apiserver.kubeconfig)
        try:
            return await kube.get("/version")
        finally:
            await kube.close()

    assert anyio.run(go) == {"gitVersion": "v1"}
