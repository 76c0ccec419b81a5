#!/usr/bin/env bash
# The CUDA target's batch-1 step under its tuning switches (issue 9; PERF_NOTES "Fewer launches and wider
# splits"), in one device call: builds the decoder kernel/target/GEMM tests, bench/cuda_decoder and
# bench/cuda_gemm_study (Release, sm_90), runs those tests, the GEMM study at 1/16/128/512 rows (every K
# split count, same-bits check), then cuda_decoder_bench --decode-only once per variant, alone on the GPU:
#   VARIANTS="base:TANDEM_CUDA_FUSE_QKV=0 fused: fused+split128:TANDEM_CUDA_SPLIT_CTAS=128"   (name:ENV,--flag ...)
# SPEC_VARIANTS (same form) then runs bench/cuda_spec_bench $SPEC_ARGS once per variant (e.g. SPEC_ARGS="--batches 1
# --acceptance 6.5"). Logs and JSON go to $OUT; tables of the variants are printed last.
#   OUT=/tmp/out ./tools/gpu-decoder-tune.sh      (NO_STUDY=1 skips the study, NO_TESTS=1 the tests, TESTS="..."
#   replaces them, TEST_ENV="NAME=V ..." runs them under those switches, STUDY_ARGS=--stream adds to the study's
#   arguments, VARIANT_TIMEOUT=S limits each variant (default 150 s); no variant starts after BUDGET_S seconds, default 480, so the call ends inside the
#   device's 10 minutes)
. "$(dirname "$0")/gpu-common.sh" gpu-out build-gpu
VARIANTS=${VARIANTS:-"apart:TANDEM_CUDA_FUSE_QKV=0 fused:"}
LOG=$OUT/tune.log
: > "$LOG"

TESTS=${TESTS:-"cuda_decoder_kernels_test cuda_target_test cuda_gemm_test"}
say "configure + build"
cmake -S . -B "$BUILD" "${CUDA_CONFIG[@]}" -DTANDEM_MPI=OFF -DTANDEM_BENCH=ON >> "$LOG" 2>&1 || say "configure failed"
TARGETS="$TESTS cuda_decoder_bench"
[ -z "${NO_STUDY:-}" ] && TARGETS+=" cuda_gemm_study"
[ -n "${SPEC_VARIANTS:-}" ] && TARGETS+=" cuda_spec_bench"
# shellcheck disable=SC2086
timeout 420 cmake --build "$BUILD" -j"$(nproc)" --target $TARGETS > "$OUT/build.log" 2>&1 ||
  { say "build failed"; grep -E "error" "$OUT/build.log" | head -20 | tee -a "$LOG"; exit 1; }
say "built"
if [ -z "${NO_TESTS:-}" ]; then
  for t in $TESTS; do
    # shellcheck disable=SC2086
    env ${TEST_ENV:-} timeout 120 "$BUILD/tests/engine/cuda/$t" > "$OUT/$t.log" 2>&1
    say "$t rc $? ($(grep -cE '^\[       OK' "$OUT/$t.log") ok, $(grep -cE '^\[  FAILED  \] .*\(' "$OUT/$t.log") failed)"
  done
fi
if [ -z "${NO_STUDY:-}" ]; then
  timeout 150 "$BUILD/bench/cuda_gemm_study" --rows "${STUDY_ROWS:-1,16,128,512}" --reps 20 ${STUDY_ARGS:-} > "$OUT/gemm-study.json" 2> "$OUT/gemm-study.log"
  say "gemm study rc $?"
fi
# run_variants KIND BINARY "VARIANTS" ARGS...: BINARY ARGS --json $OUT/KIND-<name>.json once per name:ENV variant,
# alone on the GPU, none started after BUDGET_S seconds.
# A variant's part after the colon is a comma-separated list: NAME=VALUE items go to the environment, --flag
# items to the binary's arguments (e.g. "separate:--separate-qkv" or "u1:TANDEM_CUDA_STREAM_GEMM=untimed,--x").
run_variants() {
  local kind=$1 binary=$2 variants=$3 v name item
  shift 3
  for v in $variants; do
    [ "$(elapsed)" -gt "${BUDGET_S:-480}" ] && { say "out of time: $kind $v not run"; continue; }
    name=${v%%:*}
    local envs=() flags=()
    IFS=',' read -r -a items <<< "${v#*:}"
    for item in "${items[@]}"; do
      if [[ $item == --* ]]; then flags+=("$item"); elif [ -n "$item" ]; then envs+=("$item"); fi
    done
    env "${envs[@]}" timeout "${VARIANT_TIMEOUT:-150}" "$BUILD/bench/$binary" "$@" "${flags[@]}" \
      --json "$OUT/$kind-$name.json" > /dev/null 2> "$OUT/$kind-$name.log"
    say "$kind variant $name (${v#*:}) rc $?"
  done
}
run_variants decoder cuda_decoder_bench "$VARIANTS" --decode-only
# shellcheck disable=SC2086
run_variants spec cuda_spec_bench "${SPEC_VARIANTS:-}" ${SPEC_ARGS:-}
save_gemm_choices
python3 - "$OUT" $VARIANTS <<'PY' | tee -a "$LOG"
import json, os, sys
out = sys.argv[1]
print(f"{'variant':18} {'b1 tok/s':>9} {'b1 ms':>7} {'v16/v1':>7} {'b8 tok/s':>9} {'b32 tok/s':>10}")
for v in sys.argv[2:]:
    name = v.split(":", 1)[0]
    try:
        j = json.load(open(os.path.join(out, f"decoder-{name}.json")))
    except Exception:
        print(f"{name:18} (no result)")
        continue
    b1 = j.get("decode_batch1_tokens_per_s", 0)
    print(f"{name:18} {b1:9.1f} {1000 / b1 if b1 else 0:7.3f} {j.get('verify16_over_verify1', 0):7.3f} "
          f"{j.get('decode_batch8_tokens_per_s', 0):9.1f} {j.get('decode_batch32_tokens_per_s', 0):10.1f}")
PY
if [ -n "${SPEC_VARIANTS:-}" ]; then
python3 - "$OUT" $SPEC_VARIANTS <<'PY' | tee -a "$LOG"
import json, os, sys
out = sys.argv[1]
print(f"{'variant':10} {'drafter':12} {'batch':>5} {'accept':>6} {'settle':>7} {'draft':>7} {'verify':>7} {'round':>7}"
      f" {'tokens/s':>10} {'x plain':>7} {'plain tok/s':>11}")
for v in sys.argv[2:]:
    name = v.split(":", 1)[0]
    try:
        s = json.load(open(os.path.join(out, f"spec-{name}.json")))
    except Exception:
        print(f"{name:10} (no result)")
        continue
    plain = s.get("plain_decode", {})
    for d, dd in s.get("drafters", {}).items():
        if "refused" in dd:
            print(f"{name:10} {d:12} refused: {dd['refused'][:120]}")
        for b, runs in dd.get("batches", {}).items():
            for a, r in runs.items():
                if "skipped" in r:
                    continue
                print(f"{name:10} {d:12} {b:>5} {a:>6} {r['settle_ms']:7.3f} {r['draft_ms']:7.3f} {r['verify_ms']:7.3f}"
                      f" {r['round_ms']:7.3f} {r['tokens_per_s']:10,.1f} {r['speedup_vs_plain']:7.2f}"
                      f" {plain.get(b, {}).get('tokens_per_s', 0):11,.1f}")
PY
fi
