"""``dralab monitor`` and ``dralab top`` on the local cluster: gauges equal the claims the scheduler allocated."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from dralab.kube import Kube
from dralab.kube.paths import claims_path, pods_path
from dralab.model.quantity import to_int
from dralab.util import free_port, wait_for

pytestmark = pytest.mark.integration
MIB = 2**20


@pytest.fixture(scope="module")
def api(cluster) -> Any:
    kube = Kube.from_kubeconfig(cluster.kubeconfig)
    yield kube
    kube.close()


@pytest.fixture
def monitor(cluster):
    port = free_port()
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}
    proc = subprocess.Popen([sys.executable, "-m", "dralab.cli", "monitor", "--port", str(port),
                             "--no-metrics-authorization"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        try:
            return urllib.request.urlopen(f"{base}/readyz", timeout=2).status == 200
        except OSError:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else "monitor exited"
            return False

    wait_for(ready, 60, "the monitor's caches")
    yield base
    proc.terminate()
    proc.wait(timeout=10)


def _samples(base: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = urllib.request.urlopen(f"{base}/metrics", timeout=5).read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def hami_pod(name: str, memory: int, cores: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"terminationGracePeriodSeconds": 0, "runtimeClassName": "ascend", "containers": [{
            "name": "app", "image": "busybox",
            "resources": {"limits": {"huawei.com/Ascend310P": 1, "huawei.com/Ascend310P-memory": str(memory),
                                     "huawei.com/Ascend310P-core": str(cores)}}}]},
    }


def _claim_of(api: Kube, namespace: str, pod: str) -> dict[str, Any] | None:
    claim = api.get(claims_path(namespace, f"{namespace}-{pod}-app-ascend310p"), missing_ok=True)
    return claim if claim and (claim.get("status") or {}).get("reservedFor") else None


def test_gauges_follow_the_claims(api: Kube, namespace: str, monitor: str, cluster) -> None:
    api.create(pods_path(namespace), hami_pod("m1", 1024, 20))
    api.create(pods_path(namespace), hami_pod("m2", 512, 10))
    claims = [wait_for(lambda p=p: _claim_of(api, namespace, p), 60, f"claim of {p}") for p in ("m1", "m2")]
    consumed = [c["status"]["allocation"]["devices"]["results"][0]["consumedCapacity"] for c in claims]
    mem = [to_int(c["memory"]) for c in consumed]
    cores = [to_int(c["cores"]) for c in consumed]
    assert mem == [1024 * MIB, 512 * MIB] and cores == [20, 10]

    ns_key = (("namespace", namespace),)

    def gauges_match() -> bool:
        got = _samples(monitor)
        return (got.get(("dralab_namespace_memory_allocated_bytes", ns_key)) == sum(mem)
                and got.get(("dralab_namespace_cores_allocated", ns_key)) == sum(cores)
                and got.get(("dralab_pod_memory_allocated_bytes", (("namespace", namespace), ("pod", "m1")))) == mem[0]
                and got.get(("dralab_pod_cores_allocated", (("namespace", namespace), ("pod", "m2")))) == cores[1])

    wait_for(gauges_match, 30, "the gauges to show both claims")
    # the device gauges count these shares among whatever else the shared cluster runs
    result = claims[0]["status"]["allocation"]["devices"]["results"][0]
    want = {"device": result["device"], "driver": result["driver"], "pool": result["pool"]}
    got = _samples(monitor)
    (dev,) = [labels for name, labels in got if name == "dralab_device_shares"
              and all(dict(labels).get(k) == v for k, v in want.items())]
    assert got[("dralab_device_shares", dev)] >= 1
    assert got[("dralab_device_memory_allocated_bytes", dev)] + got[("dralab_device_memory_free_bytes", dev)] == (
        got[("dralab_device_memory_total_bytes", dev)]
    )

    out = subprocess.run([sys.executable, "-m", "dralab.cli", "top", "-n", namespace, "--once", "-o", "json"],
                         env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}, capture_output=True, text=True,
                         check=True)
    view = json.loads(out.stdout)
    assert view["namespaces"] == [{"namespace": namespace, "memory": sum(mem), "cores": sum(cores)}]
    assert sorted(s for d in view["devices"] for s in d["sharers"]) == [f"{namespace}/m1", f"{namespace}/m2"]

    for pod in ("m1", "m2"):
        api.delete(pods_path(namespace, pod))
    wait_for(lambda: ("dralab_namespace_memory_allocated_bytes", ns_key) not in _samples(monitor), 90,
             "the namespace's series gone once its claims are freed")
