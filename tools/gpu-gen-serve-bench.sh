#!/usr/bin/env bash
# Served generation on one GPU (issue 11's one-H200 figures), in one call of under 10 minutes: builds
# tandem and tandem-gen-loadgen while tools/make_large_qwen3_checkpoint.py writes a random Qwen3-8B-shaped
# target and a z-lab Qwen3-8B-DFlash-b16-shaped drafter (BF16), computes the expected answers with
# `tandem generate --backend cuda` (plain greedy decoding), starts a job of a coordinator and one
# `generator` rank on GPU 0, and drives /v1/completions (every request streamed, every answer checked
# token for token) at concurrency 1, 8 and 32, with speculation and without (`"speculative": false`).
# Random weights accept nothing: the speculative rows say what a round costs when no draft is accepted,
# not what a trained drafter gains. Prints a table last; logs and JSON go to $OUT (at most 8 files).
#   OUT=/tmp/out ./tools/gpu-gen-serve-bench.sh   (CONCURRENCY="1 8 32", MAX_TOKENS=128, PROMPTS=32)
# A CPU dry run of the same steps on the shipped models (checks the script, not the figures):
#   OUT=/tmp/out SKIP_BUILD=1 BUILD=build TARGET_DIR=models/pylm DRAFTER_DIR=models/pylm-dflash2 VOCAB=6144 \
#     PROMPT_LEN="8 32" BACKEND=cpu CONCURRENCY="1 2" MAX_TOKENS=8 PROMPTS=4 ./tools/gpu-gen-serve-bench.sh
. "$(dirname "$0")/gpu-common.sh" gen-serve-out build-serve
WORK=${WORK:-/tmp/gen-serve}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1
CONCURRENCY=${CONCURRENCY:-1 8 32}
MAX_TOKENS=${MAX_TOKENS:-128}
PROMPTS=${PROMPTS:-32}
VOCAB=${VOCAB:-151936}
PROMPT_LEN=${PROMPT_LEN:-64 512}
BACKEND=${BACKEND:-cuda}
if [ "$BACKEND" = cuda ]; then
  PRECISION=bf16 BACKEND_YAML="{name: cuda, precision: bf16}" GENERATOR="{role: generator, device: 0}"
else
  PRECISION=f32 BACKEND_YAML="{name: cpu, precision: f32, threads: 1}" GENERATOR="{role: generator}"
fi
LOG=$OUT/gen-serve.log
: > "$LOG"
say() { echo "[$(elapsed) s] $*" | tee -a "$LOG" >&2; }  # gpu-common.sh's, on stderr
mkdir -p "$WORK"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >> "$LOG" 2>&1

TARGET=$(realpath -m "${TARGET_DIR:-$WORK/target}")
DRAFTER=$(realpath -m "${DRAFTER_DIR:-$WORK/drafter}")
if [ -z "${TARGET_DIR:-}" ]; then
  python3 tools/make_large_qwen3_checkpoint.py --target "$TARGET" --drafter "$DRAFTER" \
    > "$WORK/checkpoint.log" 2>&1 &
  CKPT=$!
fi
say "configure + build"
if [ -z "${SKIP_BUILD:-}" ]; then
  cmake -S . -B "$BUILD" "${CUDA_CONFIG[@]}" -DTANDEM_TESTS=OFF > "$WORK/configure.log" 2>&1 ||
    { tail -20 "$WORK/configure.log" | tee -a "$LOG"; exit 1; }
  cmake --build "$BUILD" -j"$(nproc)" --target tandem tandem-gen-loadgen > "$WORK/build.log" 2>&1 ||
    { grep -E "error" "$WORK/build.log" | head -20 | tee -a "$LOG"; exit 1; }
fi
say "built"
if [ -n "${CKPT:-}" ]; then
  wait "$CKPT" || { tail -20 "$WORK/checkpoint.log" | tee -a "$LOG"; exit 1; }
fi
[ -n "${CKPT:-}" ] && say "checkpoints: $(tail -1 "$WORK/checkpoint.log")"
TANDEM=$BUILD/launch/tandem

# Prompts of PROMPT_LEN random ids (none of the four special ids), one per line.
python3 - "$WORK/prompts.txt" "$PROMPTS" "$VOCAB" $PROMPT_LEN <<'PY'
import random, sys
rng = random.Random(7)
n, vocab, lo, hi = (int(x) for x in sys.argv[2:6])
with open(sys.argv[1], "w") as f:
    for _ in range(n):
        f.write(",".join(str(rng.randrange(4, vocab)) for _ in range(rng.randrange(lo, hi + 1))) + "\n")
PY
"$TANDEM" generate --backend "$BACKEND" --precision "$PRECISION" --target "$TARGET" --prompt-file "$WORK/prompts.txt" \
  --max-tokens "$MAX_TOKENS" > "$WORK/expect.json" 2> "$WORK/generate.log" ||
  { tail -20 "$WORK/generate.log" | tee -a "$LOG"; exit 1; }
say "expected answers from tandem generate (plain greedy, $BACKEND)"

PORT=8097
cat > "$WORK/job.yaml" <<EOF
version: 1
server: {host: 127.0.0.1, port: $PORT, io_threads: 4}
limits: {max_queue_sequences: 65536, request_timeout_ms: 600000, max_connections: 1024}
backend: $BACKEND_YAML
models:
  target: {dir: $TARGET}
  drafter: {dir: $DRAFTER}
generation: {slots: 32, kv_capacity: 1024, block_size: 16, max_queue_requests: 4096}
ranks:
  - role: coordinator
  - $GENERATOR
EOF
"$TANDEM" launch --config "$WORK/job.yaml" > "$WORK/job.log" 2>&1 &
JOB=$!
wait_healthy "$PORT" "$JOB" 300 || { say "the job did not come up"; tail -30 "$WORK/job.log" | tee -a "$LOG"; kill -INT "$JOB"; exit 1; }
say "job serving"

# The job's rounds and device-to-host bytes so far (/metrics), as "ROUNDS BYTES".
counters() {
  python3 - "$PORT" <<'PY'
import re, sys, urllib.request as u
text = u.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=30).read().decode()
def total(name):
    return sum(float(v) for v in re.findall(rf"^{name}{{[^}}]*}} (\S+)$", text, re.M))
print(f"{total('tandem_gen_rounds_total'):.0f} {total('tandem_gen_device_to_host_bytes_total'):.0f}")
PY
}
load() {  # load CONNECTIONS REQUESTS NAME [--no-speculation]
  [ "$(elapsed)" -lt "${DEADLINE:-540}" ] || { say "$3: skipped (past ${DEADLINE:-540} s)"; return; }
  local before after
  before=$(counters)
  "$BUILD/bench/tandem-gen-loadgen" --url "http://127.0.0.1:$PORT" --prompt-file "$WORK/prompts.txt" \
    --expect "0:0:$WORK/expect.json" --max-tokens "$MAX_TOKENS" --stream-every 1 --timeout-ms 300000 \
    --connections "$1" --requests "$2" ${4:-} > "$WORK/$3.json" 2> "$WORK/$3.err"
  local rc=$?
  after=$(counters)
  # What this load's rounds copied to the host (the table's last column): ids only, on a generator.
  echo "$before $after" > "$WORK/$3.d2h"
  say "$3: rc $rc $(python3 -c "import json;d=json.load(open('$WORK/$3.json'));print(d['ok'],'ok',round(d['tokens_per_s']),'tokens/s')" 2>/dev/null) (rounds, device-to-host bytes: $before -> $after)"
}
# Each target bucket (rows x sequences) lowers its plan the first time a round needs it (GEMM probes and
# timing, graph capture: seconds each), so every measured run repeats a warm-up run of the same load.
for c in $CONCURRENCY; do
  n=$(( c < 4 ? 8 : 2 * c ))
  for mode in spec plain; do
    flag=""
    [ "$mode" = plain ] && flag=--no-speculation
    load "$c" "$n" "warm-$mode-$c" $flag
    load "$c" "$n" "$mode-$c" $flag
  done
done
python3 -c "import urllib.request as u; print(u.urlopen('http://127.0.0.1:$PORT/metrics', timeout=30).read().decode())" \
  > "$OUT/metrics.txt" 2>&1
kill -INT "$JOB" 2>/dev/null
for _ in $(seq 1 40); do kill -0 "$JOB" 2>/dev/null || break; sleep 0.5; done
if kill -0 "$JOB" 2>/dev/null; then
  # Not stopped 20 s after SIGINT: each process of the job with its signal state (/proc: blocked, ignored,
  # caught; SIGUSR1 is bit 10, 0x200), while tandem launch still waits for it (--stop-timeout, 60 s).
  say "the job has not stopped 20 s after SIGINT; its processes:"
  for p in $(process_tree "$JOB"); do
    echo "pid $p: $(tr '\0' ' ' < /proc/"$p"/cmdline 2>/dev/null | cut -c1-120)"
    grep -E "^Sig(Blk|Ign|Cgt)" /proc/"$p"/status 2>/dev/null | tr '\n' ' '; echo
  done | tee -a "$LOG"
fi
for _ in $(seq 1 80); do kill -0 "$JOB" 2>/dev/null || break; sleep 0.5; done
if kill -0 "$JOB" 2>/dev/null; then
  say "the job did not stop within 60 s of SIGINT"
  kill -KILL "$JOB" 2>/dev/null
else
  wait "$JOB"
  say "job stopped: rc $?"
fi
tail -c 4000000 "$WORK/job.log" > "$OUT/job.log"

python3 - "$WORK" "$OUT" $CONCURRENCY <<'PY' | tee -a "$LOG"
import json, sys
work, out, cs = sys.argv[1], sys.argv[2], sys.argv[3:]
runs = {}
for c in cs:
    for mode in ("spec", "plain"):
        try:
            runs[f"{mode}-{c}"] = json.load(open(f"{work}/{mode}-{c}.json"))
            r0, b0, r1, b1 = (float(x) for x in open(f"{work}/{mode}-{c}.d2h").read().split())
            runs[f"{mode}-{c}"]["d2h_bytes_per_round"] = (b1 - b0) / (r1 - r0) if r1 > r0 else 0
        except Exception as e:
            runs[f"{mode}-{c}"] = {"error": str(e)}
json.dump(runs, open(f"{out}/results.json", "w"), indent=1)
print(f"{'run':10} {'ok':>5} {'tokens/s':>9} {'TTFT p50':>9} {'TTFT p99':>9} {'ITL p50':>8} {'ITL p99':>8} "
      f"{'TPOT p50':>9} {'lat p50':>9} {'lat p99':>9} {'d2h/round':>9}")
for name, d in runs.items():
    if "error" in d:
        print(name, d["error"])
        continue
    g = lambda k, p: d[k][p]
    print(f"{name:10} {d['ok']:>5} {d['tokens_per_s']:>9.1f} {g('ttft_ms','p50'):>9.1f} {g('ttft_ms','p99'):>9.1f} "
          f"{g('itl_ms','p50'):>8.2f} {g('itl_ms','p99'):>8.2f} {g('tpot_ms','p50'):>9.2f} "
          f"{g('latency_ms','p50'):>9.1f} {g('latency_ms','p99'):>9.1f} {d.get('d2h_bytes_per_round', -1):>9.0f}  "
          f"mismatched {d['mismatched']} lost {d['lost']}")
PY
grep -E "^tandem_gen_(rounds|drafted|accepted|device_to_host_bytes)|acceptance_length_(sum|count)" "$OUT/metrics.txt" \
  | head -14 | tee -a "$LOG"
# What a round copied from the GPU to the host, on average (a generator: token ids only).
python3 - "$OUT/metrics.txt" <<'PY' | tee -a "$LOG"
import re, sys
text = open(sys.argv[1]).read()
def total(name):
    return sum(float(v) for v in re.findall(rf"^{name}{{[^}}]*}} (\S+)$", text, re.M))
rounds, d2h = total("tandem_gen_rounds_total"), total("tandem_gen_device_to_host_bytes_total")
print(f"device-to-host: {d2h:.0f} bytes in {rounds:.0f} rounds, {d2h / rounds if rounds else 0:.0f} bytes a round")
PY
tar czf "$OUT/logs.tar.gz" -C "$WORK" --exclude=target --exclude=drafter . 2>/dev/null
say "done"
