"""Fail closed on the real node: a driver whose enforcement library is not there refuses the claim,
and the real kubelet reports why as the pod's event; the pod never runs unenforced.

A cluster of its own (``node-nolib``), whose driver is configured with a library path that does
not exist (``driver.enforcementLibrary``), as a failed init container or a wrong value would leave it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dralab.util import wait_for
from dralab_kit.cluster import api
from dralab_kit.cluster.api import ClusterHandle

from .conftest import ensure_node_binaries
from .node_helpers import pod

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("node-nolib")]

NAME = "node-nolib"


@pytest.fixture(scope="module")
def nolib(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ClusterHandle, Path]]:
    ensure_node_binaries()
    folder = tmp_path_factory.mktemp("nolib")
    missing = folder / "lib" / "libvcore.so"  # never created
    config = folder / "dralab.yaml"
    config.write_text(f"driver:\n  enforcementLibrary: {missing}\n")
    handle = api.ensure_cluster(NAME, config=str(config), real_node=True)
    yield handle, missing
    api.down(NAME)


def test_a_claim_is_refused_with_the_reason_as_the_pods_event(nolib: tuple[ClusterHandle, Path]) -> None:
    handle, missing = nolib
    kube = handle.kube()
    ns = "nolib"
    kube.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
                exist_ok=True)
    obj = pod("unenforced", "sleep 3600", runtimeClassName="ascend")
    obj["spec"]["containers"][0]["resources"] = {"limits": {
        "huawei.com/Ascend310P": 1, "huawei.com/Ascend310P-memory": "2048", "huawei.com/Ascend310P-core": "20"}}
    kube.create(f"/api/v1/namespaces/{ns}/pods", obj)

    def refusal() -> str | None:
        events = kube.list(f"/api/v1/namespaces/{ns}/events").get("items") or []
        for event in events:
            if (event.get("involvedObject") or {}).get("name") == "unenforced" and str(missing) in event.get(
                "message", ""
            ):
                return str(event["message"])
        return None

    message = wait_for(refusal, 120, "the kubelet's event with the driver's refusal", interval=0.5)
    assert "is missing" in message and "driver.enforcement: none" in message
    live = kube.get(f"/api/v1/namespaces/{ns}/pods/unenforced")
    assert live["status"].get("phase") != "Running"  # never started without its quota
    claim_specs = list(handle.layout.cdi_dir(handle.state["realNode"]).glob("*_[0-9a-f]*-*.yaml"))
    assert claim_specs == []  # no CDI spec for the refused claim (the common spec has no uid)
    kube.close()
