#!/usr/bin/env bash
# The speculative decode benchmark on the GPU machine (issue 10), in one call of under 10 minutes, after the
# plain decode figures: configures and builds bench/cuda_decoder, bench/cuda_spec and the tiny GPU test of
# the latter (Release, sm_90), runs that test, the plain decoder benchmark (skipped with NO_DECODER=1, e.g.
# right after tools/gpu-check-decoder.sh) and cuda_spec_bench: a Qwen3-8B-shaped target with a DFlash v1
# b16 and a DFlash 2 b8 drafter, REPLAYED at acceptance 1, 3, 6.5 and B (bench/spec_replay). Logs and JSON
# go to $OUT; a summary table is printed last.
#   OUT=/tmp/spec ./tools/gpu-check-spec.sh      (SPEC_ARGS="--drafter-quantization int8 --drafter-quantization int4")
# SPEC_ARGS="--profile" adds each phase's device time by op (bench/cuda_spec/phase_profile.h); the summary then
# prints the draft's four largest ops per run.
. "$(dirname "$0")/gpu-common.sh" gpu-out build-gpu
LOG=$OUT/spec-check.log
: > "$LOG"

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv >> "$LOG" 2>&1
say "configure + build"
cmake -S . -B "$BUILD" "${CUDA_CONFIG[@]}" -DTANDEM_MPI=OFF >> "$LOG" 2>&1 || say "configure failed"
timeout 300 cmake --build "$BUILD" -j"$(nproc)" --target cuda_decoder_bench cuda_spec_bench cuda_spec_bench_test \
  > "$OUT/spec-build.log" 2>&1 || { say "build failed"; grep -E "error" "$OUT/spec-build.log" | head -20 | tee -a "$LOG"; }
say "built"
timeout 120 "$BUILD/tests/engine/cuda/cuda_spec_bench_test" > "$OUT/spec-test.log" 2>&1
say "cuda_spec_bench_test (tiny shape on the GPU) rc $?"
if [ -z "${NO_DECODER:-}" ]; then
  timeout 200 "$BUILD/bench/cuda_decoder_bench" --json "$OUT/cuda-decoder.json" > "$OUT/cuda-decoder.log" 2>&1
  say "decoder benchmark rc $?"
fi
LEFT=$(( 570 - $(elapsed) ))
say "speculative benchmark (up to $LEFT s)"
# shellcheck disable=SC2086
timeout "$LEFT" "$BUILD/bench/cuda_spec_bench" --json "$OUT/cuda-spec.json" ${SPEC_ARGS:-} \
  > /dev/null 2> "$OUT/cuda-spec.log"
say "speculative benchmark rc $?"
python3 - "$OUT" <<'PY' | tee -a "$LOG"
import json, os, sys
out = sys.argv[1]
def load(n):
    try:
        return json.load(open(os.path.join(out, n)))
    except Exception:
        return {}
s, c = load("cuda-spec.json"), load("cuda-decoder.json")
if c:
    print("plain decode (cuda_decoder_bench) tokens/s: batch 1 %s, 8 %s, 32 %s" % tuple(
        c.get("decode_batch%d_tokens_per_s" % b) for b in (1, 8, 32)))
plain = s.get("plain_decode", {})
print("plain decode (cuda_spec_bench, same run) tokens/s:",
      ", ".join(f"batch {b} {v['tokens_per_s']:,.1f}" for b, v in plain.items()))
print(f"{'drafter':10} {'batch':>5} {'accept':>6} {'meas':>6} {'settle':>7} {'draft':>7} {'verify':>7} {'round':>7}"
      f" {'tokens/s':>10} {'x plain':>7} {'drafter/verify':>14}")
for name, d in s.get("drafters", {}).items():
    if "refused" in d:
        print(f"{name:10} refused: {d['refused'][:160]}")
    for b, runs in d.get("batches", {}).items():
        for a, r in runs.items():
            if "skipped" in r:
                continue
            print(f"{name:10} {b:>5} {a:>6} {r['acceptance_measured']:6.2f} {r['settle_ms']:7.3f} {r['draft_ms']:7.3f}"
                  f" {r['verify_ms']:7.3f} {r['round_ms']:7.3f} {r['tokens_per_s']:10,.1f} {r['speedup_vs_plain']:7.2f}"
                  f" {100 * r['drafter_overhead_of_verify']:13.1f}%")
for name, d in s.get("drafters", {}).items():
    for b, runs in d.get("batches", {}).items():
        for a, r in runs.items():
            p = r.get("profile", {}).get("draft")
            if p:
                top = list(p["categories"].items())[:4]
                print(f"profile {name} batch {b} acceptance {a}: draft steps {p['steps_ms']:.3f} ms: "
                      + ", ".join(f"{c} {v['ms']:.3f}" for c, v in top))
PY
