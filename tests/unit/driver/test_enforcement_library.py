"""Fail closed: a claim that needs the enforcement library is refused while the library is unusable.

The check (dralab.driver.library) with bytes; the refusal through DriverState, the gRPC socket,
readiness, the metrics and ``dralab driver cdi``; ``enforcement: none`` as the explicit opt-out.
Every file lives under tmp_path; no library is built (a 64-byte ELF header is all the check reads).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import grpc
import httpx
import pytest
import yaml
from click.testing import CliRunner

from dralab.config import parse_config
from dralab.driver import library as lib
from dralab.driver.cdi import ClaimRef
from dralab.driver.claims import InMemoryClaimSource
from dralab.driver.cli import driver as driver_cli
from dralab.driver.devices import BackendOptions
from dralab.driver.devices.fake import FakeBackend
from dralab.driver.metrics import DriverMetrics
from dralab.driver.proto import dra_v1_pb2, dra_v1_pb2_grpc, pluginregistration_pb2, pluginregistration_pb2_grpc
from dralab.driver.publisher import needs_publish
from dralab.driver.runner import DriverProcess, RunOptions
from dralab.driver.slices import ENFORCEMENT_LABEL, build_slices
from dralab.driver.state import DriverState
from dralab.errors import UserError
from dralab.model.vendors import load_vendor_table
from dralab_kit.fixtures.driver_claims import CLAIM_A, CLAIM_A_UID, DRIVER, NAMESPACE, NODE, lab20_claim
from dralab_kit.fixtures.logs import kept_records

REF_A = ClaimRef(NAMESPACE, CLAIM_A, CLAIM_A_UID)
SPEC_NAME = f"k8s.ascend.project-hami.io-npu_{CLAIM_A_UID}.yaml"
HERE = lib.node_machine()
OTHER = lib.EM_AARCH64 if lib.NODE_MACHINES.get(HERE) == lib.EM_X86_64 else lib.EM_X86_64
FIX = "the driver's init container installs it (see its logs), or set driver.enforcementLibrary"


# -- the pure check ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("head", "machine", "reason", "problem"),
    [
        (FileNotFoundError(2, "No such file or directory"), "x86_64", "missing", "is missing"),
        (NotADirectoryError(20, "Not a directory"), "x86_64", "missing", "is missing"),
        (IsADirectoryError(21, "Is a directory"), "x86_64", "unreadable", "cannot be read (Is a directory)"),
        (PermissionError(13, "Permission denied"), "x86_64", "unreadable", "cannot be read (Permission denied)"),
        (b"", "x86_64", "not_elf", "is empty"),
        (b"#!/bin/sh\nexit 0\n", "x86_64", "not_elf", "is not an ELF file (it starts with 23 21 2f 62)"),
        (b"\x7fELF\x02\x01", "x86_64", "not_elf", "truncated"),
        (lib.elf_header(lib.EM_AARCH64), "x86_64", "wrong_machine", "built for aarch64 (ELF e_machine 183)"),
        (lib.elf_header(lib.EM_X86_64), "aarch64", "wrong_machine", "built for x86_64 (ELF e_machine 62)"),
        (lib.elf_header(40), "arm64", "wrong_machine", "built for arm (ELF e_machine 40)"),
        (lib.elf_header(9999), "x86_64", "wrong_machine", "built for another machine (ELF e_machine 9999)"),
        (lib.elf_header(elf_class=1), "x86_64", "wrong_machine", "32-bit"),
        (lib.elf_header(e_type=2), "x86_64", "not_shared_object", "is an ELF executable, not a shared library"),
        (lib.elf_header(), "riscv64", "unknown_machine", "'riscv64' is neither x86_64 nor aarch64"),
    ],
)
def test_each_unusable_library_has_a_reason_and_a_message(head, machine: str, reason: str, problem: str) -> None:
    status = lib.check("/x/libvcore.so", head, machine)
    assert (status.usable, status.reason) == (False, reason)
    assert problem in status.problem
    message = status.refusal("hami-core")
    assert message.startswith("enforcement library /x/libvcore.so ")
    assert "vendor profile hami-core" in message and FIX in message
    assert message.endswith("to run without enforcement set driver.enforcement: none")


@pytest.mark.parametrize(("machine", "em"), [("x86_64", 62), ("amd64", 62), ("aarch64", 183), ("arm64", 183)])
def test_a_shared_object_for_the_node_passes(machine: str, em: int) -> None:
    assert lib.check("/x/libvcore.so", lib.elf_header(em), machine).usable
    assert lib.check("/x/libvcore.so", lib.stub_library(machine), machine).usable


def test_the_decision() -> None:
    ok, bad = lib.LibraryStatus("/l"), lib.missing("/l")
    assert lib.decide("required", "hami-core", ok) == lib.ENFORCE
    assert lib.decide("required", "hami-core", bad) == lib.REFUSE
    assert lib.decide("required", "hami-core", None) == lib.REFUSE
    assert lib.decide("none", "hami-core", bad) == lib.SKIP  # the operator's explicit opt-out
    assert lib.decide("required", "none", bad) == lib.SKIP  # the profile enforces nothing: no library needed
    assert lib.check_mode(None) == lib.check_mode("") == "required"
    with pytest.raises(UserError, match="--enforcement must be 'required' or 'none', got 'off'"):
        lib.check_mode("off", "--enforcement")


def test_the_config_key_defaults_to_required_and_refuses_other_values() -> None:
    assert parse_config({}).driver.enforcement == "required"
    assert parse_config({"driver": {"enforcement": "none"}}).driver.enforcement == "none"
    with pytest.raises(UserError, match=r"driver\.enforcement must be 'required' or 'none', got 'off'"):
        parse_config({"driver": {"enforcement": "off"}}, "c.yaml")


# -- Prepare -------------------------------------------------------------------------------------


def _state(root: Path, library: Path, **kw) -> DriverState:
    table = kw.pop("table", None) or load_vendor_table()
    return DriverState(
        vendor=table.get("ascend"),
        node=NODE,
        backend=FakeBackend.from_options(BackendOptions(node=NODE, state_dir=root / "s")),
        claims=InMemoryClaimSource([lab20_claim()]),
        cdi_dir=root / "cdi",
        state_dir=root / "s",
        library=library,
        boot_id="b",
        **kw,
    ).open()


def _missing(path: Path) -> None:
    pass


def _directory(path: Path) -> None:
    path.mkdir()  # unreadable as a file, even for root (chmod 000 would not stop root)


def _other_machine(path: Path) -> None:
    path.write_bytes(lib.elf_header(OTHER))


def _text(path: Path) -> None:
    path.write_text("not a library\n")


@pytest.mark.parametrize(
    ("make", "reason", "problem"),
    [
        (_missing, "missing", "is missing"),
        (_directory, "unreadable", "cannot be read (Is a directory)"),
        (_other_machine, "wrong_machine", f"not for this node's {HERE}"),
        (_text, "not_elf", "is not an ELF file"),
    ],
)
def test_prepare_refuses_the_claim_and_counts_it(
    tmp_path: Path, make: Callable[[Path], None], reason: str, problem: str
) -> None:
    path = tmp_path / "lib" / "libvcore.so"
    path.parent.mkdir()
    make(path)
    metrics = DriverMetrics()
    state = _state(tmp_path, path, metrics=metrics)
    result = state.prepare([REF_A])[CLAIM_A_UID]
    assert result.error.startswith(f"enforcement library {path} ")
    assert problem in result.error and FIX in result.error and "driver.enforcement: none" in result.error
    assert "vendor profile hami-vnpu-core" in result.error
    assert result.devices == ()
    assert not (tmp_path / "cdi" / SPEC_NAME).exists()  # refused before any file of the claim is written
    assert CLAIM_A_UID not in state.prepared_claims()
    sample = metrics.registry.get_sample_value
    assert sample("dralab_driver_enforcement_refusals_total", {"driver": DRIVER, "reason": reason}) == 1
    assert sample("dralab_driver_errors_total", {"driver": DRIVER, "call": "prepare", "reason": "enforcement_library"})
    state.prepare([REF_A])
    assert sample("dralab_driver_enforcement_refusals_total", {"driver": DRIVER, "reason": reason}) == 2
    assert sample("dralab_driver_enforcement_mode", {"driver": DRIVER, "mode": "required",
                                                     "profile": "hami-vnpu-core"}) == 1


def test_an_injected_reader_that_fails_is_unreadable(tmp_path: Path, library: Path) -> None:
    def denied(path: Path) -> bytes:
        raise PermissionError(13, "Permission denied", str(path))

    state = _state(tmp_path, library, read_library=denied)
    error = state.prepare([REF_A])[CLAIM_A_UID].error
    assert error.startswith(f"enforcement library {library} cannot be read (Permission denied)")


def test_the_node_machine_is_what_the_library_is_checked_against(tmp_path: Path, library: Path) -> None:
    other = "aarch64" if OTHER == lib.EM_AARCH64 else "x86_64"
    state = _state(tmp_path, library, machine=other)
    assert f"not for this node's {other}" in state.prepare([REF_A])[CLAIM_A_UID].error


def test_a_fixed_library_is_used_at_the_next_prepare(tmp_path: Path) -> None:
    path = tmp_path / "lib" / "libvcore.so"
    path.parent.mkdir()
    state = _state(tmp_path, path)
    assert state.prepare([REF_A])[CLAIM_A_UID].error
    assert state.enforcement_ready()[0] is False
    path.write_bytes(lib.stub_library())
    assert state.enforcement_ready() == (True, f"{DRIVER}: enforcement library {path} ok")
    assert state.prepare([REF_A])[CLAIM_A_UID].error == ""
    spec = yaml.safe_load((tmp_path / "cdi" / SPEC_NAME).read_text())
    targets = {m["containerPath"] for m in spec["devices"][0]["containerEdits"]["mounts"]}
    assert {"/usr/local/dralab/lib", "/etc/ld.so.preload"} <= targets


def test_enforcement_none_prepares_without_the_library_and_warns(tmp_path: Path) -> None:
    with kept_records("dralab.driver.state") as records:
        metrics = DriverMetrics()
        state = _state(tmp_path, tmp_path / "absent" / "libvcore.so", enforcement_mode="none", metrics=metrics)
    [warning] = [r for r in records if r.levelno == logging.WARNING]
    assert "enforcement is off (driver.enforcement: none)" in warning.getMessage()
    assert state.enforcement_ready()[0] is True
    result = state.prepare([REF_A])[CLAIM_A_UID]
    assert result.error == ""
    spec = yaml.safe_load((tmp_path / "cdi" / SPEC_NAME).read_text())
    edits = spec["devices"][0]["containerEdits"]
    targets = {m["containerPath"] for m in edits["mounts"]}
    assert "/usr/local/dralab/lib" not in targets and "/etc/ld.so.preload" not in targets
    assert "NPU_MEM_QUOTA=8192" in edits["env"]  # the profile's env stays: an image's own library may read it
    assert "driver.enforcement is none" in spec["annotations"]["dralab.io/notes"]
    sample = metrics.registry.get_sample_value
    assert sample("dralab_driver_enforcement_mode", {"driver": DRIVER, "mode": "none", "profile": "hami-vnpu-core"})
    assert sample("dralab_driver_enforcement_refusals_total", {"driver": DRIVER, "reason": "missing"}) is None


def test_a_vendor_profile_without_enforcement_needs_no_library(tmp_path: Path) -> None:
    table = load_vendor_table({"ascend": {"enforcement": "none"}})
    state = _state(tmp_path, tmp_path / "absent" / "libvcore.so", table=table)
    assert state.effective_mode == "none" and state.enforcement_ready()[0] is True
    assert state.prepare([REF_A])[CLAIM_A_UID].error == ""


# -- the driver process: gRPC answer, readiness, metrics -----------------------------------------


def _register(registry: Path) -> None:
    with grpc.insecure_channel(f"unix://{registry / f'{DRIVER}-reg.sock'}") as ch:
        stub = pluginregistration_pb2_grpc.RegistrationStub(ch)
        stub.GetInfo(pluginregistration_pb2.InfoRequest(), timeout=5)
        stub.NotifyRegistrationStatus(pluginregistration_pb2.RegistrationStatus(plugin_registered=True), timeout=5)


def _prepare(plugin: Path) -> dra_v1_pb2.NodePrepareResourcesResponse:
    req = dra_v1_pb2.NodePrepareResourcesRequest(claims=[dra_v1_pb2.Claim(namespace=NAMESPACE, name=CLAIM_A,
                                                                         uid=CLAIM_A_UID)])
    with grpc.insecure_channel(f"unix://{plugin / DRIVER / 'dra.sock'}") as ch:
        return dra_v1_pb2_grpc.DRAPluginStub(ch).NodePrepareResources(req, timeout=30)


def test_readiness_flips_with_the_library_and_the_kubelet_gets_the_error(short_tmp: Path) -> None:
    path = short_tmp / "lib" / "libvcore.so"
    path.parent.mkdir()
    opts = RunOptions(node=NODE, backend="fake", plugin_dir=str(short_tmp / "p"), registry_dir=str(short_tmp / "r"),
                      cdi_dir=str(short_tmp / "cdi"), state_dir=str(short_tmp / "s"), enforcement_library=str(path),
                      publish=False, metrics_port=0, metrics_authorization=False)
    proc = DriverProcess(opts, claims=InMemoryClaimSource([lab20_claim()])).start()
    try:
        _register(short_tmp / "r")
        assert proc.status is not None
        base = f"http://127.0.0.1:{proc.status.port}"
        ready = httpx.get(f"{base}/readyz")
        assert ready.status_code == 503
        assert ready.text.startswith(f"claims are refused: {DRIVER}: enforcement library {path} is missing")
        assert httpx.get(f"{base}/healthz").status_code == 200  # not a restart: a restart would not fix it
        error = _prepare(short_tmp / "p").claims[CLAIM_A_UID].error  # the kubelet shows it as the pod's event
        assert error.startswith(f"enforcement library {path} is missing") and FIX in error
        text = httpx.get(f"{base}/metrics").text
        assert f'dralab_driver_enforcement_refusals_total{{driver="{DRIVER}",reason="missing"}} 1.0' in text
        assert (f'dralab_driver_enforcement_mode{{driver="{DRIVER}",mode="required",profile="hami-vnpu-core"}} 1.0'
                in text)
        path.write_bytes(lib.stub_library())
        assert httpx.get(f"{base}/readyz").status_code == 200
        assert _prepare(short_tmp / "p").claims[CLAIM_A_UID].error == ""
    finally:
        proc.stop()


def test_the_run_option_and_the_config_key_choose_the_mode(short_tmp: Path, tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("driver:\n  enforcement: none\n")
    opts = RunOptions(node=NODE, backend="fake", plugin_dir=str(short_tmp / "p"), registry_dir=str(short_tmp / "r"),
                      cdi_dir=str(short_tmp / "cdi"), state_dir=str(short_tmp / "s"), config=str(config),
                      enforcement_library=str(short_tmp / "absent.so"), publish=False)
    proc = DriverProcess(opts, claims=InMemoryClaimSource([lab20_claim()])).start()
    try:
        assert proc.served[0].state.effective_mode == "none"
        assert _prepare(short_tmp / "p").claims[CLAIM_A_UID].error == ""
    finally:
        proc.stop()
    with pytest.raises(UserError, match="--enforcement must be 'required' or 'none'"):
        DriverProcess(RunOptions(node=NODE, backend="fake", state_dir=str(short_tmp / "s2"), enforcement="off",
                                 publish=False), claims=InMemoryClaimSource()).start()


# -- the mode on the slices (what the monitor watches) -------------------------------------------


def test_slices_carry_the_mode_and_a_changed_mode_republishes(tmp_path: Path) -> None:
    vendor = load_vendor_table().get("ascend")
    devices = FakeBackend.from_options(BackendOptions(node=NODE, state_dir=tmp_path, dry_run=True)).enumerate()
    [required] = build_slices(vendor, NODE, devices, enforcement="required")
    assert required["metadata"]["labels"][ENFORCEMENT_LABEL] == "required"
    [none] = build_slices(vendor, NODE, devices, enforcement="none")
    served = {**required, "metadata": {**required["metadata"], "name": "s-1"}}
    assert needs_publish([served], [required], NODE) == (False, 1)
    assert needs_publish([served], [none], NODE) == (True, 1)
    served["metadata"]["labels"] = {**served["metadata"]["labels"], "team": "a"}  # labels others add are theirs
    assert needs_publish([served], [required], NODE) == (False, 1)


# -- dralab driver cdi ---------------------------------------------------------------------------


def _claim_file(tmp_path: Path) -> Path:
    claim = tmp_path / "claim.yaml"
    claim.write_text(yaml.safe_dump(lab20_claim()))
    return claim


def _cdi_args(tmp_path: Path, library: Path, *extra: str) -> list[str]:
    return ["cdi", "--claim", str(_claim_file(tmp_path)), "--state-dir", str(tmp_path / "s"),
            "--cdi-dir", str(tmp_path / "c"), "--enforcement-library", str(library), *extra]


def test_cdi_preview_fails_like_prepare(tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent" / "libvcore.so"
    result = CliRunner().invoke(driver_cli, _cdi_args(tmp_path, missing))
    assert result.exit_code != 0
    assert isinstance(result.exception, UserError)
    message = str(result.exception)
    assert message.startswith(f"enforcement library {missing} is missing") and FIX in message
    assert result.output == ""  # no spec printed


def test_cdi_preview_exits_2_with_the_message(capsys, tmp_path: Path) -> None:
    from dralab.cli import main

    missing = tmp_path / "nonexistent" / "libvcore.so"
    with pytest.raises(SystemExit) as exited:
        main(["driver", *_cdi_args(tmp_path, missing)])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: enforcement library {missing} is missing") and "Traceback" not in err


def test_cdi_preview_with_the_opt_out_prints_a_spec_without_the_library(tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent" / "libvcore.so"
    result = CliRunner().invoke(driver_cli, _cdi_args(tmp_path, missing, "--enforcement", "none"))
    assert result.exit_code == 0, result.output
    [spec] = list(yaml.safe_load_all(result.output))
    targets = {m["containerPath"] for m in spec["devices"][0]["containerEdits"]["mounts"]}
    assert "/etc/ld.so.preload" not in targets and "/usr/local/dralab/lib" not in targets


def test_cdi_preview_with_a_usable_library_mounts_it(tmp_path: Path, library: Path) -> None:
    result = CliRunner().invoke(driver_cli, _cdi_args(tmp_path, library))
    assert result.exit_code == 0, result.output
    [spec] = list(yaml.safe_load_all(result.output))
    mounts = {m["containerPath"]: m["hostPath"] for m in spec["devices"][0]["containerEdits"]["mounts"]}
    assert mounts["/usr/local/dralab/lib"] == str(library.parent)
