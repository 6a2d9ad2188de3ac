"""``dralab driver`` previews and errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from dralab.cli import main
from dralab_kit.fixtures.driver_claims import CLAIM_A_UID, lab20_claim


def _run(capsys, *args: str) -> tuple[int, str, str]:
    code = 0
    try:
        main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_slices_preview_is_lab20(capsys) -> None:
    code, out, _ = _run(capsys, "driver", "slices", "--backend", "fake", "--node", "aio-node74-arm")
    assert code == 0
    [slc] = list(yaml.safe_load_all(out))
    devices = slc["spec"]["devices"]
    assert [d["name"] for d in devices] == ["npu-0-0", "npu-1-0"]
    assert devices[0]["capacity"]["memory"]["value"] == "21525Mi"
    assert slc["spec"]["pool"]["name"] == "aio-node74-arm"


def test_slices_for_the_nvidia_inventory(capsys) -> None:
    code, out, _ = _run(capsys, "driver", "slices", "--devices", "nvidia-gpus", "--node", "gpu-node-0")
    assert code == 0
    [slc] = list(yaml.safe_load_all(out))
    assert slc["spec"]["driver"] == "hami-core-gpu.project-hami.io"
    assert slc["spec"]["devices"][0]["attributes"]["type"] == {"string": "hami-gpu"}


def test_unknown_node_is_a_one_line_error(capsys) -> None:
    code, _, err = _run(capsys, "driver", "slices", "--node", "nope")
    assert code == 2
    assert err.startswith("error: node 'nope' is not in the device inventory")
    assert "Traceback" not in err


def test_cdi_preview_of_claim_a(capsys, tmp_path: Path, library: Path) -> None:
    claim = tmp_path / "claim.yaml"
    claim.write_text(yaml.safe_dump(lab20_claim()))
    code, out, _ = _run(
        capsys,
        "driver",
        "cdi",
        "--claim",
        str(claim),
        "--state-dir",
        str(tmp_path / "s"),
        "--cdi-dir",
        str(tmp_path / "c"),
        "--enforcement-library",
        str(library),
    )
    assert code == 0
    [spec] = list(yaml.safe_load_all(out))
    assert spec["kind"] == "k8s.ascend.project-hami.io/npu"
    assert spec["devices"][0]["name"] == CLAIM_A_UID
    env = spec["devices"][0]["containerEdits"]["env"]
    assert {"NPU_MEM_QUOTA=8192", "NPU_PRIORITY=50", "ASCEND_VISIBLE_DEVICES=0"} <= set(env)
    mounts = {m["containerPath"]: m["hostPath"] for m in spec["devices"][0]["containerEdits"]["mounts"]}
    assert mounts["/usr/local/dralab/lib"] == str(library.parent)
    assert not (tmp_path / "c").exists() and not (tmp_path / "s").exists()  # a preview writes nothing


def test_cdi_preview_without_uid_is_a_clear_error(capsys, tmp_path: Path) -> None:
    doc = lab20_claim()
    del doc["metadata"]["uid"]
    claim = tmp_path / "claim.yaml"
    claim.write_text(yaml.safe_dump(doc))
    code, _, err = _run(capsys, "driver", "cdi", "--claim", str(claim))
    assert code == 2
    assert "no metadata.uid" in err


def test_cdi_preview_of_unallocated_claim(capsys, tmp_path: Path) -> None:
    doc = lab20_claim()
    del doc["status"]
    claim = tmp_path / "claim.yaml"
    claim.write_text(yaml.safe_dump(doc))
    code, _, err = _run(capsys, "driver", "cdi", "--claim", str(claim))
    assert code == 2
    assert "no status.allocation" in err


@pytest.mark.parametrize("command", ["run", "slices", "cdi"])
def test_help_has_an_example(capsys, command: str) -> None:
    code, out, _ = _run(capsys, "driver", command, "--help")
    assert code == 0
    assert "Example:" in out
