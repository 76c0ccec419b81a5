#!/usr/bin/env bash
# The CUDA backend on the GPU machine (gpu-machine.md): configures (Release, CUDA on, pcre2.h from
# .gpu-deps), builds the GPU tests and the benchmark with every core, runs `ctest -L gpu`, the CUDA
# scorer benchmark and the PyTorch baseline, and prints a summary table last. Logs and JSON go to $OUT
# (default ./gpu-out). A failing step is reported and the rest still run; the whole run stays within
# $BUDGET seconds (default 470): steps get at most what is left, optional ones are dropped when late.
# The benchmark also times every backend variant (TANDEM_CUDA_ATTENTION=tc2|tc2split|tc|simt, GEMM row
# tiers, timing and probe off) end to end, and the attention kernels and GEMM candidates one by one; the
# tables are last. BENCH_ARGS replaces the benchmark's parts (default: --profile --study --variants).
# SERVE_SCORERS="1" (or "1 2" on two GPUs) also builds the service and runs tools/gpu-serve-bench.sh
# last, with what is left of the budget; its table follows the others.
. "$(dirname "$0")/gpu-common.sh" gpu-out build-gpu
JOBS=$(nproc)
BUDGET=${BUDGET:-470}
: > "$OUT/steps.txt"

# step NAME TIMEOUT_S CMD...: runs CMD with its output in $OUT/NAME.log, records rc and seconds. The
# timeout is cut to what is left of the budget; with under 15 s left the step is skipped (rc 124).
step() {
  local name=$1 limit=$2
  shift 2
  local t0 rc left
  left=$(( BUDGET - $(elapsed) ))
  if [ "$left" -lt 15 ]; then
    printf '%-22s skipped: out of time\n' "$name" | tee -a "$OUT/steps.txt"
    return 124
  fi
  if [ "$limit" -gt "$left" ]; then limit=$left; fi
  t0=$(date +%s)
  echo "== $name (at $(elapsed) s): $*"
  timeout --kill-after=10 "$limit" "$@" > "$OUT/$name.log" 2>&1
  rc=$?
  printf '%-22s rc %3d  %4d s\n' "$name" "$rc" "$(( $(date +%s) - t0 ))" | tee -a "$OUT/steps.txt"
  if [ "$rc" -ne 0 ]; then tail -n 25 "$OUT/$name.log" | sed 's/^/    /'; fi
  return "$rc"
}

{
  nvidia-smi
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv
  nvcc --version | tail -2
  g++ --version | head -1
  cmake --version | head -1
  python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
} > "$OUT/machine.txt" 2>&1

# The GPU run needs none of the MPI service; if its part of the tree does not configure, leave it out.
step configure 180 cmake -S "$ROOT" -B "$BUILD" "${CUDA_CONFIG[@]}" ||
  step configure-no-mpi 180 cmake -S "$ROOT" -B "$BUILD" "${CUDA_CONFIG[@]}" -DTANDEM_MPI=OFF
grep -hE "tandem: CUDA backend" "$OUT"/configure*.log | sed 's/^/    /'

# Only what the GPU run needs: every test labelled gpu, and the benchmark.
GPU_TESTS=$(gpu_test_targets "$BUILD")
SERVE_SCORERS=${SERVE_SCORERS:-}
SERVE_TARGETS=""
if [ -n "$SERVE_SCORERS" ]; then SERVE_TARGETS="tandem tandem-loadgen"; fi
step build 420 cmake --build "$BUILD" -j"$JOBS" --target $GPU_TESTS cuda_scorer_bench $SERVE_TARGETS

step tests 240 bash -c "cd '$BUILD' && ctest -L gpu -V --timeout 240 -j1"
grep -E "tests passed|tests failed|Failed|\*\*\*" "$OUT/tests.log" | sed 's/^/    /'
# Informative numbers the tests print (FP16 errors, GEMM ranks, plan memory, determinism).
grep -hE "FP16 vs CPU|FP16 \(attention|fixture F|bit-identical|plan 160/40/160|k [0-9]+ n [0-9]+|not offered|\[  FAILED" \
  "$OUT/tests.log" > "$OUT/test-facts.txt" 2>/dev/null

# The benchmarks come before the diagnostics below: their numbers are the run's other purpose. The
# default backend runs first; then the kernel studies and the variants (each writes its JSON as it goes).
QUICK=""
if [ "$(elapsed)" -gt 250 ]; then QUICK=--quick; fi
# shellcheck disable=SC2086  # BENCH_ARGS is a list of flags
step bench 200 "$BUILD/bench/cuda_scorer_bench" ${BENCH_ARGS:---profile --study --variants} --json "$OUT/tandem.json" $QUICK
if ! grep -q '"w1"' "$OUT/tandem.json" 2>/dev/null && [ "$(elapsed)" -lt 400 ]; then
  # Nothing measured: the previous kernels and whole-bucket GEMMs, to have numbers at all.
  step bench-fallback 90 env TANDEM_CUDA_ATTENTION=tc TANDEM_CUDA_GEMM_TIERS=0 \
    "$BUILD/bench/cuda_scorer_bench" --quick --json "$OUT/tandem.json"
fi

# The PyTorch baseline was measured in full before (gpu-run2: W1 20.9 ms, W3 22.2 ms, 4096: 230k tok/s);
# a quick run keeps it in the same table.
step pytorch 120 python3 "$ROOT/bench/pytorch_scorer_baseline.py" --json "$OUT/pytorch.json" --quick

# Failed tests again without graphs, synchronizing after every step: names the step that breaks.
FAILED=$(grep -oE "[0-9]+ - [a-z_0-9]+ \((Failed|Timeout|SEGFAULT|Exception|Subprocess aborted|Not Run)" "$OUT/tests.log" \
  | awk '{print $3}' | sort -u | paste -sd'|')
if [ -n "$FAILED" ] && [ "$(elapsed)" -lt 400 ]; then
  step tests-debug 100 env TANDEM_CUDA_GRAPHS=0 TANDEM_CUDA_SYNC_STEPS=1 \
    bash -c "cd '$BUILD' && ctest -R '^($FAILED)\$' --output-on-failure --timeout 100"
  # Again on the previous attention kernel and whole-bucket GEMMs: passing here blames tc2 or the tiers.
  step tests-old-kernels 100 env TANDEM_CUDA_ATTENTION=tc TANDEM_CUDA_GEMM_TIERS=0 \
    bash -c "cd '$BUILD' && ctest -R '^($FAILED)\$' --output-on-failure --timeout 100"
fi
# The kernel tests under compute-sanitizer: out-of-bounds accesses, then shared-memory races in the
# attention kernels (the two that use barriers).
SANITIZER=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
KTEST=$BUILD/tests/engine/cuda/cuda_kernels_test
if [ -x "$SANITIZER" ] && [ -x "$KTEST" ] && [ "$(elapsed)" -lt 400 ]; then
  step memcheck 90 "$SANITIZER" --tool memcheck --error-exitcode 9 "$KTEST"
fi
if [ -x "$SANITIZER" ] && [ -x "$KTEST" ] && [ "$(elapsed)" -lt 420 ]; then
  step racecheck 90 "$SANITIZER" --tool racecheck --error-exitcode 9 "$KTEST" --gtest_filter='*Attention*'
fi
if [ -n "$SERVE_SCORERS" ]; then
  step serve 400 env SKIP_BUILD=1 BUILD="$BUILD" SCORERS="$SERVE_SCORERS" OUT="$OUT/serve" "$ROOT/tools/gpu-serve-bench.sh"
fi

echo
echo "== summary ($(elapsed) s; logs in $OUT)"
cat "$OUT/steps.txt"
grep -E "tests passed|tests failed" "$OUT/tests.log" 2>/dev/null
grep -E "^\s+[0-9]+ - " "$OUT/tests.log" 2>/dev/null | head -20
cat "$OUT/test-facts.txt" 2>/dev/null | head -20
python3 - "$OUT/tandem.json" "$OUT/pytorch.json" <<'PY'
import json, sys

def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except Exception as e:
        print(f"({path}: {e})")
        return {}

t, p = load(sys.argv[1]), load(sys.argv[2])

def lat(d, key):
    w = d.get(key)
    return f"{w['p50_ms']:.3f}/{w['p95_ms']:.3f}/{w['p99_ms']:.3f}" if w else "-"

def ratio(a, b):
    return f"{b / a:.1f}x" if a and b else "-"

print(f"{'':26}{'tandem ' + t.get('precision', '?'):>24}{'pytorch fp16 eager':>24}{'speedup':>9}")
for key, label in (("w1", "W1 p50/p95/p99 ms"), ("w3", "W3 one batch p50/p95/p99"), ("w3_split", "W3 split p50/p95/p99")):
    tk = t.get(key, {})
    pk = p.get("w3" if key == "w3_split" else key, {})
    print(f"{label:26}{lat(t, key):>24}{lat(p, 'w3' if key == 'w3_split' else key):>24}"
          f"{ratio(tk.get('p50_ms'), pk.get('p50_ms')):>9}")
if "w3_split" in t:
    print(f"{'  W3 split buckets':26}{t['w3_split'].get('buckets', ''):>24}")
if "p50_ms" in t.get("serving", {}):
    sv = t["serving"]
    print(f"{'serving batch p50/p95/p99':26}{lat(t, 'serving'):>24}   {sv['questions']} W1 questions, "
          f"{sv['questions_per_s']:,.0f} questions/s, bucket {sv['bucket']}")
pt = {r["tokens"]: r for r in p.get("throughput", [])}
for r in t.get("throughput", []):
    q = pt.get(r["tokens"], {})
    print(f"{'tokens/s at ' + str(r['tokens']):26}{r['tokens_per_s']:>24,.0f}{q.get('tokens_per_s', 0):>24,.0f}"
          f"{ratio(q.get('tokens_per_s'), r['tokens_per_s']) if q else '-':>9}")
for r in t.get("throughput", []):
    q = pt.get(r["tokens"], {})
    print(f"{'questions/s at ' + str(r['tokens']):26}{r['questions_per_s']:>24,.0f}{q.get('questions_per_s', 0):>24,.0f}")
m, pm = t.get("memory", {}), p.get("memory", {})
mib = lambda x: f"{x / 2**20:,.1f} MiB" if x else "-"
print(f"{'weights':26}{mib(m.get('weights_bytes')):>24}{mib(pm.get('weights_bytes')):>24}")
print(f"{'plans (all lowered)':26}{mib(m.get('plans_bytes')):>24}{'peak ' + mib(pm.get('device_peak_bytes')):>24}")
for b, v in m.get("plan_by_bucket", {}).items():
    if b in ("160/40/160", "512/128/512", "4096/1024/4096"):
        print(f"{'  plan ' + b:26}{mib(v):>24}")
for name in ("w1", "w3", "serving"):
    prof = t.get("profile", {}).get(name, {})
    if "categories" in prof:
        cats = sorted(prof["categories"].items(), key=lambda kv: -kv[1]["ms"])
        top = ", ".join(f"{k} {v['ms']:.2f}" for k, v in cats[:5])
        how = "in graph" if prof.get("in_graph") else "host launches"
        print(f"profile {name} ({prof['bucket']}, {how}, {prof['total_ms']:.2f} ms of steps): {top}")
study = t.get("study", {})
shapes = {}
for a in study.get("attention", []):
    if "kernel" in a:
        shapes.setdefault(a["shape"], []).append(f"{a['kernel']} {a['us']:.1f} us ({a['max_abs_diff']:.0e})")
for shape, cells in shapes.items():
    print(f"{'attention ' + shape:26}{'   '.join(cells)}")
best = {}
for g in study.get("gemm", []):
    b = best.setdefault(g["shape"], {"chosen": None, "fastest": None, "fastest_same": None})
    if g["chosen"]:
        b["chosen"] = g["us"]
    if b["fastest"] is None or g["us"] < b["fastest"]:
        b["fastest"] = g["us"]
    if g["same_bits"] and (b["fastest_same"] is None or g["us"] < b["fastest_same"]):
        b["fastest_same"] = g["us"]
for shape, b in best.items():
    f = lambda x: f"{x:.1f}" if x is not None else "-"
    print(f"gemm {shape:40} chosen {f(b['chosen']):>8} us, fastest {f(b['fastest']):>8}, fastest same bits {f(b['fastest_same']):>8}")
variants = t.get("variants", [])
if variants:
    print(f"{'variant':36}{'W1 p50':>9}{'W3 p50':>9}{'W3 split':>9}{'tok/s 4096':>12}  logits vs default")
for v in variants:
    if "error" in v:
        print(f"{v['variant']:36}  error: {v['error'][:80]}")
        continue
    same = "same bits" if v["bit_identical"] else f"W1 {v['w1_logits_max_diff']:.1e} W3 {v['w3_logits_max_diff']:.1e}"
    print(f"{v['variant']:36}{v['w1_p50_ms']:>9.3f}{v['w3_p50_ms']:>9.3f}{v['w3_split_p50_ms']:>9.3f}"
          f"{v['tokens_per_s_4096']:>12,.0f}  {same}")
print("goals: W1 p50 <= 0.5 ms, W3 p50 <= 8 ms, >= 600,000 tokens/s at 4096")
PY
if [ -n "$SERVE_SCORERS" ]; then
  echo "== serving (tools/gpu-serve-bench.sh, SCORERS=\"$SERVE_SCORERS\")"
  tail -n 12 "$OUT/serve.log" 2>/dev/null
fi
