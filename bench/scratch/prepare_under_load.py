"""Scratch calibration: the driver's Prepare and Unprepare, thread CPU per claim, alone and beside busy neighbours.

Why: the fleet runs saw a pod's driver work grow on larger fleets for dralab's pods and the baseline's
alike, and the README had put that down to a busier machine. This measures how much a busy machine adds
to the same code: one thread prepares and unprepares N claims in memory (no apiserver), first alone,
then beside two processes spinning on arithmetic, then beside two copying 64 MiB buffers, then alone
again. Not a `dralab bench`: no target, one run, kept with its output for README "Scale".

    .venv/bin/python bench/scratch/prepare_under_load.py --claims 400 \
        --out bench/results/scratch/prepare-under-load.json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import statistics
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from dralab.driver.cdi import ClaimRef
from dralab.driver.claims import InMemoryClaimSource
from dralab.driver.devices import BackendOptions
from dralab.driver.devices.fake import FakeBackend
from dralab.driver.library import stub_library
from dralab.driver.state import DriverState
from dralab.model.vendors import load_vendor_table
from dralab_kit.fixtures.driver_claims import NAMESPACE, NODE, lab20_claim

LOADS = ("none", "cpu2", "mem2", "none")
DEVICES = ("npu-0-0", "npu-1-0")  # the fake backend's two 310P3 on Lab 20's node


def _spin(stop: Any) -> None:
    x = 0
    while not stop.is_set():
        for i in range(100_000):
            x += i * i


def _stream(stop: Any) -> None:
    buf = bytearray(64 << 20)
    while not stop.is_set():
        bytes(buf)


def measure(load: str, claims: int) -> dict[str, Any]:
    """Thread CPU per Prepare and per Unprepare of ``claims`` claims beside ``load`` (in a temp root)."""
    root = Path(tempfile.mkdtemp(prefix="prepload", dir="/tmp"))
    stop = mp.Event()
    target = {"cpu2": _spin, "mem2": _stream}.get(load)
    procs = [mp.Process(target=target, args=(stop,)) for _ in range(2)] if target else []
    for proc in procs:
        proc.start()
    try:
        lib = root / "libvcore.so"
        lib.write_bytes(stub_library())
        objs = [lab20_claim(uid=str(uuid.uuid4()), name=f"c{i}", device=DEVICES[i % 2], share=str(uuid.uuid4()))
                for i in range(claims)]
        state = DriverState(vendor=load_vendor_table().get("ascend"), node=NODE,
                            backend=FakeBackend.from_options(BackendOptions(node=NODE, state_dir=root / "state")),
                            claims=InMemoryClaimSource(objs), cdi_dir=root / "cdi", state_dir=root / "state",
                            library=lib).open()
        prepare, unprepare = [], []
        for obj in objs:
            ref = ClaimRef(NAMESPACE, obj["metadata"]["name"], obj["metadata"]["uid"])
            t = time.thread_time()
            answer = state.prepare([ref])[ref.uid]
            prepare.append(time.thread_time() - t)
            if answer.error:
                raise RuntimeError(answer.error)
            t = time.thread_time()
            state.unprepare([ref])
            unprepare.append(time.thread_time() - t)
        return {"load": load, "claims": claims,
                "prepare_ms": {"mean": round(1e3 * statistics.mean(prepare), 3),
                               "p50": round(1e3 * statistics.median(prepare), 3)},
                "unprepare_ms": {"mean": round(1e3 * statistics.mean(unprepare), 3),
                                 "p50": round(1e3 * statistics.median(unprepare), 3)}}
    finally:
        stop.set()
        for proc in procs:
            proc.join()
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--claims", type=int, default=400)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    result = {"measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "commit": commit,
              "cpus": os.cpu_count(), "loadavg_before": os.getloadavg(),
              "runs": [measure(load, args.claims) for load in LOADS], "loadavg_after": os.getloadavg()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result["runs"]))


if __name__ == "__main__":
    main()
