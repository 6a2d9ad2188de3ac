"""A node's driver reads a claim in Prepare and writes its device status a moment later: both on one
connection. The apiserver closes a connection idle for 90 s, and a node in a large fleet gets a pod less
often than that, so each connection a pod's calls share is a TLS handshake saved (README "Scale", item 23).

Against the scripted apiserver over real mutual TLS (``tests/unit/kube/conftest.py``); the driver runs its
real gRPC server, claim source, status writer and metrics.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from dralab.driver.proto import dra_v1_pb2, dra_v1_pb2_grpc
from dralab.driver.runner import DriverProcess, RunOptions
from dralab.kube.paths import claim_path
from dralab.util import wait_for
from dralab_kit.fixtures.driver_claims import CLAIM_A, CLAIM_A_UID, NAMESPACE, NODE, lab20_claim
from tests.unit.kube.conftest import FakeApiserver
from tests.unit.kube.conftest import apiserver as apiserver  # the scripted apiserver fixture, shared


@pytest.fixture
def driver(apiserver: FakeApiserver, short_tmp: Path, library: Path) -> Iterator[DriverProcess]:
    path = claim_path(NAMESPACE, CLAIM_A)
    apiserver.script.on("GET", path, (200, lab20_claim()))
    apiserver.script.on("PATCH", path + "/status", (200, lab20_claim()))
    opts = RunOptions(node=NODE, backend="fake", kubeconfig=str(apiserver.kubeconfig), plugin_dir=str(short_tmp / "p"),
                      registry_dir=str(short_tmp / "r"), cdi_dir=str(short_tmp / "cdi"),
                      state_dir=str(short_tmp / "s"), enforcement_library=str(library), publish=False,
                      claim_cache=False, device_taints="off", metrics_port=0, metrics_authorization=False)
    proc = DriverProcess(opts).start()
    yield proc
    proc.stop()


def _prepare(proc: DriverProcess) -> None:
    with grpc.insecure_channel(f"unix://{proc.served[0].server.paths.dra}") as channel:
        stub = dra_v1_pb2_grpc.DRAPluginStub(channel)
        claim = dra_v1_pb2.Claim(namespace=NAMESPACE, name=CLAIM_A, uid=CLAIM_A_UID)
        resp = stub.NodePrepareResources(dra_v1_pb2.NodePrepareResourcesRequest(claims=[claim]), timeout=30)
    assert resp.claims[CLAIM_A_UID].error == ""


def test_a_claims_read_and_its_status_write_share_one_connection(apiserver: FakeApiserver,
                                                                 driver: DriverProcess) -> None:
    _prepare(driver)
    wait_for(lambda: apiserver.script.requests("PATCH"), 10, "the claim's status write")
    read, write = apiserver.script.requests("GET")[-1], apiserver.script.requests("PATCH")[0]
    assert read.path == claim_path(NAMESPACE, CLAIM_A) and write.path.endswith("/status")
    assert read.connection == write.connection
    metrics = driver.metrics.render().decode()
    assert f"dralab_driver_apiserver_handshakes_total {float(apiserver.script.connections())}" in metrics


def test_handshakes_count_the_connections_the_apiserver_closed(apiserver: FakeApiserver,
                                                               driver: DriverProcess) -> None:
    apiserver.script.close_connections = True  # every answer ends its connection, as an idle one expires
    _prepare(driver)
    wait_for(lambda: apiserver.script.requests("PATCH"), 10, "the claim's status write")
    seen = apiserver.script.requests()
    assert len({s.connection for s in seen}) == len(seen)  # each call on its own connection
    metrics = driver.metrics.render().decode()
    assert f"dralab_driver_apiserver_handshakes_total {float(len(seen))}" in metrics
    # each connection after the first offered the closed one's session, and the server took it
    assert f"dralab_driver_apiserver_resumed_handshakes_total {float(len(seen) - 1)}" in metrics
