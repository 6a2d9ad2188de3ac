"""PyTorch under vcore on a real GPU: mem_get_info reports the quota, an allocation past it raises
OutOfMemoryError, and a loop of 2000 large matmuls under CUDA_DEVICE_SM_LIMIT_0 is timed (reported, not
judged). Prints key=value lines for check.sh; exit 0 unless a check fails; 3 when torch is missing."""

from __future__ import annotations

import os
import sys
import time

try:
    import torch
except ImportError:
    print("torch status=missing")
    sys.exit(3)

MIB = 1024 * 1024


def main() -> int:
    limit_mib = int(os.environ["VCORE_CHECK_LIMIT_MIB"])
    mode = sys.argv[1] if len(sys.argv) > 1 else "memory"
    if mode == "timing":
        a = torch.randn(4096, 4096, device="cuda")
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(2000):
            a = a @ a
            a = a / a.norm()
        torch.cuda.synchronize()
        print(f"timing seconds={time.perf_counter() - t0:.3f}")
        return 0
    free, total = torch.cuda.mem_get_info()
    print(f"torch mem_get_info total_mib={total // MIB} free_mib={free // MIB}")
    ok = total // MIB == limit_mib
    half = torch.empty(limit_mib // 2 * MIB, dtype=torch.uint8, device="cuda")
    try:
        torch.empty(limit_mib * MIB, dtype=torch.uint8, device="cuda")
        print("torch oom=no")
        ok = False
    except torch.cuda.OutOfMemoryError as exc:
        print(f"torch oom=yes message={str(exc).splitlines()[0][:160]!r}")
    del half
    torch.cuda.empty_cache()
    free, total = torch.cuda.mem_get_info()
    print(f"torch after_free total_mib={total // MIB} free_mib={free // MIB}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
