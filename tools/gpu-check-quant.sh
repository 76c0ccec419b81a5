#!/usr/bin/env bash
# The quantized drafter's figures on the GPU machine (issue 14), in one call of under 10 minutes:
#  1. the kernel study (cuda_drafter_quant_bench --kernels): both qgemm layouts, the packed one in both mappings
#     (sliced, whole-K), and the dense decode GEMM on the Qwen3-8B drafter's matrices at 1, 16, 128 and 512 rows,
#     weights rotated past the L2;
#  2. ncu on one q/o launch: the sliced kernels (regex qgemm_tc_[fb]) launch 8 times a variant in the study (int8,
#     int8 packed, int4, int4 packed), so --launch-skip 27 is int4 packed's fourth; the whole-K ones (regex
#     qgemm_tc_whole_k) 8 times for int8, then int4, so 11 is int4's fourth. NCU_RUNS="tc_[fb]:27:name:16" picks
#     runs (kernel-name regex suffix:skip:name:rows, space-separated); NO_NCU=1 skips it;
#  2b. (torch) bench/pytorch_qgemm_baseline.py on the same matrices and rows: torch.matmul on BF16, tinygemm int4
#     (torch._weight_int4pack_mm, group 64) and per-column int8 (torch._weight_int8pack_mm);
#  3. cuda_spec_bench at acceptance 6.5, BF16 and int4 drafters, in each of LAYOUTS (default "packed wholek"):
#     ckpt (TANDEM_CUDA_QGEMM_PACKED=0), packed (the default), wholek (packed, every bucket whole-K:
#     TANDEM_CUDA_QGEMM_WHOLE_K_ROWS=1); SPEC_BATCHES (default 1) picks the batches, e.g. "1,8,32"; SPEC_ARGS adds
#     arguments (e.g. "--profile" for each step's time by op, "--draft-vocab 32768").
#  4. (only when STEPS names it: "source") ncu's full set on the packed int4 launch of step 2, as its SASS with
#     each instruction's stall samples (ncu --page source --print-source sass --csv): where a chunk's
#     instructions come from and which ones wait.
# STEPS picks the steps (default "study torch ncu spec"). At most 8 files come back from a call, so everything lands
# in eight: quant.log (the summary, printed last), kernels.json, torch-qgemm.json, ncu.txt, spec-<layout>.json
# (two layouts: more would crowd out build.log and, with "source", sass-stalls.csv).
#   OUT=$OUT ./tools/gpu-check-quant.sh          STEPS=source OUT=$OUT ./tools/gpu-check-quant.sh
. "$(dirname "$0")/gpu-common.sh" gpu-out build-gpu
LOG=$OUT/quant.log
: > "$LOG"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv >> "$LOG" 2>&1
say "configure + build"
{ cmake -S . -B "$BUILD" "${CUDA_CONFIG[@]}" -DTANDEM_MPI=OFF &&
  timeout 300 cmake --build "$BUILD" -j"$(nproc)" --target cuda_drafter_quant_bench cuda_spec_bench; } \
  > "$OUT/build.log" 2>&1 || { say "build failed"; grep -E "error" "$OUT/build.log" | head -20 | tee -a "$LOG"; exit 1; }
say "built"

STEPS=" ${STEPS:-study torch ncu spec} "
[ -n "${NO_NCU:-}" ] && STEPS=${STEPS/ ncu / }
if [[ $STEPS == *" study "* ]]; then
  timeout 120 "$BUILD/bench/cuda_drafter_quant_bench" --kernels > "$OUT/kernels.json" 2>> "$LOG"
  say "kernel study rc $?"
fi

if [[ $STEPS == *" torch "* ]]; then  # the PyTorch baseline on the same matrices, in the same call
  timeout 150 python3 bench/pytorch_qgemm_baseline.py --json "$OUT/torch-qgemm.json" >> "$LOG" 2>&1
  say "PyTorch baseline rc $?"
fi

if [[ $STEPS == *" source "* ]]; then
  timeout 200 ncu --clock-control none --set full --kernel-name 'regex:qgemm_tc_[fb]' --launch-skip 27 --launch-count 1 \
    --page source --print-source sass --csv \
    "$BUILD/bench/cuda_drafter_quant_bench" --kernels --kernel-shape 4096,4096 --kernel-rows 16 --reps 5 \
    > "$OUT/sass-stalls.csv" 2>> "$LOG"
  say "ncu source page rc $? ($(wc -l < "$OUT/sass-stalls.csv") lines)"
fi

if [[ $STEPS == *" ncu "* ]]; then
  : > "$OUT/ncu.txt"
  read -r -a NCU_LIST <<< "${NCU_RUNS:-tc_[fb]:27:int4-packed-sliced-512:512 tc_whole_k:11:int4-packed-whole-K-512:512}"
  for run in "${NCU_LIST[@]}"; do
    IFS=: read -r kernel skip what rows <<< "$run"
    echo "=== qgemm_$kernel launch-skip $skip ($what, ${rows:-16} rows)" >> "$OUT/ncu.txt"
    timeout 90 ncu --clock-control none --kernel-name regex:qgemm_$kernel --launch-skip "$skip" --launch-count 1 \
      --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
      --section SpeedOfLight --section LaunchStats --section Occupancy \
      "$BUILD/bench/cuda_drafter_quant_bench" --kernels --kernel-shape 4096,4096 --kernel-rows "${rows:-16}" --reps 5 \
      >> "$OUT/ncu.txt" 2>&1
    say "ncu ($what) rc $?"
  done
fi

read -r -a LAYOUT_LIST <<< "${LAYOUTS:-packed wholek}"
read -r -a SPEC_EXTRA <<< "${SPEC_ARGS:-}"
for i in "${!LAYOUT_LIST[@]}"; do
  layout=${LAYOUT_LIST[$i]}
  [[ $STEPS == *" spec "* ]] || break
  LEFT=$(( (560 - $(elapsed)) / (${#LAYOUT_LIST[@]} - i) ))  # the time left, shared by the layouts to come
  [ "$LEFT" -gt 30 ] || { say "no time left for the $layout round"; break; }
  say "cuda_spec_bench, $layout layout (up to $LEFT s)"
  env TANDEM_CUDA_QGEMM_PACKED=$([ "$layout" = ckpt ] && echo 0 || echo 1) \
    TANDEM_CUDA_QGEMM_WHOLE_K_ROWS=$([ "$layout" = wholek ] && echo 1 || echo 0) timeout "$LEFT" "$BUILD/bench/cuda_spec_bench" \
    --batches "${SPEC_BATCHES:-1}" --acceptance 6.5 --drafter-quantization int4 "${SPEC_EXTRA[@]}" \
    --json "$OUT/spec-$layout.json" \
    > /dev/null 2>> "$LOG"
  say "cuda_spec_bench $layout rc $?"
done

python3 - "$OUT" <<'PY' | tee -a "$LOG"
import json, os, sys
out = sys.argv[1]
def load(n):
    try:
        return json.load(open(os.path.join(out, n)))
    except Exception:
        return {}
k = load("kernels.json").get("kernels", [])
torch_runs = {(e["shape"], e["rows"]): e for e in load("torch-qgemm.json").get("kernels", [])}
for e in k:
    ks = {q["kernel"]: q["median_us"] for q in e.get("kernels", [])}
    # PyTorch's kernels on the same matrix and rows, timed in this call (bench/pytorch_qgemm_baseline.py)
    for q in torch_runs.get((e.get("shape"), e.get("rows")), {}).get("kernels", []):
        if "median_us" in q:
            ks[q["kernel"]] = q["median_us"]
    dense = ks.get("dense bf16 decode GEMM")
    line = f"{e.get('shape', '?'):>14} rows {e.get('rows', '?'):>4}"
    for name in ("qgemm int4 tensor cores", "qgemm int4 tensor cores packed", "qgemm int4 tensor cores packed whole-K",
                 "qgemm int8 tensor cores", "qgemm int8 tensor cores packed", "qgemm int8 tensor cores packed whole-K",
                 "dense bf16 decode GEMM", "torch int4 tinygemm", "torch int8 per-column", "torch bf16 matmul"):
        if name in ks:
            rel = f" ({ks[name] / dense:.2f}x)" if dense and name != "dense bf16 decode GEMM" else ""
            line += f" | {name.replace('qgemm ', '').replace('tensor cores', 'tc')} {ks[name]:.1f}{rel}"
    print(line)
for (shape, rows), e in torch_runs.items():  # a PyTorch kernel that failed or disagrees with its dense reference
    for q in e.get("kernels", []):
        if "error" in q or q.get("max_rel_diff", 0) > 0.02:
            print(f"torch {q['kernel']} {shape} rows {rows}: {q.get('error', q.get('max_rel_diff'))}")
for layout in ("ckpt", "packed", "wholek"):
    s = load(f"spec-{layout}.json")
    for name, d in s.get("drafters", {}).items():
        if "refused" in d:
            print(f"{layout:6} {name:10} refused: {d['refused'][:160]}")
        for b, runs in d.get("batches", {}).items():
            for a, r in runs.items():
                if "skipped" in r:
                    continue
                print(f"{layout:6} {name:10} batch {b} accept {a}: draft {r['draft_ms']:.3f} ms, settle "
                      f"{r['settle_ms']:.3f}, verify {r['verify_ms']:.3f}, round {r['round_ms']:.3f}, "
                      f"{r['tokens_per_s']:,.1f} tok/s")
PY
say "done"
