"""One TLS setup for a local cluster's admin identity: the product's client and the benchmarks' httpx one.

Both take it from ``ClusterHandle.admin_config`` (the cluster's PKI files through the product's loader);
against the scripted mutual-TLS apiserver each must verify the server with the cluster's CA and present
the admin client certificate.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from urllib.parse import urlsplit

from dralab_kit.bench.concurrency import async_client
from dralab_kit.cluster.api import ClusterHandle
from dralab_kit.cluster.layout import Layout


def _handle(tmp_path: Path, url: str) -> ClusterHandle:
    """A handle whose layout is the fixture's directory (its PKI is ``tmp_path/pki``) and whose apiserver is it."""
    return ClusterHandle("t", Layout("t", tmp_path), state={"ports": {"apiserver": urlsplit(url).port}})


def test_the_admin_config_is_the_clusters_pki_for_its_apiserver(tmp_path: Path, apiserver) -> None:
    config = _handle(tmp_path, apiserver.url).admin_config()
    assert config.host == apiserver.url
    assert config.configuration.ssl_ca_cert == str(tmp_path / "pki" / "ca.crt")
    assert config.configuration.cert_file == str(tmp_path / "pki" / "admin.crt")


def test_the_product_client_and_the_bench_client_present_the_admin_certificate(tmp_path: Path, apiserver) -> None:
    apiserver.script.on("GET", "/version", (200, {"gitVersion": "v1.35.0"}))
    handle = _handle(tmp_path, apiserver.url)
    with handle.kube() as kube:
        assert kube.get("/version") == {"gitVersion": "v1.35.0"}

    async def bench_get() -> int:
        async with async_client(handle) as client:
            return (await client.get("/version")).status_code

    assert asyncio.run(bench_get()) == 200
    assert [s.client_cn for s in apiserver.script.requests("GET")] == ["dralab-admin", "dralab-admin"]
