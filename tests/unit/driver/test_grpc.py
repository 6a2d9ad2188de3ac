"""The driver's gRPC surface, through real unix sockets, with a kubelet-like client."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc

from dralab.driver.claims import InMemoryClaimSource
from dralab.driver.proto import (
    dra_v1_pb2,
    dra_v1_pb2_grpc,
    dra_v1beta1_pb2,
    dra_v1beta1_pb2_grpc,
    pluginregistration_pb2,
    pluginregistration_pb2_grpc,
)
from dralab.driver.runner import DriverProcess, RunOptions
from dralab.driver.server import SocketPaths
from dralab.errors import UserError
from dralab_kit.fixtures.driver_claims import CLAIM_A, CLAIM_A_UID, NAMESPACE, NODE, SHARE_A, lab20_claim

KIND = "k8s.ascend.project-hami.io/npu"


class Kubelet:
    """What the kubelet does with a DRA plugin: read the registration socket, then call the DRA socket."""

    def __init__(self, registry_dir: Path, driver: str) -> None:
        self.reg_path = registry_dir / f"{driver}-reg.sock"

    def register(self) -> pluginregistration_pb2.PluginInfo:
        with grpc.insecure_channel(f"unix://{self.reg_path}") as ch:
            stub = pluginregistration_pb2_grpc.RegistrationStub(ch)
            info = stub.GetInfo(pluginregistration_pb2.InfoRequest(), timeout=5)
            stub.NotifyRegistrationStatus(pluginregistration_pb2.RegistrationStatus(plugin_registered=True), timeout=5)
        self.endpoint = info.endpoint
        return info

    def prepare(self, *claims: tuple[str, str, str], beta: bool = False):
        pb, grpc_mod = (dra_v1beta1_pb2, dra_v1beta1_pb2_grpc) if beta else (dra_v1_pb2, dra_v1_pb2_grpc)
        req = pb.NodePrepareResourcesRequest(claims=[pb.Claim(namespace=n, name=c, uid=u) for n, c, u in claims])
        with grpc.insecure_channel(f"unix://{self.endpoint}") as ch:
            return grpc_mod.DRAPluginStub(ch).NodePrepareResources(req, timeout=45)

    def unprepare(self, *claims: tuple[str, str, str]):
        req = dra_v1_pb2.NodeUnprepareResourcesRequest(
            claims=[dra_v1_pb2.Claim(namespace=n, name=c, uid=u) for n, c, u in claims]
        )
        with grpc.insecure_channel(f"unix://{self.endpoint}") as ch:
            return dra_v1_pb2_grpc.DRAPluginStub(ch).NodeUnprepareResources(req, timeout=45)


@pytest.fixture
def driver(short_tmp: Path, library: Path):
    claims = InMemoryClaimSource([lab20_claim()])
    opts = RunOptions(
        node=NODE,
        backend="fake",
        plugin_dir=str(short_tmp / "p"),
        registry_dir=str(short_tmp / "r"),
        cdi_dir=str(short_tmp / "cdi"),
        state_dir=str(short_tmp / "s"),
        enforcement_library=str(library),
        publish=False,
        metrics_port=0, metrics_authorization=False,
    )
    proc = DriverProcess(opts, claims=claims).start()
    yield proc, short_tmp, claims
    proc.stop()


def test_registration_advertises_v1_first(driver) -> None:
    proc, root, _ = driver
    info = Kubelet(root / "r", "ascend.project-hami.io").register()
    assert info.type == "DRAPlugin"
    assert info.name == "ascend.project-hami.io"
    assert info.endpoint == str(root / "p" / "ascend.project-hami.io" / "dra.sock")
    assert list(info.supported_versions) == ["v1.DRAPlugin", "v1beta1.DRAPlugin"]
    assert proc.served[0].server.registration.registered.is_set()


def test_prepare_and_unprepare_over_the_socket(driver) -> None:
    _, root, _ = driver
    kubelet = Kubelet(root / "r", "ascend.project-hami.io")
    kubelet.register()
    resp = kubelet.prepare((NAMESPACE, CLAIM_A, CLAIM_A_UID))
    entry = resp.claims[CLAIM_A_UID]
    assert entry.error == ""
    [dev] = entry.devices
    assert list(dev.request_names) == ["npu"]
    assert (dev.pool_name, dev.device_name) == (NODE, "npu-0-0")
    assert list(dev.cdi_device_ids) == [f"{KIND}={CLAIM_A_UID}"]
    assert dev.HasField("share_id") and dev.share_id == SHARE_A
    spec_file = root / "cdi" / f"k8s.ascend.project-hami.io-npu_{CLAIM_A_UID}.yaml"
    env = yaml.safe_load(spec_file.read_text())["devices"][0]["containerEdits"]["env"]
    assert "NPU_MEM_QUOTA=8192" in env
    un = kubelet.unprepare((NAMESPACE, CLAIM_A, CLAIM_A_UID))
    assert un.claims[CLAIM_A_UID].error == ""
    assert not spec_file.exists()


def test_each_call_counts_its_cpu_as_one_unit_of_its_work(driver) -> None:
    proc, root, _ = driver
    kubelet = Kubelet(root / "r", "ascend.project-hami.io")
    kubelet.register()
    kubelet.prepare((NAMESPACE, CLAIM_A, CLAIM_A_UID))
    kubelet.unprepare((NAMESPACE, CLAIM_A, CLAIM_A_UID))
    registry = proc.metrics.registry

    def counted(work: str, part: str) -> float | None:
        labels = {"driver": "ascend.project-hami.io", "work": work}
        return registry.get_sample_value(f"dralab_driver_work_cpu_seconds_{part}", labels)

    assert counted("prepare", "count") == 1 and counted("unprepare", "count") == 1
    assert (counted("prepare", "sum") or 0.0) > 0.0  # a Prepare writes a CDI spec and a checkpoint


def test_v1beta1_has_no_share_id_but_same_devices(driver) -> None:
    _, root, _ = driver
    kubelet = Kubelet(root / "r", "ascend.project-hami.io")
    kubelet.register()
    resp = kubelet.prepare((NAMESPACE, CLAIM_A, CLAIM_A_UID), beta=True)
    [dev] = resp.claims[CLAIM_A_UID].devices
    assert dev.device_name == "npu-0-0"
    assert not hasattr(dev, "share_id")


def test_every_requested_claim_gets_an_entry(driver) -> None:
    _, root, _ = driver
    kubelet = Kubelet(root / "r", "ascend.project-hami.io")
    kubelet.register()
    resp = kubelet.prepare((NAMESPACE, CLAIM_A, CLAIM_A_UID), (NAMESPACE, "missing", "uid-missing"))
    assert set(resp.claims) == {CLAIM_A_UID, "uid-missing"}
    assert "not found" in resp.claims["uid-missing"].error
    assert resp.claims[CLAIM_A_UID].error == ""


def test_empty_prepare_succeeds(driver) -> None:
    _, root, _ = driver
    kubelet = Kubelet(root / "r", "ascend.project-hami.io")
    kubelet.register()
    assert len(kubelet.prepare().claims) == 0


def test_grpc_health_and_http_endpoints(driver) -> None:
    import httpx

    proc, root, _ = driver
    paths = SocketPaths.for_driver("ascend.project-hami.io", root / "p", root / "r")
    with grpc.insecure_channel(f"unix://{paths.dra}") as ch:
        status = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=10).status
    assert status == health_pb2.HealthCheckResponse.SERVING
    base = f"http://127.0.0.1:{proc.status.port}"
    assert httpx.get(f"{base}/healthz").status_code == 200
    not_ready = httpx.get(f"{base}/readyz")
    assert not_ready.status_code == 503 and "not registered" in not_ready.text
    kubelet = Kubelet(root / "r", "ascend.project-hami.io")
    kubelet.register()
    assert httpx.get(f"{base}/readyz").status_code == 200
    kubelet.prepare((NAMESPACE, CLAIM_A, CLAIM_A_UID))
    text = httpx.get(f"{base}/metrics").text
    assert 'dralab_driver_prepared_claims{driver="ascend.project-hami.io"} 1.0' in text
    assert "dralab_driver_call_duration_seconds_count" in text


def test_health_fails_when_the_registration_socket_is_gone(driver) -> None:
    proc, root, _ = driver
    (root / "r" / "ascend.project-hami.io-reg.sock").unlink()
    ok, detail = proc.healthy()
    assert not ok
    assert "socket check failed" in detail


def test_socket_path_limit_is_a_user_error(tmp_path: Path) -> None:
    long_dir = tmp_path / ("x" * 120)
    with pytest.raises(UserError, match="over the limit"):
        SocketPaths.for_driver("ascend.project-hami.io", long_dir, long_dir)


def test_second_driver_on_the_same_state_dir_is_refused(driver, library: Path) -> None:
    _, root, _ = driver
    opts = RunOptions(
        node=NODE,
        backend="fake",
        plugin_dir=str(root / "p2"),
        registry_dir=str(root / "r2"),
        cdi_dir=str(root / "cdi"),
        state_dir=str(root / "s"),
        enforcement_library=str(library),
        publish=False,
    )
    with pytest.raises(UserError, match=r"driver\.lock"):
        DriverProcess(opts, claims=InMemoryClaimSource()).start()


def test_one_process_serves_several_driver_names(short_tmp: Path, library: Path) -> None:
    inventory = short_tmp / "mixed.yaml"
    inventory.write_text(
        yaml.safe_dump(
            {
                "nodes": [
                    {
                        "name": "mixed",
                        "devices": [
                            {"vendor": "ascend", "uuid": "A-1", "productName": "310P3", "memory": "21525Mi"},
                            {"vendor": "nvidia", "uuid": "GPU-1", "productName": "NVIDIA L4", "memory": "23034Mi"},
                        ],
                    }
                ]
            }
        )
    )
    opts = RunOptions(
        node="mixed",
        backend="fake",
        devices_file=str(inventory),
        plugin_dir=str(short_tmp / "p"),
        registry_dir=str(short_tmp / "r"),
        cdi_dir=str(short_tmp / "cdi"),
        state_dir=str(short_tmp / "s"),
        enforcement_library=str(library),
        publish=False,
    )
    proc = DriverProcess(opts, claims=InMemoryClaimSource()).start()
    try:
        names = {
            Kubelet(short_tmp / "r", d).register().name
            for d in ("ascend.project-hami.io", "hami-core-gpu.project-hami.io")
        }
        assert names == {"ascend.project-hami.io", "hami-core-gpu.project-hami.io"}
        assert proc.healthy()[0]
    finally:
        proc.stop()


def test_status_endpoint_answers_only_gets_of_known_paths(driver) -> None:
    import httpx

    proc, _, _ = driver
    base = f"http://127.0.0.1:{proc.status.port}"
    assert httpx.get(f"{base}/nope").status_code == 404
    assert httpx.post(f"{base}/metrics").status_code == 405
    head = httpx.head(f"{base}/metrics")
    assert head.status_code == 200 and head.content == b"" and int(head.headers["content-length"]) > 0


def test_a_wedged_call_makes_the_driver_unhealthy(driver, monkeypatch) -> None:
    from dralab.driver import server as server_module

    proc, _, _ = driver
    plugin = proc.served[0].server
    assert plugin.health()[0]
    monkeypatch.setattr(server_module, "STUCK_CALL_S", -1.0)  # every running call counts as wedged
    with plugin.inflight.call():
        ok, detail = plugin.health()
    assert not ok and "wedged" in detail
    assert plugin.health()[0], "healthy again once the call ends"


def test_the_kubelet_sees_the_plugin_leave_before_calls_in_flight_end(driver) -> None:
    """One server serves both sockets: stop() removes the registration socket before the grace period
    given to the DRA socket's calls, so the kubelet's plugin watcher deregisters first."""
    proc, _, _ = driver
    plugin = proc.served[0].server
    seen: dict[str, bool] = {}
    grpc_stop = plugin._server.stop

    def stop(grace: float | None) -> object:
        seen.update(registration=plugin.paths.registration.exists(), dra=plugin.paths.dra.exists())
        return grpc_stop(grace)

    plugin._server.stop = stop
    Kubelet(plugin.paths.registration.parent, plugin.state.driver).register()
    plugin.stop(grace=0.5)
    assert seen == {"registration": False, "dra": True}
    assert not plugin.paths.dra.exists()
