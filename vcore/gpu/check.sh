#!/usr/bin/env bash
# vcore on a real NVIDIA GPU: one script, a few minutes at most. See gpu/README.md for what each
# check proves. Prints one "CHECK <name> PASS|FAIL|SKIP ..." line per check; exits 1 if any failed.
# Needs gcc + make and the NVIDIA driver; nvcc and python3 with torch are optional (SKIP otherwise).
# Usage: vcore/gpu/check.sh [LIMIT_MIB]     (default 4096)
set -u
cd "$(dirname "$0")/.."
LIMIT_MIB=${1:-4096}
OUT=${OUT:-$(mktemp -d)}
failed=0
report() { echo "CHECK $1 $2 ${3:-}"; [ "$2" = FAIL ] && failed=1; return 0; }
kv() { sed -n "s/.*\b$2=\([^ ]*\).*/\1/p" <<<"$1" | head -1; }

make -s -j"$(nproc)" all >"$OUT/make.log" 2>&1 || { cat "$OUT/make.log"; echo "CHECK build FAIL"; exit 1; }
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader

LIB=$PWD/build/libvcore.so
vc_env() { env LD_PRELOAD="$LIB" CUDA_DEVICE_MEMORY_LIMIT_0="${LIMIT_MIB}m" \
    CUDA_DEVICE_MEMORY_SHARED_CACHE="$OUT/vcore-$1.cache" VCORE_CHECK_LIMIT_MIB="$LIMIT_MIB" "${@:2}"; }

# 1. Driver API via cuGetProcAddress (the probe): refused past the quota with code 2, total = quota.
steps=$((LIMIT_MIB / 4 + 1))
out=$(vc_env probe build/vcore-probe --vendor nvidia --steps "$steps" 2>"$OUT/probe.err")
echo "$out" >"$OUT/probe.out"
total=$(kv "$(grep '^info when=before' <<<"$out")" total_mib)
code=$(kv "$(grep '^result' <<<"$out")" code)
granted=$(kv "$(grep '^result' <<<"$out")" granted)
if [ "${total%.*}" = "$LIMIT_MIB" ] && [ "$code" = 2 ] && [ "$granted" = 3 ] && grep -q "quota exceeded" "$OUT/probe.err"; then
    report probe-driver-api PASS "total_mib=$total granted=$granted code=$code"
else
    report probe-driver-api FAIL "total_mib=$total granted=$granted code=$code (see $OUT/probe.*)"
fi

# 2. Pass-through: without a limit the probe sees the real card.
out=$(env LD_PRELOAD="$LIB" build/vcore-probe --vendor nvidia --steps 1024 --max-steps 2 2>&1)
total=$(kv "$(grep '^info when=before' <<<"$out")" total_mib)
if [ -n "$total" ] && [ "${total%.*}" -gt "$LIMIT_MIB" ]; then report passthrough PASS "total_mib=$total"
else report passthrough FAIL "total_mib=$total"; fi

# 3. CUDA runtime program (libcudart -> dlopen libcuda -> cuGetProcAddress), when nvcc exists.
if command -v nvcc >/dev/null; then
    if nvcc -O2 -o "$OUT/cudart_check" gpu/cudart_check.cu >"$OUT/nvcc.log" 2>&1; then
        out=$(vc_env cudart "$OUT/cudart_check" 512 2>"$OUT/cudart.err")
        total=$(kv "$(grep '^info when=before' <<<"$out")" total_mib)
        name=$(kv "$(grep '^result' <<<"$out")" name)
        granted=$(kv "$(grep '^result' <<<"$out")" granted_mib)
        if [ "$total" = "$LIMIT_MIB" ] && [ "$name" = cudaErrorMemoryAllocation ] && [ "$granted" -le "$LIMIT_MIB" ]; then
            report cudart PASS "total_mib=$total granted_mib=$granted error=$name"
        else report cudart FAIL "total_mib=$total granted_mib=$granted error=$name"; fi
    else report cudart FAIL "nvcc failed: $(tail -3 "$OUT/nvcc.log")"; fi
else report cudart SKIP "no nvcc"; fi

# 4. PyTorch: mem_get_info = quota, OOM past it; again with expandable segments (cuMemCreate path).
PY=${PYTHON:-python3}
for conf in "" "expandable_segments:True"; do
    name=torch${conf:+-expandable}
    out=$(vc_env "$name" env PYTORCH_CUDA_ALLOC_CONF="$conf" timeout 120 "$PY" gpu/torch_check.py memory 2>"$OUT/$name.err")
    rc=$?
    if [ $rc = 3 ]; then report "$name" SKIP "torch not installed"
    elif [ $rc = 0 ]; then report "$name" PASS "$(tr '\n' ' ' <<<"$out")"
    else report "$name" FAIL "$(tr '\n' ' ' <<<"$out") $(tail -2 "$OUT/$name.err")"; fi
done

# 5. NVML as nvidia-smi shows it inside the container.
if command -v nvidia-smi >/dev/null; then
    smi=$(vc_env nvml nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i 0 2>&1 | head -1)
    if [ "${smi// /}" = "$LIMIT_MIB" ]; then report nvml PASS "memory.total=$smi MiB"
    else report nvml FAIL "memory.total=$smi (nvidia-smi may not resolve NVML through dlsym)"; fi
else report nvml SKIP "no nvidia-smi"; fi

# 6. Compute throttle: timing only, reported for the record (no pass/fail: unmeasured so far).
if "$PY" -c 'import torch' 2>/dev/null; then
    free=$(vc_env t1 timeout 120 "$PY" gpu/torch_check.py timing 2>/dev/null)
    half=$(vc_env t2 env CUDA_DEVICE_SM_LIMIT_0=50 timeout 120 "$PY" gpu/torch_check.py timing 2>/dev/null)
    report sm-throttle INFO "unlimited $(kv "$free" seconds)s, CUDA_DEVICE_SM_LIMIT_0=50 $(kv "$half" seconds)s"
fi

echo "artifacts in $OUT"
exit $failed
