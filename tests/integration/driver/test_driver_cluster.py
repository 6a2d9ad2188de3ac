"""The node driver against the local cluster's real kube-apiserver (v1.35, DRAConsumableCapacity on).

Two kinds of tests:
- a private driver process for a private Node object (not managed by KWOK, so nothing schedules
  onto it): slice publication, ownership, generation bumps, republish after deletion, garbage
  collection with the Node, and Prepare of claims allocated through the status subresource;
- the cluster's own driver through the kubelet stand-in: a pod with a claim is scheduled onto
  Lab 20's node, the stand-in calls NodePrepareResources, the CDI spec lands in the node's CDI dir.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
import yaml

from dralab.driver.cdi import env_of
from dralab.driver.library import stub_library
from dralab.driver.proto import dra_v1_pb2, dra_v1_pb2_grpc
from dralab.driver.runner import DriverProcess, RunOptions
from dralab.kube import Kube, KubeError
from dralab.kube.paths import SLICES_PATH, claim_path
from dralab.util import wait_for
from dralab_kit.fixtures.driver_claims import lab20_claim

from ..helpers import allocation, claim_pod, resource_claim

pytestmark = pytest.mark.integration

DRIVER = "ascend.project-hami.io"
KIND = "k8s.ascend.project-hami.io/npu"
LAB20_NODE = "aio-node74-arm"
DEVICE_CLASS = "hami-vnpu-core.project-hami.io"


@pytest.fixture
def kube(cluster) -> Iterator[Kube]:
    client = Kube.from_kubeconfig(cluster.kubeconfig)
    yield client
    client.close()


def _slices(kube: Kube, node: str) -> list[dict]:
    return kube.list(SLICES_PATH, field_selector=f"spec.nodeName={node},spec.driver={DRIVER}").get("items") or []


def _inventory(folder: Path, node: str, memory: str = "21525Mi") -> Path:
    path = folder / "inventory.yaml"
    devices = []
    for index, (uuid_, phys) in enumerate(
        (("68496E64-20E05477-92C31323-6E78030A-BD003019", 0), ("D8496E64-20C101B1-C0D42F23-AED8030A-40003039", 2))
    ):
        devices.append(
            {
                "vendor": "ascend",
                "uuid": uuid_,
                "productName": "310P3",
                "model": "310P3",
                "memory": memory,
                "cores": 100,
                "physicalID": phys,
                "index": index,
            }
        )
    path.write_text(yaml.safe_dump({"nodes": [{"name": node, "devices": devices}]}))
    return path


class PrivateDriver:
    """A driver process of this test for a private Node object."""

    def __init__(self, cluster, kube: Kube) -> None:
        self.cluster = cluster
        self.kube = kube
        self.node = f"it-drv-{uuid.uuid4().hex[:6]}"
        self.root = Path(tempfile.mkdtemp(prefix="itd", dir="/tmp"))
        self.node_obj = kube.create(
            "/api/v1/nodes", {"metadata": {"name": self.node, "labels": {"dralab.io/test": "driver"}}}
        )
        lib = self.root / "lib" / "libvcore.so"
        lib.parent.mkdir()
        lib.write_bytes(stub_library())  # an ELF header the driver accepts
        self.library = lib
        self.proc: DriverProcess | None = None

    def start(self, memory: str = "21525Mi") -> DriverProcess:
        opts = RunOptions(
            node=self.node,
            backend="fake",
            devices_file=str(_inventory(self.root, self.node, memory)),
            kubeconfig=str(self.cluster.kubeconfig),
            plugin_dir=str(self.root / "p"),
            registry_dir=str(self.root / "r"),
            cdi_dir=str(self.root / "cdi"),
            state_dir=str(self.root / "s"),
            enforcement_library=str(self.library),
            resync_seconds=2.0,
        )
        self.proc = DriverProcess(opts).start()
        return self.proc

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()
            self.proc = None

    def close(self) -> None:
        self.stop()
        for item in _slices(self.kube, self.node):
            self.kube.delete(f"{SLICES_PATH}/{item['metadata']['name']}", missing_ok=True)
        self.kube.delete(f"/api/v1/nodes/{self.node}", missing_ok=True)
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def private(cluster, kube) -> Iterator[PrivateDriver]:
    drv = PrivateDriver(cluster, kube)
    yield drv
    drv.close()


def test_slices_are_published_as_lab20_shows(private: PrivateDriver, kube: Kube) -> None:
    private.start()
    [slc] = wait_for(lambda: _slices(kube, private.node), 30, "the driver's ResourceSlice")
    assert slc["metadata"]["name"].startswith(f"{private.node}-{DRIVER}-")
    [owner] = slc["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("Node", private.node, private.node_obj["metadata"]["uid"])
    spec = slc["spec"]
    assert spec["pool"] == {"name": private.node, "generation": 1, "resourceSliceCount": 1}
    first, second = spec["devices"]
    assert (first["name"], second["name"]) == ("npu-0-0", "npu-1-0")
    assert first["allowMultipleAllocations"] is True, "DRAConsumableCapacity must be on in the apiserver"
    assert first["attributes"]["uuid"] == {"string": "68496E64-20E05477-92C31323-6E78030A-BD003019"}
    assert second["attributes"]["physicalID"] == {"int": 2}
    assert first["capacity"]["memory"] == {
        "value": "21525Mi",
        "requestPolicy": {"default": "21525Mi", "validRange": {"min": "1Mi", "max": "21525Mi", "step": "1Mi"}},
    }
    assert first["capacity"]["cores"]["requestPolicy"]["validRange"] == {"min": "0", "max": "100", "step": "1"}
    # the slice is visible once the create returns, the publisher's own mark is set just after
    assert private.proc.served[0].publisher.published.wait(10)
    ready, detail = private.proc.ready()  # no kubelet watches this private registry dir
    assert not ready and "not registered" in detail


def test_deleted_slice_is_republished(private: PrivateDriver, kube: Kube) -> None:
    private.start()
    [slc] = wait_for(lambda: _slices(kube, private.node), 30, "the first slice")
    kube.delete(f"{SLICES_PATH}/{slc['metadata']['name']}", missing_ok=True)  # what the kubelet does at its start
    again = wait_for(
        lambda: [s for s in _slices(kube, private.node) if s["metadata"]["uid"] != slc["metadata"]["uid"]],
        30,
        "the republished slice",
    )
    assert len(again) == 1


def test_restart_with_changed_devices_bumps_generation_and_removes_stale(
    private: PrivateDriver, kube: Kube
) -> None:
    private.start()
    [first] = wait_for(lambda: _slices(kube, private.node), 30, "generation 1")
    private.stop()
    private.start(memory="20000Mi")

    def republished():
        items = _slices(kube, private.node)
        return items if len(items) == 1 and items[0]["spec"]["pool"]["generation"] == 2 else None

    [second] = wait_for(republished, 30, "generation 2 alone")
    assert second["metadata"]["name"] != first["metadata"]["name"]
    assert second["spec"]["devices"][0]["capacity"]["memory"]["value"] == "20000Mi"
    private.stop()
    private.start(memory="20000Mi")  # unchanged devices: no new generation
    assert private.proc.served[0].publisher.published.wait(30)
    [same] = _slices(kube, private.node)
    assert same["metadata"]["uid"] == second["metadata"]["uid"]


def test_slices_go_with_their_node(private: PrivateDriver, kube: Kube) -> None:
    private.start()
    wait_for(lambda: _slices(kube, private.node), 30, "a slice")
    private.stop()
    kube.delete(f"/api/v1/nodes/{private.node}", missing_ok=True)
    wait_for(lambda: not _slices(kube, private.node), 60, "garbage collection of the node's slices")


def _allocated_claim(kube: Kube, namespace: str, name: str, node: str) -> dict:
    base = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims"
    made = kube.create(base, resource_claim(name, DEVICE_CLASS))
    made["status"] = lab20_claim(uid=made["metadata"]["uid"], name=name, namespace=namespace, node=node)["status"]
    return kube.request("PUT", f"{base}/{name}/status", body=made)


def test_prepare_reads_the_claim_from_the_apiserver(private: PrivateDriver, kube: Kube, namespace: str) -> None:
    proc = private.start()
    claim = _allocated_claim(kube, namespace, "claim-a", private.node)
    uid = claim["metadata"]["uid"]
    assert claim["status"]["allocation"]["devices"]["results"][0]["consumedCapacity"] == {
        "cores": "50",
        "memory": "8Gi",
    }
    with grpc.insecure_channel(f"unix://{proc.served[0].server.paths.dra}") as ch:
        stub = dra_v1_pb2_grpc.DRAPluginStub(ch)
        ref = dra_v1_pb2.Claim(namespace=namespace, name="claim-a", uid=uid)
        resp = stub.NodePrepareResources(dra_v1_pb2.NodePrepareResourcesRequest(claims=[ref]), timeout=45)
        entry = resp.claims[uid]
        assert entry.error == ""
        assert list(entry.devices[0].cdi_device_ids) == [f"{KIND}={uid}"]
        spec = yaml.safe_load((private.root / "cdi" / f"k8s.{DRIVER}-npu_{uid}.yaml").read_text())
        env = env_of(spec)
        assert (env["NPU_MEM_QUOTA"], env["NPU_PRIORITY"], env["ASCEND_VISIBLE_DEVICES"]) == ("8192", "50", "0")
        # replaced claim: same name, new uid -> the old uid is refused
        kube.delete(claim_path(namespace, "claim-a"), missing_ok=True)
        wait_for(lambda: kube.get(claim_path(namespace, "claim-a"), missing_ok=True) is None, 30, "claim deletion")
        _allocated_claim(kube, namespace, "claim-a", private.node)
        stale = stub.NodePrepareResources(
            dra_v1_pb2.NodePrepareResourcesRequest(
                claims=[dra_v1_pb2.Claim(namespace=namespace, name="claim-a", uid="0000-old")]
            ),
            timeout=45,
        )
        assert "replaced" in stale.claims["0000-old"].error
        un = stub.NodeUnprepareResources(dra_v1_pb2.NodeUnprepareResourcesRequest(claims=[ref]), timeout=45)
        assert un.claims[uid].error == ""
        assert not (private.root / "cdi" / f"k8s.{DRIVER}-npu_{uid}.yaml").exists()


def _records(cluster, node: str) -> list[dict]:
    path = Path(cluster.node_dir(node)) / "kubelet-records.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_prepare_through_the_kubelet_standin(cluster, kube: Kube, namespace: str) -> None:
    """Lab 20's claim A, scheduled by the real scheduler onto Lab 20's node, prepared via the stand-in."""
    base = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims"
    kube.create(
        base, resource_claim("share-a", DEVICE_CLASS, count=1, capacity={"memory": "8589934592", "cores": "50"})
    )
    pod = claim_pod(
        "share-a",
        {"resourceClaimName": "share-a"},
        grace_period=None,
        labels={"hami.io/webhook": "ignore"},
        nodeSelector={"kubernetes.io/hostname": LAB20_NODE},
    )
    kube.create(f"/api/v1/namespaces/{namespace}/pods", pod)
    claim = wait_for(
        lambda: (c := kube.get(claim_path(namespace, "share-a"), missing_ok=True)) and allocation(c) and c,
        60,
        "the claim's allocation",
    )
    uid = claim["metadata"]["uid"]
    [result] = claim["status"]["allocation"]["devices"]["results"]
    assert result["consumedCapacity"] == {"cores": "50", "memory": "8Gi"}

    def prepared():
        return [
            r
            for r in _records(cluster, LAB20_NODE)
            if r.get("call") == "NodePrepareResources" and any(c.get("uid") == uid for c in r.get("claims") or [])
        ]

    [record] = wait_for(prepared, 60, "the stand-in's NodePrepareResources record")
    assert record["error"] is None
    assert f"{KIND}={uid}" in record["cdiDeviceIDs"]
    spec_path = Path(cluster.node_dir(LAB20_NODE)) / "cdi" / f"k8s.{DRIVER}-npu_{uid}.yaml"
    env = env_of(yaml.safe_load(spec_path.read_text()))
    assert env["NPU_MEM_QUOTA"] == "8192" and env["NPU_PRIORITY"] == "50"
    assert env["ASCEND_VISIBLE_DEVICES"] == ("0" if result["device"] == "npu-0-0" else "2")
    kube.delete(f"/api/v1/namespaces/{namespace}/pods/share-a", missing_ok=True)
    wait_for(lambda: not spec_path.exists(), 90, "NodeUnprepareResources to remove the CDI spec")
    with pytest.raises(KubeError):
        kube.request("GET", f"/api/v1/namespaces/{namespace}/pods/share-a")
