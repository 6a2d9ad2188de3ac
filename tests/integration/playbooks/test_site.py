"""site.yml run for real on localhost: what it changes, that a second run changes nothing, check mode."""

from __future__ import annotations

import pytest
import testinfra
import yaml

from .conftest import Host, run_site

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def local():
    return testinfra.get_host("local://")


def test_first_run_succeeds_and_changes_the_host(prepared) -> None:
    _host, first, _second, _tmp = prepared
    assert first.rc == 0, first.stdout[-3000:]
    assert first.changed > 0


def test_containerd_gets_cdi_and_the_ascend_handler_keeping_its_settings(prepared, local) -> None:
    host = prepared[0]
    config = local.file(str(host.containerd_config))
    text = config.content_string
    assert "enable_cdi = true" in text
    assert f'cdi_spec_dirs = ["{host.root}/etc/cdi", "{host.root}/var/run/cdi"]' in text
    assert '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.ascend]' in text
    assert f'BinaryName = "{host.root}/usr/local/Ascend/ascend-docker-runtime"' in text
    # what was there stays, comments included
    assert 'sandbox_image = "registry.k8s.io/pause:3.10"' in text
    assert "# registry mirrors and the sandbox image are site settings the roles must keep" in text
    assert 'root = "/var/lib/containerd"' in text
    import tomllib

    doc = tomllib.loads(text)
    cri = doc["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["enable_cdi"] is True
    assert cri["containerd"]["runtimes"]["runc"]["options"]["SystemdCgroup"] is True
    assert cri["containerd"]["runtimes"]["ascend"]["runtime_type"] == "io.containerd.runc.v2"
    assert local.file(f"{host.root}/etc/cdi").is_directory
    assert local.file(f"{host.root}/var/run/cdi").is_directory


def test_kubelet_and_control_plane_get_the_gate(prepared, local) -> None:
    host = prepared[0]
    kubelet = yaml.safe_load(local.file(str(host.kubelet_config)).content_string)
    assert kubelet["featureGates"] == {"ImageVolume": True, "DRAConsumableCapacity": True}
    assert kubelet["clusterDNS"] == ["10.96.0.10"]
    api = yaml.safe_load(local.file(f"{host.manifests}/kube-apiserver.yaml").content_string)
    assert "--feature-gates=ImageVolume=true,DRAConsumableCapacity=true" in api["spec"]["containers"][0]["command"]
    sched = yaml.safe_load(local.file(f"{host.manifests}/kube-scheduler.yaml").content_string)
    assert sched["spec"]["containers"][0]["command"][-1] == "--feature-gates=DRAConsumableCapacity=true"
    assert not local.file(f"{host.manifests}/kube-controller-manager.yaml").exists


def test_a_136_host_gets_no_gate_at_all(host: Host, tmp_path) -> None:
    # consumable capacity is beta and on from 1.36: passing it would only pin a default
    before = host.snapshot()
    run = run_site(host, tmp_path, tags="kubelet", kubelet_feature_gates_kubernetes_version="v1.36.3")
    assert run.rc == 0, run.stdout[-3000:]
    assert run.changed == 0
    assert host.snapshot() == before


def test_wanted_gates_follow_the_version(host: Host, tmp_path) -> None:
    wanted = ["DRAConsumableCapacity", "DRADeviceTaints", "DRAAdminAccess"]
    run = run_site(host, tmp_path, tags="kubelet", kubelet_feature_gates_wanted=wanted)  # 1.35 from `kubelet`
    assert run.rc == 0, run.stdout[-3000:]
    kubelet = yaml.safe_load(host.kubelet_config.read_text())
    # DRAAdminAccess is beta and on in 1.35: left out
    assert kubelet["featureGates"] == {"ImageVolume": True, "DRAConsumableCapacity": True, "DRADeviceTaints": True}
    sched = yaml.safe_load((host.manifests / "kube-scheduler.yaml").read_text())
    flag = "--feature-gates=DRAConsumableCapacity=true,DRADeviceTaints=true"
    assert sched["spec"]["containers"][0]["command"][-1] == flag


def test_a_host_without_a_known_version_fails_with_the_fix(host: Host, tmp_path) -> None:
    before = host.snapshot()
    run = run_site(host, tmp_path, tags="kubelet", kubelet_feature_gates_kubelet_binary="/nonexistent/kubelet")
    assert run.rc != 0
    assert "No Kubernetes version to choose the feature gates for" in run.stdout, run.stdout[-3000:]
    assert "Set kubelet_feature_gates_kubernetes_version" in run.stdout
    assert host.snapshot() == before


def test_a_host_before_kubeadm_needs_no_version(host: Host, tmp_path) -> None:
    # no kubelet config and no static pod yet: nothing takes gates, so no kubelet is asked
    host.kubelet_config.unlink()
    for manifest in host.manifests.iterdir():
        manifest.unlink()
    run = run_site(host, tmp_path, tags="kubelet", kubelet_feature_gates_kubelet_binary="/nonexistent/kubelet")
    assert run.rc == 0, run.stdout[-3000:]
    assert run.changed == 0
    assert "does not exist yet" in run.stdout


def test_a_version_too_old_for_dralab_fails_the_role(host: Host, tmp_path) -> None:
    run = run_site(host, tmp_path, tags="kubelet", kubelet_feature_gates_kubernetes_version="v1.33.0")
    assert run.rc != 0
    assert "Kubernetes v1.33.0 is too old for dralab" in run.stdout, run.stdout[-3000:]


def test_device_share_is_enabled_only_where_it_was_off_and_persisted(prepared, local) -> None:
    host = prepared[0]
    npus = host.npu()["npus"]
    assert npus["4"]["chips"]["0"] is True and npus["5"]["chips"]["0"] is True
    sets = host.set_calls()
    assert ["set", "-t", "device-share", "-i", "4", "-c", "0", "-d", "1"] in sets
    assert not any(c[3:5] == ["-i", "5"] for c in sets if c[2] == "device-share")
    assert ["set", "-t", "device-share-cfg-recover", "-d", "1"] in sets
    assert host.npu()["recover"] is True
    assert local.file(str(host.marker)).exists


def test_second_run_changes_nothing(prepared) -> None:
    host, _first, second, _tmp = prepared
    assert second.rc == 0, second.stdout[-3000:]
    assert second.changed == 0, second.stdout[-3000:]
    # npu-smi was only asked, never told, the second time
    assert len([c for c in host.set_calls() if c[2] == "device-share"]) == 1


def test_check_mode_reports_changes_and_touches_nothing(host: Host, tmp_path) -> None:
    before = host.snapshot()
    npu_before = host.npu()["npus"]
    run = run_site(host, tmp_path, check=True)
    assert run.rc == 0, run.stdout[-3000:]
    assert run.changed > 0
    assert host.snapshot() == before
    assert host.npu()["npus"] == npu_before
    assert host.set_calls() == []
    assert "+  enable_cdi = true" in run.stdout  # --diff shows what would change


def test_preflight_fails_clearly_where_soft_slicing_is_unsupported(host: Host, tmp_path) -> None:
    (host.root / "usr/local/Ascend/driver/version.info").write_text("Version=25.3.0\n")
    run = run_site(host, tmp_path, tags="npu", npu_device_share_arch="x86_64")
    assert run.rc != 0
    assert "ARM-only, this host is x86_64" in run.stdout
    assert "Ascend driver 25.3.0 is older than 25.5" in run.stdout
    assert "npu_device_share_preflight: false" in run.stdout
    assert host.npu()["npus"]["4"]["chips"]["0"] is False


def test_named_npus_skip_discovery_and_preflight_can_be_skipped(host: Host, tmp_path) -> None:
    run = run_site(
        host,
        tmp_path,
        tags="npu",
        npu_device_share_npu_ids=[4],
        npu_device_share_preflight=False,
        npu_device_share_arch="x86_64",
    )
    assert run.rc == 0, run.stdout[-3000:]
    calls = host.npu()["calls"]
    assert ["info", "-l"] not in calls
    assert ["info", "-t", "device-share", "-i", "5"] not in calls
    assert host.npu()["npus"]["4"]["chips"]["0"] is True


def test_non_ascend_hosts_get_cdi_and_gates_only(host: Host, tmp_path) -> None:
    run = run_site(host, tmp_path, tags="containerd,npu", dralab_backend="nvidia")
    assert run.rc == 0, run.stdout[-3000:]
    text = host.containerd_config.read_text()
    assert "enable_cdi = true" in text and "runtimes.ascend" not in text
    assert host.npu().get("calls", []) == []


def test_a_missing_ascend_runtime_fails_with_the_fix(host: Host, tmp_path) -> None:
    run = run_site(host, tmp_path, tags="containerd", ascend_runtime_binary="/nonexistent/ascend-docker-runtime")
    assert run.rc != 0
    assert 'set ascend_runtime_binary: ""' in run.stdout
