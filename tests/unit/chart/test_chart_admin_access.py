"""Chart: admin-access claims for the monitor and a diagnostics DaemonSet (DRA admin access, KEP-5018).

Rendered with the switches off and on: the ResourceClaimTemplate asks for adminAccess with zero
capacity, the pods reference it, and misconfiguration stops helm from templates/validate.yaml.
The namespace label check needs a cluster (helm lookup); tests/integration/chart covers it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dralab_kit.provision.chart import chart_dir, default_values

from .conftest import Render, run_helm

pytestmark = pytest.mark.slow

DIAG = {"diagnostics": {"enabled": True}}
MONITOR = {"monitor": {"enabled": True, "adminAccess": {"enabled": True}}}


def of_kind(objs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == kind]


def named(objs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [o for o in of_kind(objs, kind) if o["metadata"]["name"] == name]
    return found


def request_of(template: dict[str, Any]) -> dict[str, Any]:
    (request,) = template["spec"]["spec"]["devices"]["requests"]
    assert request["name"] == "devices"
    return request["exactly"]


def test_nothing_asks_for_admin_access_by_default(render: Render) -> None:
    objs = render({"monitor": {"enabled": True}})
    assert of_kind(objs, "ResourceClaimTemplate") == []
    assert [o["metadata"]["name"] for o in of_kind(objs, "DaemonSet")] == ["dralab-driver"]
    pod = named(objs, "Deployment", "dralab-monitor")["spec"]["template"]["spec"]
    assert "resourceClaims" not in pod
    assert "claims" not in pod["containers"][0]["resources"]


def test_diagnostics_pods_hold_an_admin_claim_on_every_device_of_their_node(render: Render) -> None:
    objs = render(DIAG)
    template = named(objs, "ResourceClaimTemplate", "dralab-diagnostics")
    assert template["metadata"]["namespace"] == "dralab-system"
    exactly = request_of(template)
    assert exactly == {
        "deviceClassName": "hami-vnpu-core.project-hami.io",  # the first of vendors.enabled
        "allocationMode": "All",
        "adminAccess": True,
        # zero, not absent: absent would be the request policy's default, the whole device
        "capacity": {"requests": {"memory": "0", "cores": "0"}},
    }
    pod = named(objs, "DaemonSet", "dralab-diagnostics")["spec"]["template"]
    assert pod["metadata"]["labels"]["dralab.io/convert"] == "false"
    spec = pod["spec"]
    assert spec["resourceClaims"] == [{"name": "devices", "resourceClaimTemplateName": "dralab-diagnostics"}]
    (container,) = spec["containers"]
    assert container["resources"]["claims"] == [{"name": "devices"}]
    assert container["command"] == ["sleep", "infinity"]
    assert container["securityContext"]["runAsNonRoot"] is True
    assert spec["automountServiceAccountToken"] is False


def test_the_device_is_chosen_by_vendor_class_selectors_and_count(render: Render) -> None:
    objs = render({"vendors": {"enabled": ["ascend", "nvidia"]}, "diagnostics": {"enabled": True, "device": {
        "vendor": "nvidia", "allocationMode": "ExactCount", "count": 2,
        "selectors": ['device.attributes["hami-core-gpu.project-hami.io"].index == 0']}}})  # fmt: skip
    exactly = request_of(named(objs, "ResourceClaimTemplate", "dralab-diagnostics"))
    assert exactly["deviceClassName"] == "hami-core-gpu.project-hami.io"
    assert (exactly["allocationMode"], exactly["count"]) == ("ExactCount", 2)
    (selector,) = exactly["selectors"]
    assert selector == {"cel": {"expression": 'device.attributes["hami-core-gpu.project-hami.io"].index == 0'}}

    renamed = render({"vendors": {"enabled": ["nvidia"], "overrides": {"nvidia": {"deviceClass": "gpu.example.com"}}},
                      **DIAG})  # fmt: skip
    exactly = request_of(named(renamed, "ResourceClaimTemplate", "dralab-diagnostics"))
    assert exactly["deviceClassName"] == "gpu.example.com"

    # helm merges maps: null, not {}, removes the default zero requests
    device = {"deviceClassName": "gpu.other.io", "capacityRequests": None}
    other = render({"diagnostics": {"enabled": True, "device": device}})
    exactly = request_of(named(other, "ResourceClaimTemplate", "dralab-diagnostics"))
    assert exactly["deviceClassName"] == "gpu.other.io"
    assert "capacity" not in exactly  # another driver's devices may publish no such capacities


def test_diagnostics_image_command_and_nodes_are_settable(render: Render) -> None:
    objs = render({"diagnostics": {"enabled": True, "image": {"repository": "tools/npu-smi", "tag": "24.1"},
                                   "command": ["npu-smi", "info", "-l"], "nodeSelector": {"accel": "npu"},
                                   "tolerations": [{"operator": "Exists"}]}})  # fmt: skip
    spec = named(objs, "DaemonSet", "dralab-diagnostics")["spec"]["template"]["spec"]
    assert spec["containers"][0]["image"] == "tools/npu-smi:24.1"
    assert spec["containers"][0]["command"] == ["npu-smi", "info", "-l"]
    assert spec["nodeSelector"] == {"accel": "npu"}
    assert spec["tolerations"] == [{"operator": "Exists"}]


def test_the_monitor_gets_an_admin_claim_on_one_device(render: Render) -> None:
    objs = render(MONITOR)
    exactly = request_of(named(objs, "ResourceClaimTemplate", "dralab-monitor-admin"))
    assert (exactly["allocationMode"], exactly["count"], exactly["adminAccess"]) == ("ExactCount", 1, True)
    assert exactly["capacity"] == {"requests": {"memory": "0", "cores": "0"}}
    pod = named(objs, "Deployment", "dralab-monitor")["spec"]["template"]["spec"]
    assert pod["resourceClaims"] == [{"name": "devices", "resourceClaimTemplateName": "dralab-monitor-admin"}]
    resources = pod["containers"][0]["resources"]
    assert resources["claims"] == [{"name": "devices"}]
    assert resources["requests"] == {"cpu": "20m", "memory": "96Mi"}  # the rest of resources is kept


@pytest.mark.parametrize("values", [DIAG, MONITOR, {**DIAG, **MONITOR}])
def test_lint_strict_passes_with_admin_access(helm: Path, values: dict) -> None:
    out = run_helm(helm, "lint", "--strict", str(chart_dir()), values=values, check=False)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"monitor": {"enabled": False, "adminAccess": {"enabled": True}}},
         "monitor.adminAccess.enabled is true but monitor.enabled is false"),
        ({"diagnostics": {"enabled": True, "device": {"vendor": "hygon"}}, "vendors": {"enabled": ["nvidia"]}},
         'diagnostics.device.vendor is "hygon", which is not in vendors.enabled (nvidia)'),
        ({**MONITOR, "vendors": {"enabled": []}}, "or set monitor.adminAccess.device.deviceClassName"),
    ],
)  # fmt: skip
def test_misconfigured_admin_access_fails_from_the_validation_template(helm: Path, values: dict, message: str) -> None:
    out = run_helm(helm, "template", "x", str(chart_dir()), values=values, check=False)
    assert out.returncode != 0
    assert message in out.stderr, out.stderr
    assert "templates/validate.yaml" in out.stderr, out.stderr


@pytest.mark.parametrize(
    ("values", "field"),
    [({"diagnostics": {"enabled": True, "device": {"allocationMode": "Some"}}}, "allocationMode"),
     ({"diagnostics": {"enabled": True, "device": {"count": 0}}}, "count"),
     ({"monitor": {"adminAccess": {"enabled": True, "devices": {}}}}, "devices")],
)  # fmt: skip
def test_schema_rejects_bad_admin_access_values(helm: Path, values: dict, field: str) -> None:
    out = run_helm(helm, "template", "x", str(chart_dir()), values=values, check=False)
    assert out.returncode != 0
    assert field in out.stderr, out.stderr


def test_default_capacity_requests_name_what_dralabs_driver_publishes() -> None:
    from dralab.driver.devices import Device
    from dralab.driver.slices import device_capacity

    device = Device("nvidia", "gpu-0", "GPU-0", "L4", "L4", 23034 << 20, 100, 0, 0)
    published = set(device_capacity(device))
    values = default_values()
    for where in (values["diagnostics"]["device"], values["monitor"]["adminAccess"]["device"]):
        assert set(where["capacityRequests"]) == published
        assert {str(v) for v in where["capacityRequests"].values()} == {"0"}
