"""The NVML backend with a fake NVML module at the Python boundary."""

from __future__ import annotations

import types
from pathlib import Path

import pytest
import yaml

from dralab.driver.devices.nvidia import NvidiaBackend, model_of, toolkit_device_names
from dralab.errors import UserError
from dralab.model.vendors import load_vendor_table

GPUS = [
    ("GPU-5a1c2b3d-0e4f-4a6b-8c9d-0123456789ab", "NVIDIA L4", 24152899584, "00000000:3B:00.0"),
    ("GPU-9f8e7d6c-5b4a-4392-8170-fedcba987654", "NVIDIA L4", 24152899584 + 4096, "00000000:86:00.0"),
]


def fake_nvml(gpus=GPUS, fail: bool = False) -> types.ModuleType:
    mod = types.ModuleType("pynvml")

    class NVMLError(Exception):
        pass

    state = {"init": 0}

    def init():
        if fail:
            raise NVMLError("Driver Not Loaded")
        state["init"] += 1

    mod.NVMLError = NVMLError
    mod.nvmlInit = init
    mod.nvmlShutdown = lambda: state.__setitem__("init", state["init"] - 1)
    mod.nvmlDeviceGetCount = lambda: len(gpus)
    mod.nvmlDeviceGetHandleByIndex = lambda i: i
    mod.nvmlDeviceGetUUID = lambda h: gpus[h][0]
    mod.nvmlDeviceGetName = lambda h: gpus[h][1].encode()  # older bindings return bytes
    mod.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(total=gpus[h][2], used=0, free=gpus[h][2])
    mod.nvmlDeviceGetMinorNumber = lambda h: h
    mod.nvmlDeviceGetPciInfo = lambda h: types.SimpleNamespace(busId=gpus[h][3])
    mod.state = state
    return mod


def _backend(tmp_path: Path, nvml=None) -> NvidiaBackend:
    return NvidiaBackend(nvml=nvml or fake_nvml(), vendor=load_vendor_table().get("nvidia"), cdi_dirs=(str(tmp_path),))


def test_discovery(tmp_path: Path) -> None:
    nvml = fake_nvml()
    devices = _backend(tmp_path, nvml).enumerate()
    assert [(d.name, d.uuid, d.product_name, d.model, d.index) for d in devices] == [
        ("gpu-0", GPUS[0][0], "NVIDIA L4", "L4", 0),
        ("gpu-1", GPUS[1][0], "NVIDIA L4", "L4", 1),
    ]
    assert {d.memory_bytes for d in devices} == {23034 * 2**20}  # whole MiB, as published
    assert nvml.state["init"] == 0  # shut down again


def test_nvml_failure_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="NVML discovery failed"):
        _backend(tmp_path, fake_nvml(fail=True)).enumerate()


def test_toolkit_ids_by_uuid_or_index(tmp_path: Path) -> None:
    spec = {
        "cdiVersion": "0.5.0",
        "kind": "nvidia.com/gpu",
        "devices": [{"name": GPUS[0][0]}, {"name": "1"}, {"name": "all"}],
    }
    (tmp_path / "nvidia.yaml").write_text(yaml.safe_dump(spec))
    backend = _backend(tmp_path)
    gpu0, gpu1 = backend.enumerate()
    assert backend.edits([gpu0]).extra_cdi_ids == (f"nvidia.com/gpu={GPUS[0][0]}",)
    assert backend.edits([gpu1]).extra_cdi_ids == ("nvidia.com/gpu=1",)
    assert backend.edits([gpu0, gpu1]).notes == ()


def test_missing_toolkit_spec_is_said_clearly(tmp_path: Path) -> None:
    backend = _backend(tmp_path)
    edits = backend.edits(backend.enumerate()[:1])
    assert edits.extra_cdi_ids == ()
    assert "nvidia-ctk cdi generate" in edits.notes[0]
    assert GPUS[0][0] in edits.notes[0]


def test_toolkit_scan_skips_garbage(tmp_path: Path) -> None:
    (tmp_path / "broken.yaml").write_text(": : :\n  - [")
    (tmp_path / "other.json").write_text('{"kind": "vendor.com/x", "devices": [{"name": "a"}]}')
    assert toolkit_device_names([str(tmp_path), str(tmp_path / "absent")], "nvidia.com/gpu") == set()


def test_model_names() -> None:
    assert model_of("NVIDIA A100-SXM4-40GB") == "A100-SXM4-40GB"
    assert model_of("Tesla V100-SXM2-16GB") == "V100-SXM2-16GB"
