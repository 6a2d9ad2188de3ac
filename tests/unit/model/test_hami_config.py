"""HAMi's device config as dralab input: every key translated or reported, renamed resources converted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dralab.config import load_config, parse_config
from dralab.errors import UserError
from dralab.model.convert import Converter
from dralab.model.denials import Denied
from dralab.model.hami_config import parse_document, translate
from dralab.model.vendors import builtin_table_data

FIXTURES = Path(__file__).parent / "fixtures" / "hami"
SCHEDULER_CM = FIXTURES / "hami-scheduler-configmap.yaml"
RENAMED = FIXTURES / "hami-dra-renamed.yaml"


def _translate(doc: dict) -> object:
    return translate(doc, builtin_table_data(), "test")


def _config(doc: dict):
    return parse_config({}, "test", _translate(doc))


def _pod(limits: dict, annotations: dict | None = None) -> dict:
    meta = {"name": "p", "namespace": "team"}
    if annotations:
        meta["annotations"] = annotations
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": [{"name": "app", "image": "x", "resources": {"limits": limits}}]},
    }


def _request(conv, index: int = 0) -> dict:
    return conv.objects[index]["spec"]["devices"]["requests"][0]


# -- the two file shapes --------------------------------------------------------------------------


def test_configmap_wrapper_is_unwrapped() -> None:
    doc = parse_document(SCHEDULER_CM.read_text(), str(SCHEDULER_CM))
    assert set(doc) >= {"nvidia", "hygon", "vnpus", "cambricon"}


def test_configmap_without_the_key_names_it() -> None:
    with pytest.raises(UserError, match=r"device-config\.yaml"):
        parse_document("kind: ConfigMap\ndata: {other: x}\n", "cm.yaml")


def test_not_a_mapping_is_refused() -> None:
    with pytest.raises(UserError, match="YAML mapping"):
        parse_document("- a\n- b\n", "x.yaml")


def test_scheduler_configmap_keeps_the_shipped_names() -> None:
    cfg = load_config(None, SCHEDULER_CM)
    names = {rs.count for rs in cfg.vendors.resource_sets()}
    assert names == {"nvidia.com/gpu", "hygon.com/hcunum", "huawei.com/Ascend310P", "huawei.com/Ascend910B3"}
    # HAMi's chip list replaces the shipped one: only the two chips listed are converted
    assert cfg.vendors.get("ascend").chips == {"Ascend310P": "310P3", "Ascend910B3": "910B3"}


def test_scheduler_configmap_reports_every_untranslated_key() -> None:
    cfg = load_config(None, SCHEDULER_CM)
    paths = {line.split(": ")[1] for line in cfg.notes}
    for path in (
        "nvidia.overwriteEnv", "nvidia.defaultGPUNum", "nvidia.deviceSplitCount", "nvidia.deviceMemoryScaling",
        "nvidia.deviceCoreScaling", "nvidia.gpuCorePolicy", "nvidia.runtimeClassName",
        "nvidia.migProfileAllowlist", "cambricon", "vnpus.hamiVnpuCore", "vnpus.configs[0].aiCPU",
        "vnpus.configs[0].templates",
    ):
        assert path in paths, f"{path} not reported"
    # memoryFactor 1 is the identity and the three resource names are translated: not reported
    assert "nvidia.memoryFactor" not in paths and "nvidia.resourceCountName" not in paths


def test_ascend_chip_memory_and_ai_cores_are_kept() -> None:
    cfg = load_config(None, SCHEDULER_CM)
    specs = cfg.vendors.get("ascend")._raw["chipSpecs"]
    assert specs["Ascend310P"] == {"memoryMiB": 24576, "allocatableMiB": 21527, "aiCores": 8}
    assert specs["Ascend910B3"] == {"memoryMiB": 65536, "allocatableMiB": 65536, "aiCores": 20}


# -- each key ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "role"),
    [("resourceCountName", "count"), ("resourceMemoryName", "memory"), ("resourceCoreName", "cores")],
)
@pytest.mark.parametrize("vendor", ["nvidia", "hygon"])
def test_resource_name_keys(vendor: str, key: str, role: str) -> None:
    cfg = _config({vendor: {key: "corp.example/renamed"}})
    (rs,) = cfg.vendors.get(vendor).resource_sets()
    assert getattr(rs, role) == "corp.example/renamed"


def test_memory_percentage_name_is_denied_under_its_new_name() -> None:
    cfg = _config(
        {"nvidia": {"resourceMemoryName": "corp.example/mem", "resourceMemoryPercentageName": "corp.example/pct"}}
    )
    vendor = cfg.vendors.get("nvidia")
    assert list(vendor.unsupported) == ["corp.example/pct"]
    assert "corp.example/mem" in vendor.unsupported["corp.example/pct"]
    with pytest.raises(Denied, match="percentage"):
        Converter(cfg.vendors).convert(_pod({"nvidia.com/gpu": 1, "corp.example/pct": 50}))


def test_priority_name_is_consumed_not_left_behind() -> None:
    cfg = _config({"nvidia": {"resourcePriorityName": "corp.example/prio"}})
    conv = Converter(cfg.vendors).convert(_pod({"nvidia.com/gpu": 1, "corp.example/prio": 1}))
    assert conv.pod["spec"]["containers"][0]["resources"] == {"claims": [{"name": "team-p-app-nvidia"}]}


def test_class_driver_and_request_name() -> None:
    cfg = _config({"hygon": {"deviceClassName": "c.example", "draDriverName": "d.example", "requestName": "dcu"}})
    vendor = cfg.vendors.get("hygon")
    assert (vendor.device_class, vendor.driver, vendor.request_name) == ("c.example", "d.example", "dcu")


@pytest.mark.parametrize(
    ("key", "attr"),
    [
        ("useUUIDAnnotation", "use_uuid"),
        ("noUseUUIDAnnotation", "no_use_uuid"),
        ("useTypeAnnotation", "use_type"),
        ("noUseTypeAnnotation", "no_use_type"),
    ],
)
def test_annotation_keys(key: str, attr: str) -> None:
    cfg = _config({"hygon": {key: "corp.example/pick"}})
    (rs,) = cfg.vendors.get("hygon").resource_sets()
    assert getattr(rs, attr) == "corp.example/pick"


def test_default_memory_zero_is_the_whole_card_and_positive_is_mib() -> None:
    assert _config({"nvidia": {"defaultMemory": 0}}).vendors.get("nvidia").default_memory_mib is None
    assert _config({"nvidia": {"defaultMemory": 1024}}).vendors.get("nvidia").default_memory_mib == 1024


def test_default_cores_applies_to_pods_without_cores() -> None:
    cfg = _config({"nvidia": {"defaultCores": 30}})
    conv = Converter(cfg.vendors).convert(_pod({"nvidia.com/gpu": 1}))
    assert _request(conv)["exactly"]["capacity"]["requests"] == {"cores": "30"}


def test_default_cores_over_100_is_refused() -> None:
    with pytest.raises(UserError, match="defaultCores"):
        _config({"nvidia": {"defaultCores": 150}})


def test_reference_compute_units() -> None:
    cfg = _config({"hygon": {"referenceComputeUnits": 60}})
    conv = Converter(cfg.vendors).convert(_pod({"hygon.com/hcunum": 1, "hygon.com/hcucores": 50}))
    assert _request(conv)["exactly"]["capacity"]["requests"]["cores"] == "30"


def test_memory_factor_other_than_one_is_reported() -> None:
    tr = _translate({"hygon": {"memoryFactor": 2}})
    assert [(f.path, f.kind) for f in tr.findings] == [("hygon.memoryFactor", "ignored")]


def test_vendors_list_enables_only_those() -> None:
    cfg = _config({"vendors": ["ascend"]})
    assert cfg.vendors.enabled == ("ascend",)
    assert Converter(cfg.vendors).convert(_pod({"nvidia.com/gpu": 1})).changed is False


def test_vendors_list_with_a_foreign_vendor_reports_it() -> None:
    tr = _translate({"vendors": ["nvidia", "metax"]})
    assert tr.enabled == ["nvidia"]
    assert [(f.path, f.kind) for f in tr.findings] == [("vendors[1]", "unsupported")]


def test_vendors_list_without_a_dralab_vendor_is_refused() -> None:
    with pytest.raises(UserError, match="none of dralab's vendors"):
        _translate({"vendors": ["metax"]})


def test_dralab_config_enabled_wins_over_vendors_list() -> None:
    cfg = parse_config({"vendors": {"enabled": ["nvidia"]}}, "test", _translate({"vendors": ["ascend"]}))
    assert cfg.vendors.enabled == ("nvidia",)


def test_unknown_keys_are_reported_never_dropped() -> None:
    tr = _translate({"nvidia": {"resourceCountNmae": "x/y"}, "ascend": {"devicez": []}, "gpus": {}})
    assert {(f.path, f.kind) for f in tr.findings} == {
        ("nvidia.resourceCountNmae", "unknown"), ("ascend.devicez", "unknown"), ("gpus", "unknown"),
    }


def test_a_resource_name_used_twice_is_refused() -> None:
    with pytest.raises(UserError, match="configured by both"):
        _translate({"nvidia": {"resourceCountName": "x.example/a"}, "hygon": {"resourceCoreName": "x.example/a"}})


def test_invalid_resource_name_is_refused() -> None:
    with pytest.raises(UserError, match="not a valid resource name"):
        _translate({"nvidia": {"resourceCountName": "bad name"}})


def test_wrong_type_names_the_key() -> None:
    with pytest.raises(UserError, match=r"nvidia\.resourceCountName must be a string"):
        _translate({"nvidia": {"resourceCountName": 3}})


# -- Ascend chips -----------------------------------------------------------------------------------


def test_ascend_devices_win_over_vnpus_and_take_their_specs() -> None:
    tr = _translate({
        "ascend": {"devices": [
            {"commonWord": "Ascend310P", "chipName": "310P3", "resourceName": "huawei.com/Ascend310P"}
        ]},
        "vnpus": [{"commonWord": "Ascend310P", "chipName": "310P3", "resourceName": "huawei.com/Ascend310P",
                   "memoryCapacity": 24576, "aiCore": 8},
                  {"commonWord": "Ascend910B3", "chipName": "910B3", "resourceName": "huawei.com/Ascend910B3"}],
    })
    entry = tr.vendors["ascend"]
    assert entry["chips"] == {"Ascend310P": "310P3"}
    assert entry["chipSpecs"] == {"Ascend310P": {"memoryMiB": 24576, "aiCores": 8}}


def test_legacy_single_chip_form() -> None:
    cfg = _config({"ascend": {"resourceCountName": "huawei.com/Ascend310P"}})
    (rs,) = cfg.vendors.get("ascend").resource_sets()
    assert (rs.count, rs.memory, rs.cores) == (
        "huawei.com/Ascend310P", "huawei.com/Ascend310P-memory", "huawei.com/Ascend310P-core"
    )


def test_chip_without_a_product_name_is_refused() -> None:
    with pytest.raises(UserError, match="chipName"):
        _translate({"ascend": {"devices": [{"commonWord": "Ascend999", "resourceName": "huawei.com/Ascend999"}]}})


def test_chip_listed_twice_is_refused() -> None:
    chip = {"commonWord": "Ascend310P", "chipName": "310P3"}
    with pytest.raises(UserError, match="listed twice"):
        _translate({"vnpus": [chip, dict(chip)]})


def test_an_unlisted_chip_is_denied_as_unknown() -> None:
    cfg = load_config(None, SCHEDULER_CM)
    with pytest.raises(Denied, match="unknown Huawei Ascend NPU chip"):
        Converter(cfg.vendors).convert(_pod({"huawei.com/Ascend910B4": 1, "huawei.com/Ascend910B4-memory": 1024}))


# -- renamed resources convert ----------------------------------------------------------------------


def test_renamed_nvidia_pod_converts() -> None:
    cfg = load_config(None, RENAMED)
    conv = Converter(cfg.vendors).convert(_pod({"corp.example/vgpu": 1, "corp.example/vgpu-memory": 4096}))
    request = _request(conv)
    assert request["exactly"]["deviceClassName"] == "corp-gpu.example"
    assert request["exactly"]["capacity"]["requests"] == {"cores": "25", "memory": str(4096 * 1024 * 1024)}
    assert 'device.driver == "gpu.corp.example"' in request["exactly"]["selectors"][0]["cel"]["expression"]
    assert conv.pod["spec"]["containers"][0]["resources"] == {"claims": [{"name": "team-p-app-nvidia"}]}


def test_renamed_nvidia_default_memory_applies() -> None:
    cfg = load_config(None, RENAMED)
    conv = Converter(cfg.vendors).convert(_pod({"corp.example/vgpu": 1}))
    assert _request(conv)["exactly"]["capacity"]["requests"]["memory"] == str(2048 * 1024 * 1024)


def test_renamed_hygon_pod_converts_with_its_annotations() -> None:
    cfg = load_config(None, RENAMED)
    conv = Converter(cfg.vendors).convert(
        _pod({"corp.example/dcu": 1, "corp.example/dcu-cores": 50}, {"corp.example/use-dcu-uuid": "DCU-1"})
    )
    request = _request(conv)
    assert request["name"] == "dcu"
    assert request["exactly"]["capacity"]["requests"]["cores"] == "30"
    assert any('"DCU-1"' in s["cel"]["expression"] for s in request["exactly"]["selectors"])


def test_renamed_ascend_pod_converts() -> None:
    cfg = load_config(None, RENAMED)
    conv = Converter(cfg.vendors).convert(
        _pod({"corp.example/npu-310p": 1, "corp.example/npu-310p-memory": 8192, "corp.example/npu-310p-core": 50})
    )
    assert conv.objects[0]["metadata"]["name"] == "team-p-app-ascend310p"
    request = _request(conv)
    assert request["exactly"]["deviceClassName"] == "corp-npu.example"
    assert request["exactly"]["capacity"]["requests"] == {"cores": "50", "memory": "8589934592"}


def test_renamed_config_leaves_the_old_names_alone() -> None:
    cfg = load_config(None, RENAMED)
    assert Converter(cfg.vendors).convert(_pod({"nvidia.com/gpu": 1})).changed is False


def test_convert_and_config_show_cli(tmp_path: Path) -> None:
    pod = tmp_path / "pod.yaml"
    pod.write_text(yaml.safe_dump(_pod({"corp.example/vgpu": 1})))
    run = [sys.executable, "-m", "dralab.cli"]
    out = subprocess.run([*run, "convert", "-f", str(pod), "--hami-config", str(RENAMED)],
                         capture_output=True, text=True, check=True)
    docs = list(yaml.safe_load_all(out.stdout))
    assert [d["kind"] for d in docs] == ["Pod", "ResourceClaim"]
    shown = subprocess.run([*run, "config", "show", "--hami-config", str(SCHEDULER_CM)],
                           capture_output=True, text=True, check=True)
    view = yaml.safe_load(shown.stdout)
    chips = [r["chip"] for r in view["vendors"]["ascend"]["resources"]]
    assert chips == ["Ascend310P", "Ascend910B3"]
    assert "cambricon: unsupported" in shown.stderr
    missing = subprocess.run([*run, "config", "show", "--hami-config", str(tmp_path / "nope.yaml")],
                             capture_output=True, text=True)
    assert missing.returncode == 2 and "not found" in missing.stderr
