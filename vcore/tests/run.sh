#!/bin/sh
# Run the C tests against the fake runtimes with libvcore.so preloaded (make -C vcore test).
# Each program checks itself and exits non-zero on failure; pytest (tests/unit/vcore) runs the same
# programs with more scenarios (SIGKILL reclaim, dead lock holder, corrupt region, benchmarks).
set -eu
cd "$(dirname "$0")/.."
B=$PWD/build
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export LD_LIBRARY_PATH="$B/fake" VCORE_FAKE_TOTAL_MIB=21525
P="$B/libvcore.so"
run() { name=$1; shift; printf '%-28s' "$name"; if "$@" >"$T/out" 2>&1; then echo ok; else echo FAIL; cat "$T/out"; exit 1; fi; }
run quota          env LD_PRELOAD="$P" CUDA_DEVICE_MEMORY_LIMIT_0=1024m CUDA_DEVICE_MEMORY_SHARED_CACHE="$T/q.cache" "$B/tests/t_cuda" quota
run passthrough    env LD_PRELOAD="$P" "$B/tests/t_cuda" passthrough
run procaddr       env LD_PRELOAD="$P" CUDA_DEVICE_MEMORY_LIMIT=1g CUDA_DEVICE_MEMORY_SHARED_CACHE="$T/p.cache" "$B/tests/t_procaddr"
run procaddr-plain env LD_PRELOAD="$P" "$B/tests/t_procaddr" passthrough
run nvml           env LD_PRELOAD="$P" CUDA_DEVICE_MEMORY_LIMIT_0=1024m CUDA_DEVICE_MEMORY_SHARED_CACHE="$T/n.cache" "$B/tests/t_nvml"
run acl            env LD_PRELOAD="$P" NPU_MEM_QUOTA=8192 NPU_LOCAL_SHM_PATH="$T/a.cache" "$B/tests/t_acl"
run acl-plain      env LD_PRELOAD="$P" "$B/tests/t_acl" passthrough
run race-8         env LD_PRELOAD="$P" CUDA_DEVICE_MEMORY_LIMIT_0=1024m CUDA_DEVICE_MEMORY_SHARED_CACHE="$T/r.cache" "$B/tests/t_race" 8 "$T/race.state"
run threads        env LD_PRELOAD="$P" CUDA_DEVICE_MEMORY_LIMIT_0=64m CUDA_DEVICE_MEMORY_SHARED_CACHE="$T/s.cache" "$B/tests/t_stress" 8 3000
