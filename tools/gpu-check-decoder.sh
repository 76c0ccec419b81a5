#!/usr/bin/env bash
# The CUDA target on the GPU machine (issue 9), in one call of under 10 minutes: configures and builds the
# GPU tests and bench/cuda_decoder (Release, sm_90) while bench/pytorch_decoder_baseline.py measures HF
# transformers on the GPU (so the build's CPU time overlaps PyTorch's GPU time), then runs `ctest -L gpu`,
# compute-sanitizer memcheck and racecheck on the decoder kernel tests, and the decoder benchmark alone
# on the GPU. Logs and JSON go to $OUT (at most 8 files); a summary table is printed last.
#   OUT=/tmp/out ./tools/gpu-check-decoder.sh        (NO_PYTORCH=1 skips the baseline, NO_COMPILE=1 its compile;
#   COMPARE_DECODE_GEMM=1 runs the benchmark again with TANDEM_CUDA_DECODE_GEMM=1)
. "$(dirname "$0")/gpu-common.sh" gpu-out build-gpu
export PYTHONUNBUFFERED=1
LOG=$OUT/decoder-check.log
: > "$LOG"

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv >> "$LOG" 2>&1
if [ -z "${NO_PYTORCH:-}" ]; then
  ARGS=(--json "$OUT/pytorch-decoder.json")
  [ -n "${NO_COMPILE:-}" ] && ARGS+=(--no-compile)
  timeout 330 python3 bench/pytorch_decoder_baseline.py "${ARGS[@]}" > "$OUT/pytorch-decoder.log" 2>&1 &
  PT=$!
fi
say "configure + build"
cmake -S . -B "$BUILD" "${CUDA_CONFIG[@]}" -DTANDEM_MPI=OFF >> "$LOG" 2>&1 || say "configure failed"
GPU_TESTS=$(gpu_test_targets "$BUILD")
timeout 400 cmake --build "$BUILD" -j"$(nproc)" --target $GPU_TESTS cuda_decoder_bench > "$OUT/build.log" 2>&1 ||
  { say "build failed"; grep -E "error" "$OUT/build.log" | head -20 | tee -a "$LOG"; }
say "built"
if [ -n "${PT:-}" ]; then wait "$PT"; say "pytorch baseline rc $?"; fi
say "ctest -L gpu"
(cd "$BUILD" && timeout 200 ctest -L gpu --output-on-failure --timeout 180 -j1) > "$OUT/gpu-tests.log" 2>&1
grep -E "tests passed|tests failed|\(Failed\)|\*\*\*|Passed|Skipped" "$OUT/gpu-tests.log" | tee -a "$LOG"
say "decoder benchmark"
timeout 240 "$BUILD/bench/cuda_decoder_bench" --json "$OUT/cuda-decoder.json" > "$OUT/cuda-decoder.log" 2>&1
say "decoder benchmark rc $?"
if [ -n "${COMPARE_DECODE_GEMM:-}" ]; then  # the same benchmark on the opt-in decode GEMM (its JSON in $BUILD)
  TANDEM_CUDA_DECODE_GEMM=1 timeout 240 "$BUILD/bench/cuda_decoder_bench" --json "$BUILD/cuda-decoder-decode-gemm.json" \
    >> "$OUT/cuda-decoder.log" 2>&1
  say "decoder benchmark on the decode GEMM rc $?"
fi
if command -v compute-sanitizer > /dev/null && [ "$(elapsed)" -lt 500 ]; then
  for tool in memcheck racecheck; do
    timeout $(( 560 - $(elapsed) )) compute-sanitizer --tool "$tool" --error-exitcode 9 \
      "$BUILD/tests/engine/cuda/cuda_decoder_kernels_test" >> "$OUT/sanitizer.log" 2>&1
    say "compute-sanitizer $tool on the decoder kernels: rc $?"
  done
fi
python3 - "$OUT" "$BUILD" <<'PY' | tee -a "$LOG"
import json, os, sys
out = sys.argv[1]
def load(n):
    try:
        return json.load(open(os.path.join(out, n)))
    except Exception:
        return {}
c, p = load("cuda-decoder.json"), load("pytorch-decoder.json")
try:
    lt = json.load(open(os.path.join(sys.argv[2], "cuda-decoder-decode-gemm.json")))
except Exception:
    lt = {}
rows = [("decode batch 1 (tokens/s)", c.get("decode_batch1_tokens_per_s"), p.get("eager_decode_batch1_tokens_per_s"),
         p.get("static_compile_decode_batch1_tokens_per_s")),
        ("decode batch 8 (tokens/s)", c.get("decode_batch8_tokens_per_s"), p.get("eager_decode_batch8_tokens_per_s"), None),
        ("decode batch 32 (tokens/s)", c.get("decode_batch32_tokens_per_s"), None, None),
        ("prefill 1k (tokens/s)", c.get("prefill_1024_tokens_per_s"), p.get("prefill_1024_tokens_per_s"), None),
        ("prefill 8k (tokens/s)", c.get("prefill_8192_tokens_per_s"), p.get("prefill_8192_tokens_per_s"), None),
        ("verify 16 / verify 1", c.get("verify16_over_verify1"),
         (p.get("eager_verify_ms_batch1", {}).get("16", 0) / p["eager_verify_ms_batch1"]["1"]) if p.get("eager_verify_ms_batch1") else None, None)]
f = lambda x: "-" if x is None else f"{x:,.2f}"
print(f"{'':28} {'tandem':>12} {'HF eager':>12} {'HF compile':>12}")
for r in rows:
    print(f"{r[0]:28} {f(r[1]):>12} {f(r[2]):>12} {f(r[3]):>12}")
print("decode GEMM:", c.get("decode_gemm"), "| on the decode GEMM (COMPARE_DECODE_GEMM=1): batch 1",
      lt.get("decode_batch1_tokens_per_s"), "tokens/s, verify 16 / 1", lt.get("verify16_over_verify1"))
print("verify ms at batch 1:", c.get("verify_ms_batch1"), "KV bytes/token:", c.get("kv_bytes_per_token"),
      "4k requests that fit:", c.get("requests_4k_fit"))
PY
