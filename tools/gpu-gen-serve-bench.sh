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
# Two GPUs (issue 13): TOPOLOGY=split puts a `target` rank on GPU 0 and a `drafter` rank on GPU 1 (tap rows and
# drafts over NCCL; generation.overlap on), split-no-overlap the same with overlap off, generator (default) one
# `generator` rank on GPU 0. Each load's row adds the data plane per round (the target's send phase in us and
# the bytes it moved to and from its drafter). With a split topology, LONG_PROMPTS="1024 8192" adds loads of
# single requests with prompts of those lengths (the prompt's context crossing to the drafter; kv_capacity grows
# to hold them), and KILL_DRAFTER=1 a last load at the largest concurrency during which the drafter rank is
# killed (SIGKILL) 2 s in: every request must still complete with its exact answer. tools/gpu-two-gpus.sh runs
# the issue's whole sequence.
. "$(dirname "$0")/gpu-common.sh" gen-serve-out build-serve
WORK=${WORK:-/tmp/gen-serve}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1
CONCURRENCY=${CONCURRENCY:-1 8 32}
MAX_TOKENS=${MAX_TOKENS:-128}
PROMPTS=${PROMPTS:-32}
VOCAB=${VOCAB:-151936}
PROMPT_LEN=${PROMPT_LEN:-64 512}
BACKEND=${BACKEND:-cuda}
TOPOLOGY=${TOPOLOGY:-generator}
LONG_PROMPTS=${LONG_PROMPTS:-}
OVERLAP=true
if [ "$BACKEND" = cuda ]; then
  PRECISION=bf16 BACKEND_YAML="{name: cuda, precision: bf16}" DEV0=", device: 0" DEV1=", device: 1"
else
  PRECISION=f32 BACKEND_YAML="{name: cpu, precision: f32, threads: 1}" DEV0="" DEV1=""
fi
case "$TOPOLOGY" in
  generator) RANKS="  - {role: generator$DEV0}" ;;
  split | split-no-overlap) RANKS="  - {role: target$DEV0}
  - {role: drafter$DEV1}" ;;
  *) echo "TOPOLOGY is '$TOPOLOGY': generator, split or split-no-overlap" >&2; exit 2 ;;
esac
[ "$TOPOLOGY" = split-no-overlap ] && OVERLAP=false
if [ "$TOPOLOGY" = generator ] && { [ -n "$LONG_PROMPTS" ] || [ -n "${KILL_DRAFTER:-}" ]; }; then
  echo "LONG_PROMPTS and KILL_DRAFTER need a drafter rank: TOPOLOGY=split or split-no-overlap" >&2
  exit 2
fi
# The KV capacity holds the longest prompt and its answer (and a block past it), in multiples of 64, 1,024 at least.
LONGEST=$(echo "$PROMPT_LEN $LONG_PROMPTS" | tr ' ' '\n' | sort -n | tail -1)
NEED=$(( (LONGEST + MAX_TOKENS + 16 + 63) / 64 * 64 ))
KV_CAPACITY=${KV_CAPACITY:-$(( NEED > 1024 ? NEED : 1024 ))}
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
for n in $LONG_PROMPTS; do  # two prompts of exactly n ids each, and their answers
  python3 - "$WORK/prompts-$n.txt" "$VOCAB" "$n" <<'PY'
import random, sys
vocab, n = int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(n)
with open(sys.argv[1], "w") as f:
    for _ in range(2):
        f.write(",".join(str(rng.randrange(4, vocab)) for _ in range(n)) + "\n")
PY
  "$TANDEM" generate --backend "$BACKEND" --precision "$PRECISION" --target "$TARGET" \
    --prompt-file "$WORK/prompts-$n.txt" --max-tokens "$MAX_TOKENS" > "$WORK/expect-$n.json" 2>> "$WORK/generate.log" ||
    { tail -20 "$WORK/generate.log" | tee -a "$LOG"; exit 1; }
done
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
generation: {slots: 32, kv_capacity: $KV_CAPACITY, block_size: 16, max_queue_requests: 4096, overlap: $OVERLAP}
health: {exit_grace_ms: 600000}
ranks:
  - role: coordinator
$RANKS
EOF
say "topology $TOPOLOGY (overlap $OVERLAP), kv_capacity $KV_CAPACITY"
"$TANDEM" launch --config "$WORK/job.yaml" > "$WORK/job.log" 2>&1 &
JOB=$!
wait_healthy "$PORT" "$JOB" 300 || { say "the job did not come up"; tail -30 "$WORK/job.log" | tee -a "$LOG"; kill -INT "$JOB"; exit 1; }
say "job serving"

# The job's counters so far (/metrics), "ROUNDS D2H_BYTES SEND_SECONDS DATA_PLANE_BYTES": what the target ranks'
# rounds copied to the host, spent sending tap rows to drafter ranks, and moved to and from them.
counters() {
  python3 - "$PORT" <<'PY'
import re, sys, urllib.request as u
text = u.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=30).read().decode()
def total(name, labels=""):
    return sum(float(v) for v in re.findall(rf"^{name}{{[^}}]*{labels}[^}}]*}} (\S+)$", text, re.M))
send = total("tandem_gen_round_seconds_total", 'phase="send"')
print(f"{total('tandem_gen_rounds_total'):.0f} {total('tandem_gen_device_to_host_bytes_total'):.0f} {send:.6f} "
      f"{total('tandem_gen_data_plane_bytes_total'):.0f}")
PY
}
# load CONNECTIONS REQUESTS NAME [--no-speculation]; PROMPTS_FILE and EXPECT_FILE replace the prompts and their
# answers, and KILL_AT_S=S kills the drafter rank (MPI rank 2) S seconds into the load, as a crashed rank dies.
load() {
  [ "$(elapsed)" -lt "${DEADLINE:-540}" ] || { say "$3: skipped (past ${DEADLINE:-540} s)"; return; }
  local before after gen rc p
  before=$(counters)
  "$BUILD/bench/tandem-gen-loadgen" --url "http://127.0.0.1:$PORT" --prompt-file "${PROMPTS_FILE:-$WORK/prompts.txt}" \
    --expect "0:0:${EXPECT_FILE:-$WORK/expect.json}" --max-tokens "$MAX_TOKENS" --stream-every 1 \
    --timeout-ms 300000 --connections "$1" --requests "$2" ${4:-} > "$WORK/$3.json" 2> "$WORK/$3.err" &
  gen=$!
  if [ -n "${KILL_AT_S:-}" ]; then
    sleep "$KILL_AT_S"
    for p in $(process_tree "$JOB"); do
      if tr '\0' '\n' < /proc/"$p"/environ 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=2" &&
         tr '\0' ' ' < /proc/"$p"/cmdline 2>/dev/null | grep -q " serve "; then
        kill -KILL "$p" && say "$3: killed the drafter rank (pid $p) $KILL_AT_S s in"
      fi
    done
  fi
  wait "$gen"
  rc=$?
  after=$(counters)
  # The counters before and after (the table's last columns: per round, device-to-host bytes, send time, data plane).
  echo "$before $after" > "$WORK/$3.d2h"
  say "$3: rc $rc $(python3 -c "import json;d=json.load(open('$WORK/$3.json'));print(d['ok'],'ok',round(d['tokens_per_s']),'tokens/s')" 2>/dev/null) (counters $before -> $after)"
}
# Each target bucket (rows x sequences) lowers its plan the first time a round needs it (GEMM probes and
# timing, graph capture: seconds each), so every measured run repeats a warm-up run of the same load.
RUNS=""
for c in $CONCURRENCY; do
  n=$(( c < 4 ? 8 : 2 * c ))
  for mode in spec plain; do
    flag=""
    [ "$mode" = plain ] && flag=--no-speculation
    load "$c" "$n" "warm-$mode-$c" $flag
    load "$c" "$n" "$mode-$c" $flag
    RUNS+=" $mode-$c"
  done
done
for n in $LONG_PROMPTS; do  # a warm-up request (its prefill plan), then two measured ones, one at a time
  PROMPTS_FILE=$WORK/prompts-$n.txt EXPECT_FILE=$WORK/expect-$n.json load 1 1 "warm-ctx-$n"
  PROMPTS_FILE=$WORK/prompts-$n.txt EXPECT_FILE=$WORK/expect-$n.json load 1 2 "ctx-$n"
  RUNS+=" ctx-$n"
done
if [ -n "${KILL_DRAFTER:-}" ]; then
  c=$(echo "$CONCURRENCY" | tr ' ' '\n' | sort -n | tail -1)
  KILL_AT_S=2 load "$c" $(( 4 * c < 16 ? 16 : 4 * c )) "kill-$c"
  RUNS+=" kill-$c"
  python3 - "$PORT" <<'PY' 2>&1 | tee -a "$LOG"
import sys, urllib.error, urllib.request as u
try:
    print("health after the kill: 200", u.urlopen(f"http://127.0.0.1:{sys.argv[1]}/health", timeout=5).read().decode())
except urllib.error.HTTPError as e:
    print("health after the kill:", e.code, e.read().decode())
PY
fi
python3 -c "import urllib.request as u; print(u.urlopen('http://127.0.0.1:$PORT/metrics', timeout=30).read().decode())" \
  > "$OUT/metrics-$TOPOLOGY.txt" 2>&1
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
tail -c 4000000 "$WORK/job.log" > "$OUT/job-$TOPOLOGY.log"

python3 - "$WORK" "$OUT" "$TOPOLOGY" $RUNS <<'PY' | tee -a "$LOG"
import json, sys
work, out, topology, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
runs = {}
for name in names:
    try:
        d = json.load(open(f"{work}/{name}.json"))
        r0, b0, s0, p0, r1, b1, s1, p1 = (float(x) for x in open(f"{work}/{name}.d2h").read().split())
        n = r1 - r0
        d.update(rounds=n, send_us=1e6 * (s1 - s0), data_plane_bytes=p1 - p0,
                 d2h_bytes_per_round=(b1 - b0) / n if n else 0, send_us_per_round=1e6 * (s1 - s0) / n if n else 0,
                 data_plane_bytes_per_round=(p1 - p0) / n if n else 0)
        runs[name] = d
    except Exception as e:
        runs[name] = {"error": str(e)}
json.dump({"topology": topology, "runs": runs}, open(f"{out}/results-{topology}.json", "w"), indent=1)
print(f"topology {topology}")
print(f"{'run':10} {'ok':>5} {'tokens/s':>9} {'TTFT p50':>9} {'TTFT p99':>9} {'ITL p50':>8} {'ITL p99':>8} "
      f"{'TPOT p50':>9} {'lat p50':>9} {'lat p99':>9} {'d2h/round':>9} {'send us/rd':>10} {'plane B/rd':>10}")
for name, d in runs.items():
    if "error" in d:
        print(name, d["error"])
        continue
    g = lambda k, p: d[k][p]
    print(f"{name:10} {d['ok']:>5} {d['tokens_per_s']:>9.1f} {g('ttft_ms','p50'):>9.1f} {g('ttft_ms','p99'):>9.1f} "
          f"{g('itl_ms','p50'):>8.2f} {g('itl_ms','p99'):>8.2f} {g('tpot_ms','p50'):>9.2f} "
          f"{g('latency_ms','p50'):>9.1f} {g('latency_ms','p99'):>9.1f} {d['d2h_bytes_per_round']:>9.0f} "
          f"{d['send_us_per_round']:>10.1f} {d['data_plane_bytes_per_round']:>10.0f}  "
          f"mismatched {d['mismatched']} lost {d['lost']}")
    if name.startswith("ctx-"):
        print(f"{'':10} a {name[4:]}-token prompt's request: {d['data_plane_bytes'] / 2:,.0f} data-plane bytes, "
              f"{d['send_us'] / 2:,.0f} us sending, in {d['rounds'] / 2:.0f} rounds")
PY
grep -E "^tandem_gen_(rounds|drafted|accepted|device_to_host_bytes)|acceptance_length_(sum|count)" "$OUT/metrics-$TOPOLOGY.txt" \
  | head -14 | tee -a "$LOG"
# What a round copied from the GPU to the host, on average (a generator: token ids only).
python3 - "$OUT/metrics-$TOPOLOGY.txt" <<'PY' | tee -a "$LOG"
import re, sys
text = open(sys.argv[1]).read()
def total(name):
    return sum(float(v) for v in re.findall(rf"^{name}{{[^}}]*}} (\S+)$", text, re.M))
rounds, d2h = total("tandem_gen_rounds_total"), total("tandem_gen_device_to_host_bytes_total")
print(f"device-to-host: {d2h:.0f} bytes in {rounds:.0f} rounds, {d2h / rounds if rounds else 0:.0f} bytes a round")
PY
tar czf "$OUT/logs-$TOPOLOGY.tar.gz" -C "$WORK" --exclude=target --exclude=drafter . 2>/dev/null
say "done"
